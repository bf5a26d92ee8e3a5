#include <gtest/gtest.h>
#include <fabperf/core/error.hpp>
#include <fabperf/proto/agent_result.hpp>
#include <fabperf/proto/proto.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/unit_helpers.hpp"

using namespace fabperf;
using namespace fabperf::testutil;
using namespace fabperf::proto;
using nlohmann::json;

namespace {

template <typename F>
std::string proto_error_of(F&& f) {
  try {
    f();
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.code(), ExitCode::infrastructure);
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ProtocolError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected ProtocolError, nothing was thrown";
  return "";
}

std::vector<std::uint8_t> bytes_of(std::string_view s) {
  return {s.begin(), s.end()};
}

std::array<std::uint8_t, kHeaderSize> raw_header(std::uint32_t magic, std::uint16_t version, std::uint16_t type,
                                                 std::uint32_t length) {
  return {static_cast<std::uint8_t>(magic >> 24),  static_cast<std::uint8_t>(magic >> 16),
          static_cast<std::uint8_t>(magic >> 8),   static_cast<std::uint8_t>(magic),
          static_cast<std::uint8_t>(version >> 8), static_cast<std::uint8_t>(version),
          static_cast<std::uint8_t>(type >> 8),    static_cast<std::uint8_t>(type),
          static_cast<std::uint8_t>(length >> 24), static_cast<std::uint8_t>(length >> 16),
          static_cast<std::uint8_t>(length >> 8),  static_cast<std::uint8_t>(length)};
}

std::string header_error(const std::array<std::uint8_t, kHeaderSize>& h, std::uint32_t max_body = kMaxBody) {
  return proto_error_of([&] { (void)decode_header(h, max_body); });
}

// Frames from a header and a body given separately (so either can be wrong).
std::vector<std::uint8_t> frame_of(const std::array<std::uint8_t, kHeaderSize>& h, std::string_view body) {
  std::vector<std::uint8_t> f(h.begin(), h.end());
  f.insert(f.end(), body.begin(), body.end());
  return f;
}

std::string body_text(const std::vector<std::uint8_t>& frame) {
  return {frame.begin() + static_cast<std::ptrdiff_t>(kHeaderSize), frame.end()};
}

// Sample messages with every field away from its default.
Hello sample_hello() {
  return {kVersion, kVersion, "coord@host-1", {}};
}
HelloOk sample_hello_ok() {
  return {kVersion, "agent-7.example", "0.1.0", 31337, {}, "198.51.100.7"};
}
Ping sample_ping() {
  return {4'000'000'000};
}
Pong sample_pong() {
  return {17, 1'000'000'123, 1'000'050'456};
}
Token sample_token() {
  Token t{};
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint8_t>(i * 17 + 3);
  return t;
}
TestSpec sample_spec() {
  SpecParams p;
  p.test = TestKind::rw;
  p.mode = Mode::stream;
  p.parallel = 2;
  p.threads = 8;
  p.buffsize = 1 << 20;
  p.time = std::chrono::seconds(5);
  return TestSpec::make(p);
}
SetupServer sample_setup_server() {
  return {"0123456789abcdef", sample_token(), sample_spec(), 3, 12};
}
SetupServerOk sample_setup_server_ok() {
  return {45678, {"socksize clamped to 4M", "second warning"}};
}
SetupClient sample_setup_client() {
  return {"0123456789abcdef",
          sample_token(),
          sample_spec(),
          1,
          {{2, "10.0.0.2", 40001, {}}, {3, "fe80::3", 40002, {}}},
          {},
          {}};
}
SetupClientOk sample_setup_client_ok() {
  return {4, {"one warning"}};
}
RdmaEndpoint sample_endpoint(std::uint32_t node, std::uint32_t peer, std::uint32_t conn) {
  RdmaEndpoint e{node, peer, conn, 0x123456, 0xabcdef, 0, {}, 0x7f00deadbeef0000ULL, 2u << 20, 0xfedcba98};
  for (std::size_t i = 0; i < 16; ++i) e.gid[i] = static_cast<std::uint8_t>(0xf0 + i);
  return e;
}
RdmaConnect sample_rdma_connect() {
  return {"0123456789abcdef", {sample_endpoint(1, 0, 0), sample_endpoint(1, 0, 1), sample_endpoint(2, 0, 0)}};
}
Start sample_start() {
  return {1'000'000'000, 2'000'000'000, 9'000'000'000, 10'000'000'000, 250'000'000};
}
Abort sample_abort() {
  return {"user pressed ^C"};
}
ErrorMsg sample_error() {
  return {ErrorCode::busy, "agent is running a test for coord@other"};
}

AgentResult sample_result() {
  AgentResult r;
  r.node_index = 2;
  r.hostname = "n2";
  r.window_s = 8.0;
  r.cpu_busy_pct = 12.5;
  r.retrans_segs = 3;
  r.process_cpu_s = 1.25;
  FlowResult f;
  f.id = 1;
  f.peer_node = 0;
  f.local = "10.0.0.2:5000";
  f.remote = "10.0.0.1:6000";
  f.tx_bytes_total = 1000;
  f.tx_bytes_window = 800;
  r.flows.push_back(f);
  r.latency = LatencyHistogram{};
  r.latency->record(1000);
  r.intervals.push_back({1'000'000'000, 100, 0});
  return r;
}

// Re-encodes through text, as the message travels on the wire.
json wire(const json& j) {
  return json::parse(j.dump());
}

}  // namespace

// ---- frame codec ----------------------------------------------------------------------------

TEST(Frame, HeaderLayoutIsBigEndian) {
  const auto h = encode_header(MsgType::result, 0x01020304);
  const std::array<std::uint8_t, kHeaderSize> expect{'F', 'B', 'P', 'F', 0, static_cast<std::uint8_t>(kVersion),
                                                     0,   12,  1,   2,   3, 4};
  EXPECT_EQ(h, expect);
  EXPECT_EQ(kMagic, 0x46425046u);
}

TEST(Frame, HeaderRoundTripEveryType) {
  for (std::uint16_t t = 1; t <= kMaxMsgType; ++t) {
    if (t == 15 || t == 16) continue;  // protocol 2's AUTH and AUTH_OK, retired (test_auth.cpp)
    const auto type = static_cast<MsgType>(t);
    for (std::uint32_t len : {0u, 1u, 4096u, kMaxBody}) {
      const Header h = decode_header(encode_header(type, len));
      EXPECT_EQ(h.version, kVersion);
      EXPECT_EQ(h.type, type);
      EXPECT_EQ(h.length, len);
    }
    EXPECT_NE(to_string(type), "UNKNOWN") << t;
  }
  EXPECT_EQ(to_string(MsgType::setup_client_ok), "SETUP_CLIENT_OK");
  EXPECT_EQ(to_string(MsgType::hello), "HELLO");
  EXPECT_EQ(to_string(MsgType::bye), "BYE");
}

TEST(Frame, EncodeDecodeRoundTrip) {
  const json body = {{"seq", 42}, {"note", "ünïcödé \"quoted\""}};
  const auto f = encode_frame(MsgType::ping, body);
  ASSERT_GE(f.size(), kHeaderSize);
  const Header h = decode_header(std::span<const std::uint8_t, kHeaderSize>(f.data(), kHeaderSize));
  EXPECT_EQ(h.type, MsgType::ping);
  EXPECT_EQ(h.length, f.size() - kHeaderSize);
  EXPECT_EQ(body_text(f), body.dump());
  EXPECT_EQ(parse_body(h.type, std::span(f).subspan(kHeaderSize)), body);
}

TEST(Frame, EncodeRejectsOversizedBody) {
  const json body = {{"reason", std::string(kMaxBody, 'x')}};
  const auto msg = proto_error_of([&] { (void)encode_frame(MsgType::abort, body); });
  EXPECT_TRUE(contains(msg, "ABORT")) << msg;
  EXPECT_TRUE(contains(msg, "exceeds")) << msg;
}

TEST(Frame, TruncatedFrame) {
  const auto f = encode_frame(MsgType::ping, to_json(sample_ping()));
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, kHeaderSize - 1}) {
    const auto msg = proto_error_of([&] { validate_frame(std::span(f).first(n)); });
    EXPECT_TRUE(contains(msg, "shorter than its header")) << n << ": " << msg;
  }
  for (std::size_t n : {kHeaderSize, f.size() - 1}) {
    const auto msg = proto_error_of([&] { validate_frame(std::span(f).first(n)); });
    EXPECT_TRUE(contains(msg, "does not match")) << n << ": " << msg;
  }
  // Trailing bytes after the body are as wrong as missing ones.
  auto longer = f;
  longer.push_back(' ');
  EXPECT_TRUE(contains(proto_error_of([&] { validate_frame(longer); }), "does not match"));
  EXPECT_NO_THROW(validate_frame(f));
}

TEST(Frame, WrongMagic) {
  const auto msg = header_error(raw_header(0x48545450, kVersion, 1, 0));  // "HTTP"
  EXPECT_TRUE(contains(msg, "not a fabperf control frame")) << msg;
  EXPECT_TRUE(contains(msg, "0x48545450")) << msg;
  EXPECT_TRUE(contains(msg, "0x46425046")) << msg;
  EXPECT_TRUE(contains(header_error(raw_header(0x46425047, kVersion, 1, 0)), "magic"));
  EXPECT_TRUE(contains(header_error(raw_header(0, kVersion, 1, 0)), "magic"));
}

TEST(Frame, OtherVersionNamesBoth) {
  for (std::uint16_t v : {std::uint16_t{0}, static_cast<std::uint16_t>(kVersion + 1), std::uint16_t{0xffff}}) {
    const auto msg = header_error(raw_header(kMagic, v, 1, 0));
    EXPECT_TRUE(contains(msg, "version mismatch")) << msg;
    EXPECT_TRUE(contains(msg, "peer speaks version " + std::to_string(v))) << msg;
    EXPECT_TRUE(contains(msg, "this fabperf speaks " + std::to_string(kVersion))) << msg;
  }
}

TEST(Frame, UnknownType) {
  for (std::uint16_t t : {std::uint16_t{0}, static_cast<std::uint16_t>(kMaxMsgType + 1), std::uint16_t{0xffff}}) {
    const auto msg = header_error(raw_header(kMagic, kVersion, t, 0));
    EXPECT_TRUE(contains(msg, "unknown message type " + std::to_string(t))) << msg;
  }
}

TEST(Frame, LengthOverCap) {
  EXPECT_EQ(decode_header(raw_header(kMagic, kVersion, 12, kMaxBody)).length, kMaxBody);
  auto msg = header_error(raw_header(kMagic, kVersion, 12, kMaxBody + 1));
  EXPECT_TRUE(contains(msg, "RESULT frame of 16777217 bytes exceeds the 16777216 byte limit")) << msg;
  msg = header_error(raw_header(kMagic, kVersion, 3, 0xffffffffu));
  EXPECT_TRUE(contains(msg, "PING frame of 4294967295 bytes exceeds")) << msg;
  // A caller-given, smaller cap.
  EXPECT_EQ(decode_header(raw_header(kMagic, kVersion, 3, 64), 64).length, 64u);
  msg = header_error(raw_header(kMagic, kVersion, 3, 65), 64);
  EXPECT_TRUE(contains(msg, "exceeds the 64 byte limit")) << msg;
}

TEST(Frame, HugeLengthRejectedBeforeBodyIsLookedAt) {
  // Only the 12 header bytes exist: the length must be refused from the header alone, before
  // anything tries to size a buffer for 4 GiB (or reads past the end).
  const auto h = raw_header(kMagic, kVersion, 12, 0xffffffffu);
  const auto msg = proto_error_of([&] { validate_frame(h); });
  EXPECT_TRUE(contains(msg, "exceeds")) << msg;
}

TEST(Frame, BodyNotJson) {
  for (std::string_view body : {"", "{", "{\"seq\":}", "not json", "{\"a\":1}}", "{\"a\":1,}", "\xff\xfe"}) {
    const auto b = bytes_of(body);
    const auto msg = proto_error_of([&] { (void)parse_body(MsgType::ping, b); });
    EXPECT_TRUE(contains(msg, "PING body is not valid JSON")) << body << ": " << msg;
  }
  // Invalid UTF-8 inside a string.
  const auto b = bytes_of("{\"coordinator\":\"\xc3\x28\"}");
  EXPECT_TRUE(contains(proto_error_of([&] { (void)parse_body(MsgType::hello, b); }), "not valid JSON"));
}

TEST(Frame, BodyJsonButNotObject) {
  for (std::string_view body : {"[]", "[{\"seq\":1}]", "1", "\"seq\"", "null", "true"}) {
    const auto b = bytes_of(body);
    const auto msg = proto_error_of([&] { (void)parse_body(MsgType::start, b); });
    EXPECT_TRUE(contains(msg, "START body is not a JSON object")) << body << ": " << msg;
  }
}

TEST(Frame, DeepNestingRejected) {
  auto nested = [](int levels) {
    std::string s;
    for (int i = 0; i < levels; ++i) s += "{\"a\":";
    s += "1";
    for (int i = 0; i < levels; ++i) s += "}";
    return s;
  };
  EXPECT_NO_THROW((void)parse_body(MsgType::hello, bytes_of(nested(17))));
  const auto msg = proto_error_of([&] { (void)parse_body(MsgType::hello, bytes_of(nested(18))); });
  EXPECT_TRUE(contains(msg, "HELLO body nests deeper than 16 levels")) << msg;
  // Arrays count too, and a pathological depth is refused without blowing the stack.
  const std::string deep = "{\"a\":" + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_TRUE(contains(proto_error_of([&] { (void)parse_body(MsgType::result, bytes_of(deep)); }), "deeper than 16"));
  const std::string unclosed = std::string(200000, '[');
  EXPECT_FALSE(proto_error_of([&] { (void)parse_body(MsgType::result, bytes_of(unclosed)); }).empty());
}

// ---- typed messages: round trips ------------------------------------------------------------

TEST(Messages, HelloRoundTrip) {
  const auto m = parse_hello(wire(to_json(sample_hello())));
  EXPECT_EQ(m.proto_min, kVersion);
  EXPECT_EQ(m.proto_max, kVersion);
  EXPECT_EQ(m.coordinator, "coord@host-1");
  const auto m2 = parse_hello(to_json(Hello{2, 7, "", {}}));
  EXPECT_EQ(m2.proto_min, 2u);
  EXPECT_EQ(m2.proto_max, 7u);
}

TEST(Messages, HelloOkRoundTrip) {
  const auto m = parse_hello_ok(wire(to_json(sample_hello_ok())));
  EXPECT_EQ(m.proto, kVersion);
  EXPECT_EQ(m.hostname, "agent-7.example");
  EXPECT_EQ(m.version, "0.1.0");
  EXPECT_EQ(m.pid, 31337);
  EXPECT_EQ(m.address, "198.51.100.7");
}

TEST(Messages, PingPongRoundTrip) {
  EXPECT_EQ(parse_ping(wire(to_json(sample_ping()))).seq, 4'000'000'000u);
  EXPECT_EQ(parse_ping(to_json(Ping{0})).seq, 0u);
  const auto p = parse_pong(wire(to_json(sample_pong())));
  EXPECT_EQ(p.seq, 17u);
  EXPECT_EQ(p.t_rx, 1'000'000'123);
  EXPECT_EQ(p.t_tx, 1'000'050'456);
}

TEST(Messages, SetupServerRoundTrip) {
  const auto in = sample_setup_server();
  for (const json& j : {to_json(in), wire(to_json(in))}) {
    const auto m = parse_setup_server(j);
    EXPECT_EQ(m.test_id, in.test_id);
    EXPECT_EQ(m.token, in.token);
    EXPECT_EQ(m.spec, in.spec);
    EXPECT_EQ(m.node_index, 3u);
    EXPECT_EQ(m.expect_connections, 12u);
  }
}

TEST(Messages, SetupServerOkRoundTrip) {
  const auto m = parse_setup_server_ok(wire(to_json(sample_setup_server_ok())));
  EXPECT_EQ(m.data_port, 45678);
  EXPECT_EQ(m.warnings, (std::vector<std::string>{"socksize clamped to 4M", "second warning"}));
  EXPECT_TRUE(parse_setup_server_ok(to_json(SetupServerOk{1, {}})).warnings.empty());
}

TEST(Messages, SetupClientRoundTrip) {
  const auto in = sample_setup_client();
  for (const json& j : {to_json(in), wire(to_json(in))}) {
    const auto m = parse_setup_client(j);
    EXPECT_EQ(m.test_id, in.test_id);
    EXPECT_EQ(m.token, in.token);
    EXPECT_EQ(m.spec, in.spec);
    EXPECT_EQ(m.node_index, 1u);
    ASSERT_EQ(m.targets.size(), 2u);
    EXPECT_EQ(m.targets[0].node_index, 2u);
    EXPECT_EQ(m.targets[0].host, "10.0.0.2");
    EXPECT_EQ(m.targets[0].port, 40001);
    EXPECT_EQ(m.targets[1].node_index, 3u);
    EXPECT_EQ(m.targets[1].host, "fe80::3");
    EXPECT_EQ(m.targets[1].port, 40002);
  }
}

TEST(Messages, SetupClientOkRoundTrip) {
  const auto m = parse_setup_client_ok(wire(to_json(sample_setup_client_ok())));
  EXPECT_EQ(m.connections, 4u);
  EXPECT_EQ(m.warnings, std::vector<std::string>{"one warning"});
}

TEST(Messages, StartRoundTrip) {
  const auto m = parse_start(wire(to_json(sample_start())));
  EXPECT_EQ(m.start_at, 1'000'000'000);
  EXPECT_EQ(m.window_open, 2'000'000'000);
  EXPECT_EQ(m.window_close, 9'000'000'000);
  EXPECT_EQ(m.end_at, 10'000'000'000);
  EXPECT_EQ(m.interval_ns, 250'000'000);
  EXPECT_EQ(parse_start(to_json(Start{})).interval_ns, 1'000'000'000);  // default period
}

TEST(Messages, AbortAndErrorRoundTrip) {
  EXPECT_EQ(parse_abort(wire(to_json(sample_abort()))).reason, "user pressed ^C");
  const auto e = parse_error(wire(to_json(sample_error())));
  EXPECT_EQ(e.code, ErrorCode::busy);
  EXPECT_EQ(e.message, "agent is running a test for coord@other");
}

TEST(Messages, ReencodingIsStable) {
  const std::vector<std::pair<json, std::function<json(const json&)>>> cases = {
      {to_json(sample_hello()), [](const json& j) { return to_json(parse_hello(j)); }},
      {to_json(sample_hello_ok()), [](const json& j) { return to_json(parse_hello_ok(j)); }},
      {to_json(sample_ping()), [](const json& j) { return to_json(parse_ping(j)); }},
      {to_json(sample_pong()), [](const json& j) { return to_json(parse_pong(j)); }},
      {to_json(sample_setup_server()), [](const json& j) { return to_json(parse_setup_server(j)); }},
      {to_json(sample_setup_server_ok()), [](const json& j) { return to_json(parse_setup_server_ok(j)); }},
      {to_json(sample_setup_client()), [](const json& j) { return to_json(parse_setup_client(j)); }},
      {to_json(sample_setup_client_ok()), [](const json& j) { return to_json(parse_setup_client_ok(j)); }},
      {to_json(sample_start()), [](const json& j) { return to_json(parse_start(j)); }},
      {to_json(sample_abort()), [](const json& j) { return to_json(parse_abort(j)); }},
      {to_json(sample_error()), [](const json& j) { return to_json(parse_error(j)); }},
  };
  for (const auto& [j, rt] : cases) EXPECT_EQ(rt(wire(j)), j) << j.dump();
}

// ---- typed messages: rejections -------------------------------------------------------------

namespace {
using Parser = std::function<void(const json&)>;

struct Bad {
  const char* message;  // "HELLO"
  Parser parse;
  json good;
  std::string field;   // JSON pointer-ish: "a" or "a/0/b"
  json value;          // replaces the field; discarded() means "erase it"
  std::string expect;  // substring the error must contain, besides the message name
};

void check_bad(const Bad& b) {
  json j = wire(b.good);
  const json::json_pointer ptr("/" + b.field);
  if (b.value.is_discarded()) {
    j[ptr.parent_pointer()].erase(ptr.back());
  } else {
    j[ptr] = b.value;
  }
  const auto msg = proto_error_of([&] { b.parse(j); });
  EXPECT_TRUE(contains(msg, b.message)) << b.message << " " << b.field << "=" << b.value.dump() << ": " << msg;
  EXPECT_TRUE(contains(msg, b.expect)) << b.message << " " << b.field << "=" << b.value.dump() << ": " << msg;
}

const json kErase = json(json::value_t::discarded);
const Parser kHello = [](const json& j) { (void)parse_hello(j); };
const Parser kHelloOk = [](const json& j) { (void)parse_hello_ok(j); };
const Parser kPing = [](const json& j) { (void)parse_ping(j); };
const Parser kPong = [](const json& j) { (void)parse_pong(j); };
const Parser kSetupServer = [](const json& j) { (void)parse_setup_server(j); };
const Parser kSetupServerOk = [](const json& j) { (void)parse_setup_server_ok(j); };
const Parser kSetupClient = [](const json& j) { (void)parse_setup_client(j); };
const Parser kSetupClientOk = [](const json& j) { (void)parse_setup_client_ok(j); };
const Parser kStart = [](const json& j) { (void)parse_start(j); };
const Parser kAbort = [](const json& j) { (void)parse_abort(j); };
const Parser kError = [](const json& j) { (void)parse_error(j); };

json strings_array(std::size_t n, std::size_t len) {
  return json(std::vector<std::string>(n, std::string(len, 'w')));
}
}  // namespace

TEST(MessagesReject, NotAnObject) {
  // Not a structured binding: clang 14 cannot capture one in the lambda below.
  for (const auto& entry : std::vector<std::pair<std::string, Parser>>{{"HELLO", kHello},
                                                                       {"HELLO_OK", kHelloOk},
                                                                       {"PING", kPing},
                                                                       {"PONG", kPong},
                                                                       {"SETUP_SERVER", kSetupServer},
                                                                       {"SETUP_SERVER_OK", kSetupServerOk},
                                                                       {"SETUP_CLIENT", kSetupClient},
                                                                       {"SETUP_CLIENT_OK", kSetupClientOk},
                                                                       {"START", kStart},
                                                                       {"ABORT", kAbort},
                                                                       {"ERROR", kError}}) {
    const auto& name = entry.first;
    const Parser& p = entry.second;
    const auto msg = proto_error_of([&] { p(json::array()); });
    EXPECT_TRUE(contains(msg, name + ": not a JSON object")) << msg;
  }
}

TEST(MessagesReject, TypeConfusionNamesMessageAndField) {
  const json hello = to_json(sample_hello());
  const json hello_ok = to_json(sample_hello_ok());
  const json ping = to_json(sample_ping());
  const json pong = to_json(sample_pong());
  const json start = to_json(sample_start());
  const std::vector<Bad> cases = {
      // string where an integer is expected
      {"HELLO", kHello, hello, "proto_min", "1", "HELLO.proto_min: expected a non-negative integer, got string"},
      {"PING", kPing, ping, "seq", "5", "PING.seq: expected a non-negative integer, got string"},
      {"PONG", kPong, pong, "t_rx", "1", "PONG.t_rx: expected an integer, got string"},
      {"HELLO_OK", kHelloOk, hello_ok, "pid", json::array({1}), "HELLO_OK.pid: expected an integer, got array"},
      {"START", kStart, start, "end_at", nullptr, "START.end_at: expected an integer, got null"},
      {"START", kStart, start, "interval_ns", 1e9, "START.interval_ns: expected an integer, got number"},
      // negative for unsigned
      {"PING", kPing, ping, "seq", -1, "PING.seq: expected a non-negative integer"},
      {"HELLO", kHello, hello, "proto_max", -1, "HELLO.proto_max"},
      {"HELLO_OK", kHelloOk, hello_ok, "pid", -5, "HELLO_OK.pid: -5 out of range"},
      {"START", kStart, start, "start_at", -1, "START.start_at: -1 out of range"},
      // floats and huge numbers
      {"PING", kPing, ping, "seq", 1.5, "PING.seq: expected a non-negative integer, got number"},
      {"PING", kPing, ping, "seq", 1e30, "PING.seq"},
      {"PING", kPing, ping, "seq", 4294967296ull, "PING.seq: 4294967296 out of range"},
      {"PING", kPing, ping, "seq", std::numeric_limits<std::uint64_t>::max(), "PING.seq"},
      {"PONG", kPong, pong, "t_tx", std::numeric_limits<std::uint64_t>::max(), "PONG.t_tx: out of range"},
      {"HELLO_OK", kHelloOk, hello_ok, "pid", 2147483648LL, "HELLO_OK.pid"},
      {"HELLO", kHello, hello, "proto_min", 65536, "HELLO.proto_min"},
      {"HELLO", kHello, hello, "proto_min", 0, "HELLO.proto_min"},
      // order constraints
      {"HELLO", kHello, to_json(Hello{3, 3, "c", {}}), "proto_max", 2, "HELLO.proto_max: 2 out of range"},
      {"PONG", kPong, pong, "t_tx", 1'000'000'122, "PONG.t_tx"},
      {"START", kStart, start, "window_open", 999'999'999, "START.window_open"},
      {"START", kStart, start, "window_close", 1'999'999'999, "START.window_close"},
      {"START", kStart, start, "end_at", 8'999'999'999, "START.end_at"},
      {"START", kStart, start, "interval_ns", 9'999'999, "START.interval_ns"},
      {"START", kStart, start, "interval_ns", 3'600'000'000'001LL, "START.interval_ns"},
      // wrong types for strings
      {"HELLO", kHello, hello, "coordinator", 7, "HELLO.coordinator: expected a string, got number"},
      {"HELLO_OK", kHelloOk, hello_ok, "hostname", json::object(), "HELLO_OK.hostname: expected a string, got object"},
      {"ABORT", kAbort, to_json(sample_abort()), "reason", false, "ABORT.reason: expected a string, got boolean"},
      {"ERROR", kError, to_json(sample_error()), "code", nullptr, "ERROR.code: expected a string"},
      // missing fields
      {"HELLO", kHello, hello, "coordinator", kErase, "HELLO.coordinator: missing field"},
      {"PONG", kPong, pong, "seq", kErase, "PONG.seq: missing field"},
      {"START", kStart, start, "interval_ns", kErase, "START.interval_ns: missing field"},
      {"ERROR", kError, to_json(sample_error()), "message", kErase, "ERROR.message: missing field"},
  };
  for (const auto& b : cases) check_bad(b);
}

TEST(MessagesReject, StringsTooLong) {
  const std::vector<Bad> cases = {
      {"HELLO", kHello, to_json(sample_hello()), "coordinator", std::string(257, 'c'),
       "HELLO.coordinator: string longer than 256 bytes"},
      {"HELLO_OK", kHelloOk, to_json(sample_hello_ok()), "version", std::string(65, 'v'), "HELLO_OK.version"},
      {"HELLO_OK", kHelloOk, to_json(sample_hello_ok()), "hostname", std::string(257, 'h'), "HELLO_OK.hostname"},
      {"ABORT", kAbort, to_json(sample_abort()), "reason", std::string(kMaxString + 1, 'r'),
       "ABORT.reason: string longer than 4096 bytes"},
      {"ERROR", kError, to_json(sample_error()), "code", std::string(65, 'x'), "ERROR.code"},
      {"ERROR", kError, to_json(sample_error()), "message", std::string(kMaxString + 1, 'm'), "ERROR.message"},
      {"SETUP_SERVER", kSetupServer, to_json(sample_setup_server()), "test_id", std::string(65, 'i'),
       "SETUP_SERVER.test_id"},
      {"SETUP_CLIENT", kSetupClient, to_json(sample_setup_client()), "targets/0/host", std::string(257, 'h'),
       "SETUP_CLIENT.targets[].host"},
      {"SETUP_SERVER_OK", kSetupServerOk, to_json(sample_setup_server_ok()), "warnings/1",
       std::string(kMaxString + 1, 'w'), "SETUP_SERVER_OK.warnings: entries must be strings"},
  };
  for (const auto& b : cases) check_bad(b);
  // At the limit is fine.
  auto j = to_json(sample_hello());
  j["coordinator"] = std::string(256, 'c');
  EXPECT_EQ(parse_hello(j).coordinator.size(), 256u);
}

TEST(MessagesReject, ArraysTooLong) {
  const std::vector<Bad> cases = {
      {"SETUP_SERVER_OK", kSetupServerOk, to_json(sample_setup_server_ok()), "warnings", strings_array(1001, 1),
       "SETUP_SERVER_OK.warnings: more than 1000 entries"},
      {"SETUP_CLIENT_OK", kSetupClientOk, to_json(sample_setup_client_ok()), "warnings", strings_array(1001, 1),
       "SETUP_CLIENT_OK.warnings: more than 1000 entries"},
      {"SETUP_CLIENT", kSetupClient, to_json(sample_setup_client()), "targets",
       json(std::vector<json>(kMaxList + 1, json::object())), "SETUP_CLIENT.targets: more than 100000 entries"},
      {"SETUP_CLIENT_OK", kSetupClientOk, to_json(sample_setup_client_ok()), "warnings", json::array({"ok", 5}),
       "SETUP_CLIENT_OK.warnings: entries must be strings"},
      {"SETUP_CLIENT_OK", kSetupClientOk, to_json(sample_setup_client_ok()), "warnings", "w",
       "SETUP_CLIENT_OK.warnings: expected an array, got string"},
  };
  for (const auto& b : cases) check_bad(b);
  auto j = to_json(sample_setup_server_ok());
  j["warnings"] = strings_array(1000, kMaxString);
  EXPECT_EQ(parse_setup_server_ok(j).warnings.size(), 1000u);
}

TEST(MessagesReject, SetupClientTargets) {
  const json good = to_json(sample_setup_client());
  const std::vector<Bad> cases = {
      {"SETUP_CLIENT", kSetupClient, good, "targets", json::array(), "SETUP_CLIENT.targets: empty"},
      {"SETUP_CLIENT", kSetupClient, good, "targets/0", "10.0.0.2:40001", "SETUP_CLIENT.targets[]: not a JSON object"},
      {"SETUP_CLIENT", kSetupClient, good, "targets/0/port", -1, "SETUP_CLIENT.targets[].port"},
      {"SETUP_CLIENT", kSetupClient, good, "targets/0/port", 65536, "SETUP_CLIENT.targets[].port"},
      {"SETUP_CLIENT", kSetupClient, good, "targets/1/node_index", 100001, "SETUP_CLIENT.targets[].node_index"},
      {"SETUP_CLIENT", kSetupClient, good, "targets/1/host", kErase, "SETUP_CLIENT.targets[].host: missing field"},
      {"SETUP_CLIENT", kSetupClient, good, "node_index", "1", "SETUP_CLIENT.node_index"},
  };
  for (const auto& b : cases) check_bad(b);
  // rw stream opens 2 connections per target per parallel: 50001 targets exceed 100000.
  json j = good;
  json t = json::array();
  for (int i = 0; i < 50001; ++i) t.push_back({{"node_index", 1}, {"host", "h"}, {"port", 1}});
  j["targets"] = t;
  const auto msg = proto_error_of([&] { (void)parse_setup_client(j); });
  EXPECT_TRUE(contains(msg, "SETUP_CLIENT: 200004 connections exceed the limit of 100000")) << msg;
}

TEST(MessagesReject, SetupFieldsAndSpec) {
  const json ss = to_json(sample_setup_server());
  const json sc = to_json(sample_setup_client());
  const std::vector<Bad> cases = {
      {"SETUP_SERVER", kSetupServer, ss, "expect_connections", 0, "SETUP_SERVER.expect_connections"},
      {"SETUP_SERVER", kSetupServer, ss, "expect_connections", 100001, "SETUP_SERVER.expect_connections"},
      {"SETUP_SERVER", kSetupServer, ss, "node_index", -1, "SETUP_SERVER.node_index"},
      {"SETUP_SERVER", kSetupServer, ss, "spec", "write", "SETUP_SERVER.spec: expected an object, got string"},
      {"SETUP_SERVER", kSetupServer, ss, "spec/threads", 0, "SETUP_SERVER.spec"},
      {"SETUP_SERVER", kSetupServer, ss, "spec/threads", "4", "spec.threads"},
      {"SETUP_SERVER", kSetupServer, ss, "spec/test", "erase", "SETUP_SERVER.spec"},
      {"SETUP_CLIENT", kSetupClient, sc, "spec/buffsize", 1, "SETUP_CLIENT.spec"},
      {"SETUP_CLIENT", kSetupClient, sc, "spec/time_ns", kErase, "SETUP_CLIENT.spec"},
      {"SETUP_SERVER", kSetupServer, ss, "token", kErase, "SETUP_SERVER.token: missing field"},
      {"SETUP_SERVER", kSetupServer, ss, "token", 5, "SETUP_SERVER.token: expected a string"},
      {"SETUP_SERVER", kSetupServer, ss, "token", "00", "SETUP_SERVER.token: token must be 32 hex digits"},
      {"SETUP_CLIENT", kSetupClient, sc, "token", std::string(32, 'G'),
       "SETUP_CLIENT.token: token is not lower-case hex"},
      {"SETUP_SERVER_OK", kSetupServerOk, to_json(sample_setup_server_ok()), "data_port", -1,
       "SETUP_SERVER_OK.data_port"},
      {"SETUP_SERVER_OK", kSetupServerOk, to_json(sample_setup_server_ok()), "data_port", 70000,
       "SETUP_SERVER_OK.data_port"},
      {"SETUP_CLIENT_OK", kSetupClientOk, to_json(sample_setup_client_ok()), "connections", 100001,
       "SETUP_CLIENT_OK.connections"},
  };
  for (const auto& b : cases) check_bad(b);
}

// ---- RDMA queue pair exchange (RDMA_CONNECT and the set-up messages' rdma lists) --------------

TEST(Messages, RdmaEndpointsRoundTrip) {
  const auto c = parse_rdma_connect(wire(to_json(sample_rdma_connect())));
  EXPECT_EQ(c.test_id, "0123456789abcdef");
  ASSERT_EQ(c.endpoints.size(), 3u);
  EXPECT_EQ(c.endpoints[1], sample_endpoint(1, 0, 1));
  EXPECT_EQ(c.endpoints[0].addr, 0x7f00deadbeef0000ULL);  // 64-bit addresses survive JSON
  EXPECT_EQ(c.endpoints[0].rkey, 0xfedcba98u);
  EXPECT_EQ(to_json(c.endpoints[0])["gid"], "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
  EXPECT_EQ(parse_rdma_connect_ok(wire(to_json(RdmaConnectOk{3}))).queue_pairs, 3u);
  SetupServerOk so = sample_setup_server_ok();
  so.data_port = 0;  // no data port: the queue pairs travel in the answer
  so.rdma = {sample_endpoint(0, 1, 0)};
  EXPECT_EQ(parse_setup_server_ok(wire(to_json(so))).rdma, so.rdma);
  SetupClient sc = sample_setup_client();
  sc.targets[0].rdma = {sample_endpoint(2, 1, 0), sample_endpoint(2, 1, 1)};
  EXPECT_EQ(parse_setup_client(wire(to_json(sc))).targets[0].rdma, sc.targets[0].rdma);
  EXPECT_TRUE(parse_setup_client(wire(to_json(sc))).targets[1].rdma.empty());
  SetupServer ss = sample_setup_server();
  ss.rdma_clients = {1, 4};
  ss.link_addrs = {"10.1.0.1", "10.2.0.1"};
  const auto ss2 = parse_setup_server(wire(to_json(ss)));
  EXPECT_EQ(ss2.rdma_clients, ss.rdma_clients);
  EXPECT_EQ(ss2.link_addrs, ss.link_addrs);
  EXPECT_FALSE(to_json(sample_setup_server()).contains("rdma_clients"));  // TCP tests carry none
  SetupClientOk co = sample_setup_client_ok();
  co.rdma = {sample_endpoint(1, 2, 0)};
  EXPECT_EQ(parse_setup_client_ok(wire(to_json(co))).rdma, co.rdma);
}

TEST(MessagesReject, RdmaConnectFields) {
  const Parser p = [](const json& j) { (void)parse_rdma_connect(j); };
  const json good = to_json(sample_rdma_connect());
  const std::vector<Bad> cases = {
      {"RDMA_CONNECT", p, good, "test_id", kErase, "RDMA_CONNECT.test_id: missing field"},
      {"RDMA_CONNECT", p, good, "endpoints", kErase, "RDMA_CONNECT.endpoints: missing field"},
      {"RDMA_CONNECT", p, good, "endpoints", json::array(), "RDMA_CONNECT.endpoints: empty"},
      {"RDMA_CONNECT", p, good, "endpoints", json::object(), "RDMA_CONNECT.endpoints: expected an array"},
      {"RDMA_CONNECT", p, good, "endpoints/1", "qp", "RDMA_CONNECT.endpoints[1]: not a JSON object"},
      {"RDMA_CONNECT", p, good, "endpoints/0/node", 100001, "RDMA_CONNECT.endpoints[0].node"},
      {"RDMA_CONNECT", p, good, "endpoints/0/peer", 1, "RDMA_CONNECT.endpoints[0].peer: the node's own index 1"},
      {"RDMA_CONNECT", p, good, "endpoints/2/peer", 3,
       "RDMA_CONNECT.endpoints[2].peer: 3, but endpoints[0] is for node 0"},
      {"RDMA_CONNECT", p, good, "endpoints/0/conn", -1, "RDMA_CONNECT.endpoints[0].conn"},
      {"RDMA_CONNECT", p, good, "endpoints/0/qpn", 0, "RDMA_CONNECT.endpoints[0].qpn: 0 out of range"},
      {"RDMA_CONNECT", p, good, "endpoints/0/qpn", 0x1000000, "RDMA_CONNECT.endpoints[0].qpn"},
      {"RDMA_CONNECT", p, good, "endpoints/0/qpn", kErase, "RDMA_CONNECT.endpoints[0].qpn: missing field"},
      {"RDMA_CONNECT", p, good, "endpoints/1/psn", 0x1000000, "RDMA_CONNECT.endpoints[1].psn"},
      {"RDMA_CONNECT", p, good, "endpoints/0/lid", 65536, "RDMA_CONNECT.endpoints[0].lid"},
      {"RDMA_CONNECT", p, good, "endpoints/0/gid", "fe80::1",
       "RDMA_CONNECT.endpoints[0].gid: must be 32 lower-case hex digits"},
      {"RDMA_CONNECT", p, good, "endpoints/0/gid", std::string(32, 'F'), "RDMA_CONNECT.endpoints[0].gid: must be 32"},
      {"RDMA_CONNECT", p, good, "endpoints/0/gid", 5, "RDMA_CONNECT.endpoints[0].gid: expected a string"},
      {"RDMA_CONNECT", p, good, "endpoints/0/addr", -1, "RDMA_CONNECT.endpoints[0].addr"},
      {"RDMA_CONNECT", p, good, "endpoints/0/addr", "0x1000", "RDMA_CONNECT.endpoints[0].addr"},
      {"RDMA_CONNECT", p, good, "endpoints/0/len", 0, "RDMA_CONNECT.endpoints[0].len: 0 out of range"},
      {"RDMA_CONNECT", p, good, "endpoints/0/len", 1ULL << 40, "RDMA_CONNECT.endpoints[0].len"},
      {"RDMA_CONNECT", p, good, "endpoints/2/rkey", 1ULL << 32, "RDMA_CONNECT.endpoints[2].rkey"},
      {"RDMA_CONNECT", p, good, "endpoints/2/rkey", 1.5, "RDMA_CONNECT.endpoints[2].rkey"},
  };
  for (const auto& b : cases) check_bad(b);
  const Parser ok = [](const json& j) { (void)parse_rdma_connect_ok(j); };
  check_bad({"RDMA_CONNECT_OK", ok, to_json(RdmaConnectOk{2}), "queue_pairs", 0,
             "RDMA_CONNECT_OK.queue_pairs: 0 out of range"});
  check_bad({"RDMA_CONNECT_OK", ok, to_json(RdmaConnectOk{2}), "queue_pairs", kErase,
             "RDMA_CONNECT_OK.queue_pairs: missing"});
  EXPECT_TRUE(contains(proto_error_of([&] { p(json::array()); }), "RDMA_CONNECT: not a JSON object"));
}

TEST(MessagesReject, RdmaListsInSetupMessages) {
  SetupServer ss = sample_setup_server();
  ss.rdma_clients = {1};
  SetupServerOk so = sample_setup_server_ok();
  so.rdma = {sample_endpoint(0, 1, 0)};
  SetupClient sc = sample_setup_client();
  sc.targets[1].rdma = {sample_endpoint(3, 1, 0)};
  SetupClientOk co = sample_setup_client_ok();
  co.rdma = {sample_endpoint(1, 2, 0), sample_endpoint(1, 2, 1)};
  const std::vector<Bad> cases = {
      {"SETUP_SERVER", kSetupServer, to_json(ss), "rdma_clients/0", -1,
       "SETUP_SERVER.rdma_clients[0]: not a node index"},
      {"SETUP_SERVER", kSetupServer, to_json(ss), "rdma_clients", "1", "SETUP_SERVER.rdma_clients: expected an array"},
      {"SETUP_SERVER", kSetupServer, to_json(ss), "link_addrs", json::array({1}), "SETUP_SERVER.link_addrs"},
      {"SETUP_SERVER_OK", kSetupServerOk, to_json(so), "rdma/0/gid", "", "SETUP_SERVER_OK.rdma[0].gid"},
      {"SETUP_CLIENT", kSetupClient, to_json(sc), "targets/1/rdma/0/qpn", -5, "SETUP_CLIENT.targets[].rdma[0].qpn"},
      {"SETUP_CLIENT_OK", kSetupClientOk, to_json(co), "rdma/1/psn", "1", "SETUP_CLIENT_OK.rdma[1].psn"},
  };
  for (const auto& b : cases) check_bad(b);
  // More queue pairs than the limit of one message's connections.
  json big = to_json(ss);
  big["rdma_clients"] = json(std::vector<unsigned>(50001, 1));  // rw stream, parallel 2: 4 per client
  EXPECT_TRUE(contains(proto_error_of([&] { (void)parse_setup_server(big); }),
                       "SETUP_SERVER.rdma_clients: 200004 queue pairs exceed"));
}

// ---- tokens ---------------------------------------------------------------------------------

TEST(Token, HexRoundTrip) {
  const Token t = sample_token();
  const std::string hex = to_hex(t);
  EXPECT_EQ(hex.size(), 32u);
  EXPECT_EQ(hex.substr(0, 6), "031425");
  EXPECT_EQ(token_from_hex(hex, "ctx"), t);
  Token all{};
  all.fill(0xff);
  EXPECT_EQ(to_hex(all), std::string(32, 'f'));
  EXPECT_EQ(token_from_hex(std::string(32, 'f'), "ctx"), all);
  EXPECT_EQ(token_from_hex(std::string(32, '0'), "ctx"), Token{});
  EXPECT_EQ(to_hex(std::vector<std::uint8_t>{0x00, 0x0a, 0xa0, 0xff}), "000aa0ff");
  EXPECT_EQ(to_hex(std::vector<std::uint8_t>{}), "");
}

TEST(Token, BadHex) {
  const std::string good = to_hex(sample_token());
  const std::string upper = "0A" + good.substr(2);
  const std::string nonhex = good.substr(0, 31) + "g";
  const std::string space = " " + good.substr(1);
  const std::string nul = std::string(1, '\0') + good.substr(1);
  for (const std::string& bad : {upper, nonhex, space, nul}) {
    const auto msg = proto_error_of([&] { (void)token_from_hex(bad, "SETUP_SERVER.token"); });
    EXPECT_TRUE(contains(msg, "SETUP_SERVER.token: token is not lower-case hex")) << msg;
  }
  for (const std::string& bad : {std::string(), good.substr(1), good + "0", good + good}) {
    const auto msg = proto_error_of([&] { (void)token_from_hex(bad, "X.token"); });
    EXPECT_TRUE(contains(msg, "X.token: token must be 32 hex digits")) << msg;
  }
}

TEST(Token, RandomTokensDiffer) {
  const Token a = random_token();
  const Token b = random_token();
  EXPECT_NE(a, b);
  EXPECT_NE(a, Token{});
  EXPECT_EQ(token_from_hex(to_hex(a), "ctx"), a);
}

// ---- Fields ---------------------------------------------------------------------------------

TEST(FieldsTest, NumBooleanObject) {
  const json j = {{"x", 2.5}, {"n", -3}, {"b", true}, {"o", json::object()}, {"s", "str"}};
  const Fields f(j, "CTX");
  EXPECT_TRUE(f.has("x"));
  EXPECT_FALSE(f.has("y"));
  EXPECT_EQ(f.num("x", 0, 10), 2.5);
  EXPECT_EQ(f.num("n", -5, 0), -3.0);
  EXPECT_TRUE(f.boolean("b"));
  EXPECT_TRUE(f.object("o").empty());
  EXPECT_EQ(f.ctx("x"), "CTX.x");
  EXPECT_TRUE(contains(proto_error_of([&] { (void)f.num("x", 3, 10); }), "CTX.x: 2.5 out of range"));
  EXPECT_TRUE(contains(proto_error_of([&] { (void)f.num("s", 0, 1); }), "CTX.s: expected a number, got string"));
  EXPECT_TRUE(contains(proto_error_of([&] { (void)f.boolean("n"); }), "CTX.n: expected a boolean, got number"));
  EXPECT_TRUE(contains(proto_error_of([&] { (void)f.object("s"); }), "CTX.s: expected an object, got string"));
  EXPECT_TRUE(contains(proto_error_of([&] { (void)f.u64("n", 0, 10); }), "CTX.n: expected a non-negative integer"));
  EXPECT_EQ(f.i64("n", -3, -3), -3);
  EXPECT_TRUE(contains(proto_error_of([&] { (void)f.str("missing"); }), "CTX.missing: missing field"));
  EXPECT_TRUE(contains(proto_error_of([] { Fields bad(json(1), "CTX2"); }), "CTX2: not a JSON object"));
}

// ---- validate_frame -------------------------------------------------------------------------

TEST(ValidateFrame, AcceptsValidFramesOfEveryType) {
  const std::vector<std::pair<MsgType, json>> frames = {
      {MsgType::hello, to_json(sample_hello())},
      {MsgType::hello_ok, to_json(sample_hello_ok())},
      {MsgType::ping, to_json(sample_ping())},
      {MsgType::pong, to_json(sample_pong())},
      {MsgType::setup_server, to_json(sample_setup_server())},
      {MsgType::setup_server_ok, to_json(sample_setup_server_ok())},
      {MsgType::setup_client, to_json(sample_setup_client())},
      {MsgType::setup_client_ok, to_json(sample_setup_client_ok())},
      {MsgType::start, to_json(sample_start())},
      {MsgType::heartbeat, json::object()},
      {MsgType::abort, to_json(sample_abort())},
      {MsgType::result, to_json(sample_result())},
      {MsgType::error, to_json(sample_error())},
      {MsgType::bye, json::object()},
      {MsgType::links_request, json::object()},
      {MsgType::links, to_json(LinksReply{"h", {LinkInfo{}}, SocketLimits{}, {}})},
      {MsgType::shutdown, to_json(Shutdown{"killall"})},
      {MsgType::rdma_connect, to_json(sample_rdma_connect())},
      {MsgType::rdma_connect_ok, to_json(RdmaConnectOk{2})},
  };
  ASSERT_EQ(frames.size(), kMaxMsgType - 2u);  // every type but the two retired ones
  for (const auto& [type, body] : frames) {
    EXPECT_NO_THROW(validate_frame(encode_frame(type, body))) << to_string(type);
  }
}

TEST(ValidateFrame, RejectsBodyOfTheWrongType) {
  // A valid PING body under a PONG header is missing PONG's fields.
  auto msg = proto_error_of([] { validate_frame(encode_frame(MsgType::pong, to_json(sample_ping()))); });
  EXPECT_TRUE(contains(msg, "PONG.t_rx: missing field")) << msg;
  msg = proto_error_of([] { validate_frame(encode_frame(MsgType::result, to_json(sample_hello()))); });
  EXPECT_TRUE(contains(msg, "RESULT.")) << msg;
  msg = proto_error_of([] { validate_frame(encode_frame(MsgType::setup_client, to_json(sample_setup_server()))); });
  EXPECT_TRUE(contains(msg, "SETUP_CLIENT.targets: missing field")) << msg;
  // Even bodiless messages must carry an object.
  const auto h = encode_header(MsgType::bye, 2);
  msg = proto_error_of([&] { validate_frame(frame_of(h, "[]")); });
  EXPECT_TRUE(contains(msg, "BYE body is not a JSON object")) << msg;
}

TEST(ValidateFrame, RejectsBadHeaders) {
  const std::string body = to_json(sample_ping()).dump();
  const auto len = static_cast<std::uint32_t>(body.size());
  EXPECT_NO_THROW(validate_frame(frame_of(raw_header(kMagic, kVersion, 3, len), body)));
  EXPECT_TRUE(contains(
      proto_error_of([&] { validate_frame(frame_of(raw_header(kMagic + 1, kVersion, 3, len), body)); }), "magic"));
  EXPECT_TRUE(contains(
      proto_error_of([&] { validate_frame(frame_of(raw_header(kMagic, kVersion + 1, 3, len), body)); }), "version"));
  EXPECT_TRUE(contains(
      proto_error_of([&] { validate_frame(frame_of(raw_header(kMagic, kVersion, kMaxMsgType + 1, len), body)); }),
      "unknown message type " + std::to_string(kMaxMsgType + 1)));
}
