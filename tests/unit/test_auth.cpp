// Shared-key authentication and the hardened frame/message decoding (pure functions).
#include <fabperf/core/error.hpp>
#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace fabperf;
using nlohmann::json;

namespace {

std::string temp_dir() {
  static const std::string d = [] {
    char tmpl[] = "/tmp/fabperf-auth-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    return std::string(p ? p : "/tmp");
  }();
  return d;
}

std::vector<std::uint8_t> frame_bytes(proto::MsgType t, const std::string& body) {
  const auto h = proto::encode_header(t, static_cast<std::uint32_t>(body.size()));
  std::string all(reinterpret_cast<const char*>(h.data()), h.size());
  all += body;
  return std::vector<std::uint8_t>(all.begin(), all.end());
}

std::string error_of(const std::vector<std::uint8_t>& frame) {
  try {
    proto::validate_frame(frame);
  } catch (const ProtocolError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Auth, HmacSha256MatchesRfc4231) {
  const std::string key = "Jefe", data = "what do ya want for nothing?";
  const auto mac = auth::hmac_sha256({reinterpret_cast<const std::uint8_t*>(key.data()), key.size()},
                                     {{reinterpret_cast<const std::uint8_t*>(data.data()), 10},
                                      {reinterpret_cast<const std::uint8_t*>(data.data()) + 10, data.size() - 10}});
  EXPECT_EQ(to_hex(mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Auth, ProofsAreComparedExactly) {
  const auto k1 = auth::parse_key(std::string(64, 'a'), "k1");
  const auto n = auth::make_nonce();
  EXPECT_NE(n, auth::make_nonce());
  const auto p = auth::hmac_sha256(k1.bytes(), {n});
  EXPECT_TRUE(auth::proofs_equal(p, auth::hmac_sha256(k1.bytes(), {n})));
  auto flipped = p;
  flipped[31] ^= 1;
  EXPECT_FALSE(auth::proofs_equal(p, flipped));
}

TEST(Auth, KeyTextIsStrictHex) {
  EXPECT_EQ(auth::parse_key("  " + std::string(32, 'F') + "\n", "f").bytes().size(), 16u);
  EXPECT_THROW(auth::parse_key("", "f"), UsageError);
  EXPECT_THROW(auth::parse_key(std::string(30, 'a'), "f"), UsageError);   // too short
  EXPECT_THROW(auth::parse_key(std::string(130, 'a'), "f"), UsageError);  // too long
  EXPECT_THROW(auth::parse_key(std::string(33, 'a'), "f"), UsageError);   // odd
  EXPECT_THROW(auth::parse_key(std::string(31, 'a') + "g", "f"), UsageError);
  EXPECT_THROW(auth::parse_key(std::string(16, 'a') + " " + std::string(16, 'a'), "f"), UsageError);
}

TEST(Auth, KeyFileModeMustBePrivate) {
  EXPECT_FALSE(auth::key_file_mode_problem(S_IFREG | 0600, 1000, 1000).has_value());
  EXPECT_FALSE(auth::key_file_mode_problem(S_IFREG | 0400, 0, 1000).has_value());  // root-owned is fine
  EXPECT_TRUE(auth::key_file_mode_problem(S_IFREG | 0644, 1000, 1000).has_value());
  EXPECT_TRUE(auth::key_file_mode_problem(S_IFREG | 0640, 1000, 1000).has_value());
  EXPECT_TRUE(auth::key_file_mode_problem(S_IFREG | 0602, 1000, 1000).has_value());
  EXPECT_TRUE(auth::key_file_mode_problem(S_IFDIR | 0700, 1000, 1000).has_value());
  EXPECT_TRUE(auth::key_file_mode_problem(S_IFREG | 0600, 1001, 1000).has_value());
  EXPECT_NE(auth::key_file_mode_problem(S_IFREG | 0644, 1, 1)->find("0644"), std::string::npos);
}

TEST(Auth, KeygenWritesPrivateRandomKeysAndRefusesToOverwrite) {
  const std::string a = temp_dir() + "/a.key", b = temp_dir() + "/b.key";
  ::unlink(a.c_str());
  ::unlink(b.c_str());
  auth::write_key_file(a, false);
  auth::write_key_file(b, false);
  struct stat st {};
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  const auto ka = auth::load_key_file(a);
  EXPECT_EQ(ka.bytes().size(), auth::kKeygenBytes);
  EXPECT_FALSE(std::equal(ka.bytes().begin(), ka.bytes().end(), auth::load_key_file(b).bytes().begin()));
  EXPECT_THROW(auth::write_key_file(a, false), UsageError);
  auth::write_key_file(a, true);
  EXPECT_FALSE(std::equal(ka.bytes().begin(), ka.bytes().end(), auth::load_key_file(a).bytes().begin()));
  ASSERT_EQ(::chmod(a.c_str(), 0644), 0);
  try {
    (void)auth::load_key_file(a);
    ADD_FAILURE() << "a world-readable key file was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("refusing to use it"), std::string::npos) << e.what();
  }
  EXPECT_THROW(auth::load_key_file(temp_dir() + "/missing.key"), UsageError);
  // The README's `fabperf keygen /etc/fabperf/key` on a fresh host: the folder is made, 0700.
  const std::string dir = temp_dir() + "/etc-" + std::to_string(::getpid()), nested = dir + "/fabperf/key";
  auth::write_key_file(nested, false);
  ASSERT_EQ(::stat((dir + "/fabperf").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(auth::load_key_file(nested).bytes().size(), auth::kKeygenBytes);
  std::filesystem::remove_all(dir);
}

TEST(Frame, HostileLengthsAreRejectedBeforeAllocation) {
  auto h = proto::encode_header(proto::MsgType::hello, 0);
  h[8] = h[9] = h[10] = h[11] = 0xff;  // 0xffffffff
  EXPECT_THROW(proto::decode_header(h), ProtocolError);
  const auto small = proto::encode_header(proto::MsgType::hello, proto::kMaxPreAuthBody + 1);
  EXPECT_THROW(proto::decode_header(small, proto::kMaxPreAuthBody), ProtocolError);
  EXPECT_NO_THROW(proto::decode_header(small));
  auto bad_type = proto::encode_header(proto::MsgType::hello, 0);
  bad_type[7] = proto::kMaxMsgType + 1;
  EXPECT_THROW(proto::decode_header(bad_type), ProtocolError);
}

TEST(Frame, VersionMismatchNamesBothVersions) {
  auto h = proto::encode_header(proto::MsgType::hello, 2);
  h[5] = 1;
  try {
    (void)proto::decode_header(h);
    ADD_FAILURE();
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("peer speaks version 1, this fabperf speaks 4"), std::string::npos)
        << e.what();
  }
}

TEST(Messages, HelloRoundTripsAndRejectsWrongTypes) {
  proto::Hello h{proto::kVersion, proto::kVersion, "coord", proto::local_capabilities()};
  const auto back = proto::parse_hello(proto::to_json(h));
  EXPECT_EQ(back.coordinator, "coord");
  EXPECT_EQ(back.caps, std::vector<std::string>{"tls13-psk"});
  EXPECT_EQ(error_of(proto::encode_frame(proto::MsgType::hello, proto::to_json(h))), "");

  json j = proto::to_json(h);
  j["caps"] = json::array({1, 2});
  EXPECT_NE(error_of(proto::encode_frame(proto::MsgType::hello, j)).find("HELLO.caps"), std::string::npos);
  j = proto::to_json(h);
  j["proto_min"] = "1";
  EXPECT_NE(
      error_of(proto::encode_frame(proto::MsgType::hello, j)).find("HELLO.proto_min: expected a non-negative integer"),
      std::string::npos);
  j = proto::to_json(h);
  j["proto_max"] = 0;
  EXPECT_NE(error_of(proto::encode_frame(proto::MsgType::hello, j)).find("out of range"), std::string::npos);
  // A peer of another version is not rejected for its fields: the caller names both versions.
  EXPECT_EQ(proto::parse_hello(json{{"proto_min", 7}, {"proto_max", 9}}).proto_min, 7u);

  // Protocol 2's AUTH (15) and AUTH_OK (16) are unknown types now.
  for (const std::uint8_t t : {std::uint8_t{15}, std::uint8_t{16}}) {
    auto hdr = proto::encode_header(proto::MsgType::hello, 2);
    hdr[7] = t;
    EXPECT_THROW(proto::decode_header(hdr), ProtocolError);
  }
}

TEST(Messages, BodiesThatAreNotObjectsOrTooDeepAreRejected) {
  EXPECT_NE(error_of(frame_bytes(proto::MsgType::ping, "[1]")).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(frame_bytes(proto::MsgType::ping, "{\"seq\":")).find("not valid JSON"), std::string::npos);
  std::string deep = "{\"a\":" + std::string(40, '[') + std::string(40, ']') + "}";
  EXPECT_NE(error_of(frame_bytes(proto::MsgType::ping, deep)).find("deeper"), std::string::npos);
  EXPECT_NE(error_of(frame_bytes(proto::MsgType::ping, R"({"seq":-1})")).find("PING.seq"), std::string::npos);
  EXPECT_NE(error_of(frame_bytes(proto::MsgType::ping, R"({"seq":1e300})")).find("PING.seq"), std::string::npos);
  auto f = frame_bytes(proto::MsgType::ping, R"({"seq":1})");
  f.pop_back();
  EXPECT_NE(error_of(f).find("does not match"), std::string::npos);
}
