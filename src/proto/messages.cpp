#include <fabperf/core/error.hpp>
#include <fabperf/proto/agent_result.hpp>
#include <fabperf/proto/proto.hpp>

#include <fmt/format.h>
#include <openssl/rand.h>
#include <algorithm>
#include <charconv>

namespace fabperf::proto {

using nlohmann::json;

namespace {
// Exactly out.size() bytes as lower-case hex into out; false when the text is anything else.
bool from_lower_hex(std::string_view hex, std::span<std::uint8_t> out) {
  if (hex.size() != 2 * out.size() || hex.find_first_not_of("0123456789abcdef") != std::string_view::npos) return false;
  for (std::size_t i = 0; i < out.size(); ++i)
    (void)std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, out[i], 16);
  return true;
}
}  // namespace

Token token_from_hex(std::string_view hex, const std::string& context) {
  Token t{};
  if (hex.size() != 2 * kTokenBytes)
    throw ProtocolError(fmt::format("{}: token must be {} hex digits", context, 2 * kTokenBytes));
  if (!from_lower_hex(hex, t)) throw ProtocolError(fmt::format("{}: token is not lower-case hex", context));
  return t;
}

Token random_token() {
  Token t{};
  if (RAND_bytes(t.data(), static_cast<int>(t.size())) != 1) {
    throw SystemError("RAND_bytes", "test token", "OpenSSL random generator failed");
  }
  return t;
}

std::vector<std::string> local_capabilities() {
  return {std::string(auth::kCapability)};
}

namespace {
constexpr std::int64_t kMaxInstant = INT64_MAX / 4;
constexpr std::size_t kMaxName = 256;

std::array<std::uint8_t, 16> gid_from_hex(std::string_view hex, const std::string& context) {
  std::array<std::uint8_t, 16> gid{};
  if (!from_lower_hex(hex, gid))
    throw ProtocolError(fmt::format("{}: must be 32 lower-case hex digits (a 128-bit GID)", context));
  return gid;
}

std::uint32_t node_index_item(const json& e, const std::string& context) {
  if (!e.is_number_unsigned() || e.get<std::uint64_t>() >= kMaxList)
    throw ProtocolError(fmt::format("{}: not a node index", context));
  return e.get<std::uint32_t>();
}

// In ErrorCode's order.
constexpr std::string_view kErrorCodes[] = {"busy",    "cleaning", "limit",        "protocol",
                                            "version", "refused",  "setup_failed", "start_failed",
                                            "result",  "no_key",   "key_required", "other"};

ErrorCode error_code_from(std::string_view s, const std::string& /*context*/) {  // `other` when unknown
  const auto* it = std::ranges::find(kErrorCodes, s);
  return it == std::end(kErrorCodes) ? ErrorCode::other : static_cast<ErrorCode>(it - std::begin(kErrorCodes));
}
}  // namespace

std::string_view to_string(ErrorCode c) {
  return kErrorCodes[static_cast<int>(c)];
}

// ---- Each message's fields, once for both directions (fields.hpp) -------------------------

static void fields(auto& v, Hello& m) {
  v("proto_min", m.proto_min, 1, 65535);
  v("proto_max", m.proto_max, m.proto_min, 65535);
  // A peer of another version may not share the rest of this layout: the caller names both
  // versions instead of complaining about a field.
  if (v.kIn && (m.proto_min > kVersion || m.proto_max < kVersion)) return;
  v("coordinator", m.coordinator, kMaxName);
  v("caps", m.caps, kMaxCaps, kMaxCapLength);
}

static void fields(auto& v, HelloOk& m) {
  v("proto", m.proto, 1, 65535);
  v("hostname", m.hostname, kMaxName);
  v("version", m.version, 64);
  v("pid", m.pid, 0, INT32_MAX);
  v("caps", m.caps, kMaxCaps, kMaxCapLength);
  v("address", m.address, kMaxName);
}

static void fields(auto& v, Ping& m) {
  v("seq", m.seq, 0, UINT32_MAX);
}

static void fields(auto& v, Pong& m) {
  v("seq", m.seq, 0, UINT32_MAX);
  v("t_rx", m.t_rx, 0, kMaxInstant);
  v("t_tx", m.t_tx, m.t_rx, kMaxInstant);
  v.sparse("t_wall", m.t_wall, 0, kMaxInstant);
}

static void fields(auto& v, RdmaEndpoint& e) {
  v("node", e.node, 0, kMaxList);
  v("peer", e.peer, 0, kMaxList);
  if (v.kIn && e.peer == e.node)
    throw ProtocolError(fmt::format("{}: the node's own index {}, not another node", v.ctx("peer"), e.peer));
  v("conn", e.conn, 0, kMaxList - 1);
  v("qpn", e.qpn, 1, 0xffffff);  // QP numbers are 24 bits; 0 is the SMI QP
  v("psn", e.psn, 0, 0xffffff);
  v("lid", e.lid, 0, 0xffff);
  v("gid", e.gid, &gid_from_hex);
  v("addr", e.addr, 0, UINT64_MAX);
  v("len", e.len, 1, 2 * limits::kMaxBuffsize);
  v("rkey", e.rkey, 0, UINT32_MAX);
}
constexpr auto kEndpoint = &JsonIn::decode<RdmaEndpoint>;  // named "<list>[i]"

// The fields SETUP_SERVER and SETUP_CLIENT share.
static void spec_fields(auto& v, auto& m) {
  v("test_id", m.test_id, 64);
  v("token", m.token, &token_from_hex);
  v("spec", m.spec, &spec_from_json);
  v("node_index", m.node_index, 0, kMaxList);
}

static void fields(auto& v, SetupServer& m) {
  spec_fields(v, m);
  v("expect_connections", m.expect_connections, 1, kMaxList);
  v.opt("any_address", m.any_address);
  v.sparse("rdma_clients", m.rdma_clients, kMaxList, &node_index_item);
  if (const std::uint64_t qps = std::uint64_t{m.rdma_clients.size()} * m.spec.connections_per_pair();
      v.kIn && qps > kMaxList)
    throw ProtocolError(fmt::format("{}: {} queue pairs exceed the limit of {}", v.ctx("rdma_clients"), qps, kMaxList));
  v.sparse("link_addrs", m.link_addrs, 64, kMaxName);
}

static void fields(auto& v, SetupServerOk& m) {
  v("data_port", m.data_port, 0, 65535);
  v("warnings", m.warnings, 1000);
  v.sparse("rdma", m.rdma, kMaxList, kEndpoint);
}

static void fields(auto& v, Target& x) {
  v("node_index", x.node_index, 0, kMaxList);
  v("host", x.host, kMaxName);
  v("port", x.port, 0, 65535);
  v.opt("link_hosts", x.link_hosts, 64, kMaxName);
  v.sparse("rdma", x.rdma, kMaxList, kEndpoint);
}

static void fields(auto& v, SetupClient& m) {
  spec_fields(v, m);
  v("targets", m.targets, kMaxList);
  if (v.kIn && m.targets.empty()) throw ProtocolError("SETUP_CLIENT.targets: empty");
  if (const std::uint64_t conns = std::uint64_t{m.targets.size()} * m.spec.connections_per_pair();
      v.kIn && conns > kMaxList)
    throw ProtocolError(fmt::format("SETUP_CLIENT: {} connections exceed the limit of {}", conns, kMaxList));
  v.opt("source_addrs", m.source_addrs, 64, kMaxName);
  v.sparse("bind_devs", m.bind_devs, 64, 15);  // IFNAMSIZ - 1
  for (const auto& d : m.bind_devs) {
    if (v.kIn && (d.empty() || d.find_first_of("/ \t") != std::string::npos))
      throw ProtocolError(fmt::format("SETUP_CLIENT.bind_devs: '{}' is not an interface name", d));
  }
  for (const auto& x : m.targets) {
    if (v.kIn && !m.source_addrs.empty() && !x.link_hosts.empty() && x.link_hosts.size() != m.source_addrs.size())
      throw ProtocolError("SETUP_CLIENT: targets' link_hosts and source_addrs must list the same number of links");
  }
}

static void fields(auto& v, SetupClientOk& m) {
  v("connections", m.connections, 0, kMaxList);
  v("warnings", m.warnings, 1000);
  v.sparse("rdma", m.rdma, kMaxList, kEndpoint);
}

static void fields(auto& v, RdmaConnect& m) {
  v("test_id", m.test_id, 64);
  v("endpoints", m.endpoints, kMaxList, kEndpoint);
  if (v.kIn && m.endpoints.empty()) throw ProtocolError("RDMA_CONNECT.endpoints: empty");
  for (std::size_t i = 0; v.kIn && i < m.endpoints.size(); ++i) {
    if (m.endpoints[i].peer != m.endpoints.front().peer) {
      throw ProtocolError(
          fmt::format("RDMA_CONNECT.endpoints[{}].peer: {}, but endpoints[0] is for node {} (one server per message)",
                      i, m.endpoints[i].peer, m.endpoints.front().peer));
    }
  }
}

static void fields(auto& v, RdmaConnectOk& m) {
  v("queue_pairs", m.queue_pairs, 1, kMaxList);
}

static void fields(auto& v, Start& m) {
  v("start_at", m.start_at, 0, kMaxInstant);
  v("window_open", m.window_open, m.start_at, kMaxInstant);
  v("window_close", m.window_close, m.window_open, kMaxInstant);
  v("end_at", m.end_at, m.window_close, kMaxInstant);
  v("interval_ns", m.interval_ns, 10'000'000, 3600LL * 1'000'000'000);
}

static void fields(auto& v, Abort& m) {
  v("reason", m.reason);
}

static void fields(auto& v, ErrorMsg& m) {
  v("code", m.code, &error_code_from);
  v("message", m.message);
}

static void fields(auto& v, LinksReply& m) {
  v("hostname", m.hostname, 256);
  v("links", m.links, 4096, &link_from_json);
  v.opt("rdma", m.rdma, 256, &rdma_device_from_json);  // agents older than the RDMA inventory send none
  v("socket_limits", m.limits, &parse_socket_limits<UINT64_MAX>);
}

static void fields(auto& v, Shutdown& m) {
  v("reason", m.reason, 256);
}

#define FABPERF_DEFINE_MESSAGE(M, parse, type)                          \
  json to_json(const M& m) {                                            \
    return JsonOut::encode(m);                                          \
  }                                                                     \
  M parse(const json& j) {                                              \
    return JsonIn::decode<M>(j, std::string(to_string(MsgType::type))); \
  }
FABPERF_MESSAGES(FABPERF_DEFINE_MESSAGE);
#undef FABPERF_DEFINE_MESSAGE

json to_json(const RdmaEndpoint& e) {
  return JsonOut::encode(e);
}

template <std::uint64_t Max>
SocketLimits parse_socket_limits(const Fields& f, const char* field) {
  Fields g(f.object(field), f.ctx(field));
  SocketLimits l;
  l.rmem_max = g.u64("rmem_max", 0, Max);
  l.wmem_max = g.u64("wmem_max", 0, Max);
  for (const auto& [name, dst] : {std::pair{"tcp_rmem", l.tcp_rmem}, std::pair{"tcp_wmem", l.tcp_wmem}}) {
    const auto& a = g.array(name, 3);
    if (a.size() != 3) throw ProtocolError(fmt::format("{}: expected 3 numbers (min default max)", g.ctx(name)));
    for (std::size_t i = 0; i < 3; ++i) {
      if (!a[i].is_number_unsigned())
        throw ProtocolError(fmt::format("{}[{}]: expected a non-negative integer", g.ctx(name), i));
      dst[i] = a[i].template get<std::uint64_t>();
    }
  }
  return l;
}

template SocketLimits parse_socket_limits<UINT64_MAX>(const Fields&, const char*);
template SocketLimits parse_socket_limits<(1ULL << 48)>(const Fields&, const char*);

void validate_frame(std::span<const std::uint8_t> frame) {
  if (frame.size() < kHeaderSize) throw ProtocolError("frame shorter than its header");
  const Header h = decode_header(frame.first<kHeaderSize>());
  if (frame.size() - kHeaderSize != h.length) throw ProtocolError("frame length does not match its header");
  const json j = parse_body(h.type, frame.subspan(kHeaderSize));
  switch (h.type) {
#define FABPERF_VALIDATE_MESSAGE(M, parse, type) \
  case MsgType::type: (void)parse(j); break
    FABPERF_MESSAGES(FABPERF_VALIDATE_MESSAGE);
#undef FABPERF_VALIDATE_MESSAGE
    case MsgType::result: (void)parse_agent_result(j); break;
    case MsgType::heartbeat:
    case MsgType::links_request:
    case MsgType::bye: break;
  }
}

}  // namespace fabperf::proto
