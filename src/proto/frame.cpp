#include <fabperf/error.hpp>
#include <fabperf/printable.hpp>
#include <fabperf/proto.hpp>

#include <cmath>
#include <fmt/format.h>

namespace fabperf::proto {

std::string_view to_string(MsgType t) {
  switch (t) {
    case MsgType::hello: return "HELLO";
    case MsgType::hello_ok: return "HELLO_OK";
    case MsgType::ping: return "PING";
    case MsgType::pong: return "PONG";
    case MsgType::setup_server: return "SETUP_SERVER";
    case MsgType::setup_server_ok: return "SETUP_SERVER_OK";
    case MsgType::setup_client: return "SETUP_CLIENT";
    case MsgType::setup_client_ok: return "SETUP_CLIENT_OK";
    case MsgType::start: return "START";
    case MsgType::heartbeat: return "HEARTBEAT";
    case MsgType::abort: return "ABORT";
    case MsgType::result: return "RESULT";
    case MsgType::error: return "ERROR";
    case MsgType::bye: return "BYE";
    case MsgType::links_request: return "LINKS_REQUEST";
    case MsgType::links: return "LINKS";
    case MsgType::shutdown: return "SHUTDOWN";
    case MsgType::rdma_connect: return "RDMA_CONNECT";
    case MsgType::rdma_connect_ok: return "RDMA_CONNECT_OK";
  }
  return "UNKNOWN";
}

namespace {
std::uint32_t get_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}
std::uint16_t get_be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
void put_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}
}  // namespace

Header decode_header(std::span<const std::uint8_t, kHeaderSize> b, std::uint32_t max_body) {
  const std::uint32_t magic = get_be32(b.data());
  if (magic != kMagic) {
    throw ProtocolError(fmt::format("not a fabperf control frame (magic {:#010x}, expected {:#010x})",
                                    magic, kMagic));
  }
  Header h;
  h.version = get_be16(b.data() + 4);
  if (h.version != kVersion) {
    throw ProtocolError(fmt::format("protocol version mismatch: peer speaks version {}, this fabperf speaks {}",
                                    h.version, kVersion));
  }
  const std::uint16_t type = get_be16(b.data() + 6);
  if (type == 0 || type > kMaxMsgType || type == 15 || type == 16) throw ProtocolError(fmt::format("unknown message type {}", type));
  h.type = static_cast<MsgType>(type);
  h.length = get_be32(b.data() + 8);
  if (h.length > max_body) {
    throw ProtocolError(fmt::format("{} frame of {} bytes exceeds the {} byte limit", to_string(h.type),
                                    h.length, max_body));
  }
  return h;
}

std::array<std::uint8_t, kHeaderSize> encode_header(MsgType type, std::uint32_t length) {
  std::array<std::uint8_t, kHeaderSize> h{};
  put_be32(h.data(), kMagic);
  h[4] = static_cast<std::uint8_t>(kVersion >> 8);
  h[5] = static_cast<std::uint8_t>(kVersion & 0xff);
  const auto t = static_cast<std::uint16_t>(type);
  h[6] = static_cast<std::uint8_t>(t >> 8);
  h[7] = static_cast<std::uint8_t>(t & 0xff);
  put_be32(h.data() + 8, length);
  return h;
}

std::vector<std::uint8_t> encode_frame(MsgType type, const nlohmann::json& body) {
  const std::string text = body.dump();
  if (text.size() > kMaxBody) {
    throw ProtocolError(fmt::format("{} message of {} bytes exceeds the {} byte limit", to_string(type),
                                    text.size(), kMaxBody));
  }
  const auto h = encode_header(type, static_cast<std::uint32_t>(text.size()));
  std::vector<std::uint8_t> out;
  out.reserve(h.size() + text.size());
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

nlohmann::json parse_body(MsgType type, std::span<const std::uint8_t> body) {
  // Depth-limited: a callback rejects nesting deeper than any message needs (stack safety).
  int depth = 0;
  bool too_deep = false;
  auto cb = [&](int d, nlohmann::json::parse_event_t ev, nlohmann::json&) {
    if (ev == nlohmann::json::parse_event_t::object_start || ev == nlohmann::json::parse_event_t::array_start) {
      depth = d;
      if (d > 16) too_deep = true;
    }
    return !too_deep;
  };
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), cb, /*allow_exceptions=*/false);
  if (too_deep) throw ProtocolError(fmt::format("{} body nests deeper than 16 levels", to_string(type)));
  if (j.is_discarded()) throw ProtocolError(fmt::format("{} body is not valid JSON", to_string(type)));
  if (!j.is_object()) throw ProtocolError(fmt::format("{} body is not a JSON object", to_string(type)));
  (void)depth;
  return j;
}

// ---- Fields ------------------------------------------------------------------------------

Fields::Fields(const nlohmann::json& j, std::string context) : j_(j), context_(std::move(context)) {
  if (!j_.is_object()) throw ProtocolError(fmt::format("{}: not a JSON object", context_));
}

bool Fields::has(const char* name) const { return j_.contains(name); }

const nlohmann::json& Fields::get(const char* name) const {
  const auto it = j_.find(name);
  if (it == j_.end()) throw ProtocolError(fmt::format("{}: missing field", ctx(name)));
  return *it;
}

std::uint64_t Fields::u64(const char* name, std::uint64_t lo, std::uint64_t hi) const {
  const auto& v = get(name);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
    throw ProtocolError(fmt::format("{}: expected a non-negative integer, got {}", ctx(name), v.type_name()));
  }
  const auto x = v.get<std::uint64_t>();
  if (x < lo || x > hi) throw ProtocolError(fmt::format("{}: {} out of range [{}, {}]", ctx(name), x, lo, hi));
  return x;
}

std::int64_t Fields::i64(const char* name, std::int64_t lo, std::int64_t hi) const {
  const auto& v = get(name);
  if (!v.is_number_integer()) {
    throw ProtocolError(fmt::format("{}: expected an integer, got {}", ctx(name), v.type_name()));
  }
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    throw ProtocolError(fmt::format("{}: out of range", ctx(name)));
  }
  const auto x = v.get<std::int64_t>();
  if (x < lo || x > hi) throw ProtocolError(fmt::format("{}: {} out of range [{}, {}]", ctx(name), x, lo, hi));
  return x;
}

double Fields::num(const char* name, double lo, double hi) const {
  const auto& v = get(name);
  if (!v.is_number()) throw ProtocolError(fmt::format("{}: expected a number, got {}", ctx(name), v.type_name()));
  const auto x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    throw ProtocolError(fmt::format("{}: {} out of range [{}, {}]", ctx(name), x, lo, hi));
  }
  return x;
}

bool Fields::boolean(const char* name) const {
  const auto& v = get(name);
  if (!v.is_boolean()) throw ProtocolError(fmt::format("{}: expected a boolean, got {}", ctx(name), v.type_name()));
  return v.get<bool>();
}

std::string Fields::str(const char* name, std::size_t max_len) const {
  const auto& v = get(name);
  if (!v.is_string()) throw ProtocolError(fmt::format("{}: expected a string, got {}", ctx(name), v.type_name()));
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() > max_len) throw ProtocolError(fmt::format("{}: string longer than {} bytes", ctx(name), max_len));
  // Every string a peer sends may end up in a log or on a terminal: control characters are
  // defused here, once, for all of them.
  return printable(s);
}

const nlohmann::json& Fields::array(const char* name, std::size_t max_items) const {
  const auto& v = get(name);
  if (!v.is_array()) throw ProtocolError(fmt::format("{}: expected an array, got {}", ctx(name), v.type_name()));
  if (v.size() > max_items) throw ProtocolError(fmt::format("{}: more than {} entries", ctx(name), max_items));
  return v;
}

const nlohmann::json& Fields::object(const char* name) const {
  const auto& v = get(name);
  if (!v.is_object()) throw ProtocolError(fmt::format("{}: expected an object, got {}", ctx(name), v.type_name()));
  return v;
}

std::vector<std::string> Fields::strings(const char* name, std::size_t max_items, std::size_t max_len) const {
  std::vector<std::string> out;
  for (const auto& e : array(name, max_items)) {
    if (!e.is_string() || e.get_ref<const std::string&>().size() > max_len) {
      throw ProtocolError(fmt::format("{}: entries must be strings of at most {} bytes", ctx(name), max_len));
    }
    out.push_back(printable(e.get_ref<const std::string&>()));
  }
  return out;
}

}  // namespace fabperf::proto
