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

namespace {
constexpr std::int64_t kMaxInstant = INT64_MAX / 4;
constexpr std::size_t kMaxName = 256;

// The fields SETUP_SERVER and SETUP_CLIENT share.
template <class M>
json spec_fields(const M& m) {
  return {{"test_id", m.test_id}, {"token", to_hex(m.token)}, {"spec", to_json(m.spec)}, {"node_index", m.node_index}};
}
template <class M>
M parse_spec_fields(const Fields& f) {
  M m;
  m.test_id = f.str("test_id", 64);
  m.token = token_from_hex(f.str("token", 64), f.ctx("token"));
  const auto& spec = f.object("spec");
  try {
    m.spec = spec_from_json(spec);
  } catch (const ProtocolError& e) {
    // spec_from_json names only "spec.<field>"; say which message carried it.
    throw ProtocolError(fmt::format("{}: {}", f.ctx("spec"), e.what()));
  }
  m.node_index = static_cast<std::uint32_t>(f.u64("node_index", 0, kMaxList));
  return m;
}
}  // namespace

std::vector<std::string> local_capabilities() {
  return {std::string(auth::kCapability)};
}

json to_json(const Hello& m) {
  return {{"proto_min", m.proto_min}, {"proto_max", m.proto_max}, {"coordinator", m.coordinator}, {"caps", m.caps}};
}
Hello parse_hello(const json& j) {
  Fields f(j, "HELLO");
  Hello m;
  m.proto_min = static_cast<std::uint32_t>(f.u64("proto_min", 1, 65535));
  m.proto_max = static_cast<std::uint32_t>(f.u64("proto_max", m.proto_min, 65535));
  // A peer of another version may not share the rest of this layout: the caller names both
  // versions instead of complaining about a field.
  if (m.proto_min > kVersion || m.proto_max < kVersion) return m;
  m.coordinator = f.str("coordinator", kMaxName);
  m.caps = f.strings("caps", kMaxCaps, kMaxCapLength);
  return m;
}

json to_json(const HelloOk& m) {
  return {{"proto", m.proto}, {"hostname", m.hostname}, {"version", m.version},
          {"pid", m.pid},     {"caps", m.caps},         {"address", m.address}};
}
HelloOk parse_hello_ok(const json& j) {
  Fields f(j, "HELLO_OK");
  HelloOk m;
  m.proto = static_cast<std::uint32_t>(f.u64("proto", 1, 65535));
  m.hostname = f.str("hostname", kMaxName);
  m.version = f.str("version", 64);
  m.pid = f.i64("pid", 0, INT32_MAX);
  m.caps = f.strings("caps", kMaxCaps, kMaxCapLength);
  m.address = f.str("address", kMaxName);
  return m;
}

json to_json(const Ping& m) {
  return {{"seq", m.seq}};
}
Ping parse_ping(const json& j) {
  Fields f(j, "PING");
  return Ping{f.u64("seq", 0, UINT32_MAX)};
}

json to_json(const Pong& m) {
  json j = {{"seq", m.seq}, {"t_rx", m.t_rx}, {"t_tx", m.t_tx}};
  if (m.t_wall != 0) j["t_wall"] = m.t_wall;
  return j;
}
Pong parse_pong(const json& j) {
  Fields f(j, "PONG");
  Pong m;
  m.seq = f.u64("seq", 0, UINT32_MAX);
  m.t_rx = f.i64("t_rx", 0, kMaxInstant);
  m.t_tx = f.i64("t_tx", m.t_rx, kMaxInstant);
  if (j.contains("t_wall")) m.t_wall = f.i64("t_wall", 0, kMaxInstant);
  return m;
}

json to_json(const RdmaEndpoint& e) {
  return {{"node", e.node}, {"peer", e.peer},       {"conn", e.conn}, {"qpn", e.qpn}, {"psn", e.psn},
          {"lid", e.lid},   {"gid", to_hex(e.gid)}, {"addr", e.addr}, {"len", e.len}, {"rkey", e.rkey}};
}
RdmaEndpoint parse_rdma_endpoint(const json& j, const std::string& context) {
  Fields f(j, context);
  RdmaEndpoint e;
  e.node = static_cast<std::uint32_t>(f.u64("node", 0, kMaxList));
  e.peer = static_cast<std::uint32_t>(f.u64("peer", 0, kMaxList));
  if (e.peer == e.node)
    throw ProtocolError(fmt::format("{}: the node's own index {}, not another node", f.ctx("peer"), e.peer));
  e.conn = static_cast<std::uint32_t>(f.u64("conn", 0, kMaxList - 1));
  e.qpn = static_cast<std::uint32_t>(f.u64("qpn", 1, 0xffffff));  // QP numbers are 24 bits; 0 is the SMI QP
  e.psn = static_cast<std::uint32_t>(f.u64("psn", 0, 0xffffff));
  e.lid = static_cast<std::uint32_t>(f.u64("lid", 0, 0xffff));
  const std::string gid = f.str("gid", 64);
  if (!from_lower_hex(gid, e.gid))
    throw ProtocolError(fmt::format("{}: must be 32 lower-case hex digits (a 128-bit GID)", f.ctx("gid")));
  e.addr = f.u64("addr", 0, UINT64_MAX);
  e.len = f.u64("len", 1, 2 * limits::kMaxBuffsize);
  e.rkey = static_cast<std::uint32_t>(f.u64("rkey", 0, UINT32_MAX));
  return e;
}

namespace {
template <class T>
json json_list(const std::vector<T>& v) {
  json a = json::array();
  for (const auto& e : v) a.push_back(to_json(e));
  return a;
}
std::vector<RdmaEndpoint> parse_endpoints(const Fields& f, const char* name) {
  std::vector<RdmaEndpoint> out;
  const auto& a = f.array(name, kMaxList);
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    out.push_back(parse_rdma_endpoint(a[i], fmt::format("{}[{}]", f.ctx(name), i)));
  return out;
}
}  // namespace

json to_json(const SetupServer& m) {
  json j = spec_fields(m);
  j["expect_connections"] = m.expect_connections;
  j["any_address"] = m.any_address;
  if (!m.rdma_clients.empty()) j["rdma_clients"] = m.rdma_clients;
  if (!m.link_addrs.empty()) j["link_addrs"] = m.link_addrs;
  return j;
}
SetupServer parse_setup_server(const json& j) {
  Fields f(j, "SETUP_SERVER");
  auto m = parse_spec_fields<SetupServer>(f);
  m.expect_connections = static_cast<std::uint32_t>(f.u64("expect_connections", 1, kMaxList));
  if (f.has("any_address")) m.any_address = f.boolean("any_address");
  if (f.has("rdma_clients")) {
    const auto& a = f.array("rdma_clients", kMaxList);
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_number_unsigned() || a[i].get<std::uint64_t>() >= kMaxList) {
        throw ProtocolError(fmt::format("{}[{}]: not a node index", f.ctx("rdma_clients"), i));
      }
      m.rdma_clients.push_back(a[i].get<std::uint32_t>());
    }
    const std::uint64_t qps = std::uint64_t{m.rdma_clients.size()} * m.spec.connections_per_pair();
    if (qps > kMaxList)
      throw ProtocolError(
          fmt::format("{}: {} queue pairs exceed the limit of {}", f.ctx("rdma_clients"), qps, kMaxList));
  }
  if (f.has("link_addrs")) m.link_addrs = f.strings("link_addrs", 64, kMaxName);
  return m;
}

json to_json(const SetupServerOk& m) {
  json j = {{"data_port", m.data_port}, {"warnings", m.warnings}};
  if (!m.rdma.empty()) j["rdma"] = json_list(m.rdma);
  return j;
}
SetupServerOk parse_setup_server_ok(const json& j) {
  Fields f(j, "SETUP_SERVER_OK");
  SetupServerOk m;
  m.data_port = static_cast<std::uint16_t>(f.u64("data_port", 0, 65535));
  m.warnings = f.strings("warnings", 1000);
  if (f.has("rdma")) m.rdma = parse_endpoints(f, "rdma");
  return m;
}

json to_json(const SetupClient& m) {
  json j = spec_fields(m);
  json t = json::array();
  for (const auto& x : m.targets) {
    json o = {{"node_index", x.node_index}, {"host", x.host}, {"port", x.port}, {"link_hosts", x.link_hosts}};
    if (!x.rdma.empty()) o["rdma"] = json_list(x.rdma);
    t.push_back(std::move(o));
  }
  j["targets"] = std::move(t);
  j["source_addrs"] = m.source_addrs;
  if (!m.bind_devs.empty()) j["bind_devs"] = m.bind_devs;
  return j;
}
SetupClient parse_setup_client(const json& j) {
  Fields f(j, "SETUP_CLIENT");
  auto m = parse_spec_fields<SetupClient>(f);
  const auto& arr = f.array("targets", kMaxList);
  if (arr.empty()) throw ProtocolError("SETUP_CLIENT.targets: empty");
  const std::uint64_t conns = static_cast<std::uint64_t>(arr.size()) * m.spec.connections_per_pair();
  if (conns > kMaxList)
    throw ProtocolError(fmt::format("SETUP_CLIENT: {} connections exceed the limit of {}", conns, kMaxList));
  for (const auto& e : arr) {
    Fields t(e, "SETUP_CLIENT.targets[]");
    Target x;
    x.node_index = static_cast<std::uint32_t>(t.u64("node_index", 0, kMaxList));
    x.host = t.str("host", kMaxName);
    x.port = static_cast<std::uint16_t>(t.u64("port", 0, 65535));
    if (t.has("link_hosts")) x.link_hosts = t.strings("link_hosts", 64, kMaxName);
    if (t.has("rdma")) x.rdma = parse_endpoints(t, "rdma");
    m.targets.push_back(std::move(x));
  }
  if (f.has("source_addrs")) m.source_addrs = f.strings("source_addrs", 64, kMaxName);
  if (f.has("bind_devs")) {
    m.bind_devs = f.strings("bind_devs", 64, 15);  // IFNAMSIZ - 1
    for (const auto& d : m.bind_devs) {
      if (d.empty() || d.find_first_of("/ \t") != std::string::npos) {
        throw ProtocolError(fmt::format("SETUP_CLIENT.bind_devs: '{}' is not an interface name", d));
      }
    }
  }
  for (const auto& x : m.targets) {
    if (!m.source_addrs.empty() && !x.link_hosts.empty() && x.link_hosts.size() != m.source_addrs.size()) {
      throw ProtocolError("SETUP_CLIENT: targets' link_hosts and source_addrs must list the same number of links");
    }
  }
  return m;
}

json to_json(const SetupClientOk& m) {
  json j = {{"connections", m.connections}, {"warnings", m.warnings}};
  if (!m.rdma.empty()) j["rdma"] = json_list(m.rdma);
  return j;
}
SetupClientOk parse_setup_client_ok(const json& j) {
  Fields f(j, "SETUP_CLIENT_OK");
  SetupClientOk m;
  m.connections = static_cast<std::uint32_t>(f.u64("connections", 0, kMaxList));
  m.warnings = f.strings("warnings", 1000);
  if (f.has("rdma")) m.rdma = parse_endpoints(f, "rdma");
  return m;
}

json to_json(const RdmaConnect& m) {
  return {{"test_id", m.test_id}, {"endpoints", json_list(m.endpoints)}};
}
RdmaConnect parse_rdma_connect(const json& j) {
  Fields f(j, "RDMA_CONNECT");
  RdmaConnect m;
  m.test_id = f.str("test_id", 64);
  m.endpoints = parse_endpoints(f, "endpoints");
  if (m.endpoints.empty()) throw ProtocolError("RDMA_CONNECT.endpoints: empty");
  const std::uint32_t server = m.endpoints.front().peer;
  for (std::size_t i = 0; i < m.endpoints.size(); ++i) {
    if (m.endpoints[i].peer != server) {
      throw ProtocolError(
          fmt::format("RDMA_CONNECT.endpoints[{}].peer: {}, but endpoints[0] is for node {} (one server per message)",
                      i, m.endpoints[i].peer, server));
    }
  }
  return m;
}

json to_json(const RdmaConnectOk& m) {
  return {{"queue_pairs", m.queue_pairs}};
}
RdmaConnectOk parse_rdma_connect_ok(const json& j) {
  Fields f(j, "RDMA_CONNECT_OK");
  return RdmaConnectOk{static_cast<std::uint32_t>(f.u64("queue_pairs", 1, kMaxList))};
}

json to_json(const Start& m) {
  return {{"start_at", m.start_at},
          {"window_open", m.window_open},
          {"window_close", m.window_close},
          {"end_at", m.end_at},
          {"interval_ns", m.interval_ns}};
}
Start parse_start(const json& j) {
  Fields f(j, "START");
  Start m;
  m.start_at = f.i64("start_at", 0, kMaxInstant);
  m.window_open = f.i64("window_open", m.start_at, kMaxInstant);
  m.window_close = f.i64("window_close", m.window_open, kMaxInstant);
  m.end_at = f.i64("end_at", m.window_close, kMaxInstant);
  m.interval_ns = f.i64("interval_ns", 10'000'000, 3600LL * 1'000'000'000);
  return m;
}

json to_json(const Abort& m) {
  return {{"reason", m.reason}};
}
Abort parse_abort(const json& j) {
  Fields f(j, "ABORT");
  return Abort{f.str("reason")};
}

namespace {
// In ErrorCode's order.
constexpr std::string_view kErrorCodes[] = {"busy",    "cleaning", "limit",        "protocol",
                                            "version", "refused",  "setup_failed", "start_failed",
                                            "result",  "no_key",   "key_required", "other"};

ErrorCode error_code_from_string(std::string_view s) {  // `other` when unknown
  const auto* it = std::ranges::find(kErrorCodes, s);
  return it == std::end(kErrorCodes) ? ErrorCode::other : static_cast<ErrorCode>(it - std::begin(kErrorCodes));
}
}  // namespace

std::string_view to_string(ErrorCode c) {
  return kErrorCodes[static_cast<int>(c)];
}

json to_json(const ErrorMsg& m) {
  return {{"code", to_string(m.code)}, {"message", m.message}};
}
ErrorMsg parse_error(const json& j) {
  Fields f(j, "ERROR");
  ErrorMsg m;
  m.code = error_code_from_string(f.str("code", 64));
  m.message = f.str("message");
  return m;
}

json to_json(const LinksReply& m) {
  return {{"hostname", m.hostname},
          {"links", json_list(m.links)},
          {"socket_limits", to_json(m.limits)},
          {"rdma", json_list(m.rdma)}};
}
LinksReply parse_links(const json& j) {
  Fields f(j, "LINKS");
  LinksReply m;
  m.hostname = f.str("hostname", 256);
  for (const auto& l : f.array("links", 4096)) m.links.push_back(link_from_json(l));
  // Optional: agents older than the RDMA inventory send none.
  if (f.has("rdma")) {
    for (const auto& d : f.array("rdma", 256)) m.rdma.push_back(rdma_device_from_json(d));
  }
  m.limits = parse_socket_limits(f, UINT64_MAX);
  return m;
}

SocketLimits parse_socket_limits(const Fields& f, std::uint64_t max) {
  Fields g(f.object("socket_limits"), f.ctx("socket_limits"));
  SocketLimits l;
  l.rmem_max = g.u64("rmem_max", 0, max);
  l.wmem_max = g.u64("wmem_max", 0, max);
  for (const auto& [name, dst] : {std::pair{"tcp_rmem", l.tcp_rmem}, std::pair{"tcp_wmem", l.tcp_wmem}}) {
    const auto& a = g.array(name, 3);
    if (a.size() != 3) throw ProtocolError(fmt::format("{}: expected 3 numbers (min default max)", g.ctx(name)));
    for (std::size_t i = 0; i < 3; ++i) {
      if (!a[i].is_number_unsigned())
        throw ProtocolError(fmt::format("{}[{}]: expected a non-negative integer", g.ctx(name), i));
      dst[i] = a[i].get<std::uint64_t>();
    }
  }
  return l;
}

json to_json(const Shutdown& m) {
  return {{"reason", m.reason}};
}
Shutdown parse_shutdown(const json& j) {
  Fields f(j, "SHUTDOWN");
  return Shutdown{f.str("reason", 256)};
}

void validate_frame(std::span<const std::uint8_t> frame) {
  if (frame.size() < kHeaderSize) throw ProtocolError("frame shorter than its header");
  const Header h = decode_header(frame.first<kHeaderSize>());
  if (frame.size() - kHeaderSize != h.length) throw ProtocolError("frame length does not match its header");
  const json j = parse_body(h.type, frame.subspan(kHeaderSize));
  switch (h.type) {
    case MsgType::hello: (void)parse_hello(j); break;
    case MsgType::hello_ok: (void)parse_hello_ok(j); break;
    case MsgType::ping: (void)parse_ping(j); break;
    case MsgType::pong: (void)parse_pong(j); break;
    case MsgType::setup_server: (void)parse_setup_server(j); break;
    case MsgType::setup_server_ok: (void)parse_setup_server_ok(j); break;
    case MsgType::setup_client: (void)parse_setup_client(j); break;
    case MsgType::setup_client_ok: (void)parse_setup_client_ok(j); break;
    case MsgType::start: (void)parse_start(j); break;
    case MsgType::abort: (void)parse_abort(j); break;
    case MsgType::result: (void)parse_agent_result(j); break;
    case MsgType::error: (void)parse_error(j); break;
    case MsgType::links: (void)parse_links(j); break;
    case MsgType::shutdown: (void)parse_shutdown(j); break;
    case MsgType::rdma_connect: (void)parse_rdma_connect(j); break;
    case MsgType::rdma_connect_ok: (void)parse_rdma_connect_ok(j); break;
    case MsgType::heartbeat:
    case MsgType::links_request:
    case MsgType::bye: break;
  }
}

}  // namespace fabperf::proto
