#include <fabperf/core/bytes.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/proto/proto.hpp>

#include <fmt/format.h>
#include <algorithm>

namespace fabperf::proto {

std::string_view to_string(MsgType t) {
  constexpr std::string_view kNames[] = {"UNKNOWN",      "HELLO",           "HELLO_OK",        "PING",
                                         "PONG",         "SETUP_SERVER",    "SETUP_SERVER_OK",  // 0-6
                                         "SETUP_CLIENT", "SETUP_CLIENT_OK", "START",           "HEARTBEAT",
                                         "ABORT",        "RESULT",          "ERROR",           "BYE",  // 7-14
                                         "UNKNOWN",      "UNKNOWN",         "LINKS_REQUEST",   "LINKS",
                                         "SHUTDOWN",     "RDMA_CONNECT",    "RDMA_CONNECT_OK"};  // 15-16 retired
  const auto i = static_cast<std::size_t>(t);
  return i < std::size(kNames) ? kNames[i] : "UNKNOWN";
}

Header decode_header(std::span<const std::uint8_t, kHeaderSize> b, std::uint32_t max_body) {
  std::uint32_t magic = 0;
  std::uint16_t type = 0;
  Header h;
  ByteReader{b}(magic)(h.version)(type)(h.length);
  if (magic != kMagic) {
    throw ProtocolError(fmt::format("not a fabperf control frame (magic {:#010x}, expected {:#010x})", magic, kMagic));
  }
  if (h.version != kVersion) {
    throw ProtocolError(
        fmt::format("protocol version mismatch: peer speaks version {}, this fabperf speaks {}", h.version, kVersion));
  }
  if (type == 0 || type > kMaxMsgType || type == 15 || type == 16)
    throw ProtocolError(fmt::format("unknown message type {}", type));
  h.type = static_cast<MsgType>(type);
  if (h.length > max_body) {
    throw ProtocolError(
        fmt::format("{} frame of {} bytes exceeds the {} byte limit", to_string(h.type), h.length, max_body));
  }
  return h;
}

std::array<std::uint8_t, kHeaderSize> encode_header(MsgType type, std::uint32_t length) {
  return pack_be<kHeaderSize>(kMagic, kVersion, static_cast<std::uint16_t>(type), length);
}

std::vector<std::uint8_t> encode_frame(MsgType type, const nlohmann::json& body) {
  const std::string text = body.dump();
  if (text.size() > kMaxBody) {
    throw ProtocolError(
        fmt::format("{} message of {} bytes exceeds the {} byte limit", to_string(type), text.size(), kMaxBody));
  }
  const auto h = encode_header(type, static_cast<std::uint32_t>(text.size()));
  std::vector<std::uint8_t> out;
  out.reserve(h.size() + text.size());
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

namespace {
// The deepest nesting of arrays and objects in JSON text, in one linear pass (brackets inside
// strings, escaped quotes included, do not count); stops counting past `limit`. nlohmann's parser
// with a depth callback does the same job in time that grows with the square of a large array of
// objects (600 KB took 6.3 s of the coordinator's one network thread), so depth is checked here,
// before the plain linear parse.
int nesting_depth(std::span<const std::uint8_t> text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const std::uint8_t c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}
}  // namespace

nlohmann::json parse_body(MsgType type, std::span<const std::uint8_t> body) {
  // Depth-limited (stack safety: the parser recurses when it builds values and when they are
  // freed): 16 levels inside the body's own object.
  constexpr int kMaxDepth = 16;
  if (nesting_depth(body, kMaxDepth + 1) > kMaxDepth + 1) {
    throw ProtocolError(fmt::format("{} body nests deeper than {} levels", to_string(type), kMaxDepth));
  }
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ProtocolError(fmt::format("{} body is not valid JSON", to_string(type)));
  if (!j.is_object()) throw ProtocolError(fmt::format("{} body is not a JSON object", to_string(type)));
  return j;
}

}  // namespace fabperf::proto
