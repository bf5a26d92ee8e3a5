// Fault tests with real processes: authentication, hostile bytes, data-plane membership, and
// liveness when an agent or the coordinator dies or stops mid-test. After each attack the agent
// must still serve a normal test.
#include "integration/harness.hpp"

#include <fabperf/auth.hpp>
#include <fabperf/error.hpp>
#include <fabperf/proto.hpp>
#include <fabperf/spec.hpp>

#include <arpa/inet.h>
#include <atomic>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <poll.h>
#include <set>
#include <sstream>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace fabperf;
using namespace fabperf::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

const std::string& key_file(int which = 1) {
  static std::string paths[3];
  std::string& p = paths[which];
  if (p.empty()) {
    p = temp_path("key" + std::to_string(which));
    const auto r = run_fabperf({"keygen", p});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  return p;
}

std::vector<std::string> with_key(int which = 1) { return {"--key-file", key_file(which)}; }

// A normal 1 s test between two agents, with the given key.
void expect_normal_test(const AgentProcess& s, const AgentProcess& c, int key = 1) {
  // Often called right after a session that left the agent releasing its test (asynchronously):
  // the coordinator itself waits for an agent that answers "cleaning", so one run must do.
  const CommandResult r = run_fabperf({"run", "--servers", s.address(), "--clients", c.address(), "--time", "1", "--buffsize",
                                       "1M", "-q", "--key-file", key_file(key)});
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.out.rfind("1-1 write ", 0), 0u) << r.out;
}

int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void send_bytes(int fd, const void* p, std::size_t n) {
  ASSERT_EQ(::send(fd, p, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
}
void send_bytes(int fd, const std::vector<std::uint8_t>& v) { send_bytes(fd, v.data(), v.size()); }

// Reads exactly n bytes within timeout_ms; false on EOF, error or timeout.
bool recv_exact(int fd, std::uint8_t* p, std::size_t n, int timeout_ms) {
  const double deadline = now_s() + timeout_ms / 1000.0;
  std::size_t got = 0;
  while (got < n) {
    const int left = static_cast<int>((deadline - now_s()) * 1000);
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, left) <= 0) continue;
    const ssize_t k = ::recv(fd, p + got, n - got, 0);
    if (k <= 0) return false;
    got += static_cast<std::size_t>(k);
  }
  return true;
}

struct RawFrame {
  proto::MsgType type;
  json body;
};

std::optional<RawFrame> read_frame(int fd, int timeout_ms = 3000) {
  std::array<std::uint8_t, proto::kHeaderSize> h{};
  if (!recv_exact(fd, h.data(), h.size(), timeout_ms)) return std::nullopt;
  const auto hdr = proto::decode_header(h);
  std::vector<std::uint8_t> body(hdr.length);
  if (!recv_exact(fd, body.data(), body.size(), timeout_ms)) return std::nullopt;
  return RawFrame{hdr.type, proto::parse_body(hdr.type, body)};
}

// Seconds until the peer closes the connection (reading and discarding), or -1 after limit_s.
double seconds_until_closed(int fd, double limit_s) {
  const double t0 = now_s();
  std::uint8_t buf[4096];
  while (now_s() - t0 < limit_s) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 50) <= 0) continue;
    const ssize_t k = ::recv(fd, buf, sizeof buf, 0);
    if (k <= 0) return now_s() - t0;
  }
  return -1;
}

// Reads frames until an ERROR arrives; returns its message ("" if none before close/timeout).
std::string read_error(int fd) {
  for (int i = 0; i < 8; ++i) {
    auto f = read_frame(fd);
    if (!f) return "";
    if (f->type == proto::MsgType::error) return f->body.value("message", "");
  }
  return "";
}

// A hand-driven coordinator: authenticates with a key, then sends whatever the test wants.
class RawCoordinator {
 public:
  RawCoordinator(const AgentProcess& agent, const std::string& key_path) : key_(auth::load_key_file(key_path)) {
    fd_ = connect_to(agent.endpoint().port);
    EXPECT_GE(fd_, 0);
    const auto nc = auth::make_nonce();
    send(proto::MsgType::hello, proto::to_json(proto::Hello{proto::kVersion, proto::kVersion, "raw", proto::local_capabilities(), nc}));
    auto f = read_frame(fd_);
    if (!f || f->type != proto::MsgType::auth) {
      ADD_FAILURE() << "no AUTH from the agent";
      return;
    }
    const auto a = proto::parse_auth(f->body);
    EXPECT_TRUE(auth::proofs_equal(auth::agent_proof(key_, nc, a.nonce), a.proof));
    send(proto::MsgType::auth_ok, proto::to_json(proto::AuthOk{auth::coordinator_proof(key_, a.nonce, nc)}));
    f = read_frame(fd_);
    ok_ = f && f->type == proto::MsgType::hello_ok;
    EXPECT_TRUE(ok_);
  }
  ~RawCoordinator() {
    if (fd_ >= 0) ::close(fd_);
  }
  void send(proto::MsgType t, const json& body) { send_bytes(fd_, proto::encode_frame(t, body)); }
  // Next frame that is not a heartbeat.
  std::optional<RawFrame> next(int timeout_ms = 5000) {
    for (;;) {
      auto f = read_frame(fd_, timeout_ms);
      if (!f || f->type != proto::MsgType::heartbeat) return f;
    }
  }
  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  auth::Key key_;
  int fd_{-1};
  bool ok_{false};
};

TestSpec small_spec(Mode mode = Mode::stream) {
  SpecParams p;
  p.mode = mode;
  p.time = std::chrono::seconds(1);
  p.buffsize = 64 * 1024;
  return TestSpec::make(p);
}

// A plain TCP listener that records what it receives; optionally answers the data hello with a
// forged ack (right magic and status, no valid proof): a fake agent without the test token.
class Listener {
 public:
  explicit Listener(bool forge_ack) : forge_(forge_ack) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~Listener() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::uint64_t max_bytes_per_connection() const { return max_bytes_; }
  [[nodiscard]] int connections() const { return conns_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      ++conns_;
      std::uint64_t got = 0;
      bool answered = false;
      const double t0 = now_s();
      std::uint8_t buf[65536];
      while (!stop_ && now_s() - t0 < 3) {
        pollfd p{c, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        const ssize_t k = ::recv(c, buf, sizeof buf, 0);
        if (k <= 0) break;
        got += static_cast<std::uint64_t>(k);
        if (forge_ && !answered && got >= 4) {
          std::uint8_t ack[40] = {};
          std::memcpy(ack, buf, 4);  // the data magic, echoed; status 0 = ok; proof all zero
          (void)!::send(c, ack, sizeof ack, MSG_NOSIGNAL);
          answered = true;
        }
      }
      ::close(c);
      if (got > max_bytes_) max_bytes_ = got;
    }
  }
  bool forge_;
  int fd_{-1};
  std::uint16_t port_{0};
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> max_bytes_{0};
  std::atomic<int> conns_{0};
};

// ESTABLISHED TCP sockets held by a process (its fds matched against /proc/net/tcp{,6}).
int established_sockets(int pid) {
  std::set<std::string> inodes;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      char target[256];
      const ssize_t n = ::readlink((dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      const std::string t(target, static_cast<std::size_t>(n));
      if (t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
    }
    ::closedir(d);
  }
  int count = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::string f[10];
      for (auto& x : f) ss >> x;
      if (f[3] == "01" && inodes.count(f[9])) ++count;
    }
  }
  return count;
}

}  // namespace

// ---- authentication ---------------------------------------------------------------------

TEST(Security, WrongKeyIsRejectedWithAClearErrorOnBothSides) {
  const std::string log = temp_path("wrongkey.log");
  AgentProcess s(with_key(1), log), c(with_key(1));
  const auto r = run_fabperf({"run", "--servers", s.address(), "--clients", c.address(), "--time", "1", "--key-file", key_file(2)});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("authentication failed for " + s.address() + ": key mismatch"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  std::this_thread::sleep_for(200ms);
  const auto agent_log = read_file(log);
  EXPECT_NE(agent_log.find("authentication failed for 127.0.0.1:"), std::string::npos) << agent_log;
  EXPECT_NE(agent_log.find("key mismatch"), std::string::npos) << agent_log;
  expect_normal_test(s, c);
}

TEST(Security, CoordinatorWithoutKeyIsRefusedByProtectedAgent) {
  const std::string log = temp_path("nokey.log");
  AgentProcess s(with_key(), log), c(with_key());
  const auto r = run_fabperf({"run", "--servers", s.address(), "--clients", c.address(), "--time", "1"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("authentication failed for " + s.address() + ": the agent requires a key"), std::string::npos) << r.err;
  std::this_thread::sleep_for(200ms);
  EXPECT_NE(read_file(log).find("the coordinator has no key"), std::string::npos) << read_file(log);
  expect_normal_test(s, c);
}

TEST(Security, KeylessAgentIsRefusedByCoordinatorWithKey) {
  AgentProcess s, c(with_key());
  const auto r = run_fabperf({"run", "--servers", s.address(), "--clients", c.address(), "--time", "1", "--key-file", key_file()});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("authentication failed for " + s.address() + ": the agent has no key"), std::string::npos) << r.err;
}

TEST(Security, PeerThatNeverProvesTheKeyGetsNothingAndIsDropped) {
  AgentProcess s(with_key()), c(with_key());
  const int fd = connect_to(s.endpoint().port);
  ASSERT_GE(fd, 0);
  send_bytes(fd, proto::encode_frame(proto::MsgType::hello,
                                     proto::to_json(proto::Hello{proto::kVersion, proto::kVersion, "mallory",
                                                                 proto::local_capabilities(), auth::make_nonce()})));
  const auto f = read_frame(fd);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->type, proto::MsgType::auth);  // a challenge, not HELLO_OK: nothing about the host
  // A SETUP instead of the proof is not parsed: the agent closes.
  send_bytes(fd, proto::encode_frame(proto::MsgType::ping, json{{"seq", 1}}));
  EXPECT_NE(read_error(fd).find("expected AUTH_OK, got PING"), std::string::npos);
  EXPECT_GE(seconds_until_closed(fd, 3), 0);
  ::close(fd);
  // Silence after HELLO: dropped after the 5 s deadline.
  const int fd2 = connect_to(s.endpoint().port);
  send_bytes(fd2, proto::encode_frame(proto::MsgType::hello,
                                      proto::to_json(proto::Hello{proto::kVersion, proto::kVersion, "mallory",
                                                                  proto::local_capabilities(), auth::make_nonce()})));
  const double t = seconds_until_closed(fd2, 10);
  EXPECT_GT(t, 3.0);
  EXPECT_LT(t, 8.0);
  ::close(fd2);
  // A forged proof: key mismatch, then closed.
  const int fd3 = connect_to(s.endpoint().port);
  send_bytes(fd3, proto::encode_frame(proto::MsgType::hello,
                                      proto::to_json(proto::Hello{proto::kVersion, proto::kVersion, "mallory",
                                                                  proto::local_capabilities(), auth::make_nonce()})));
  const auto challenge = read_frame(fd3);
  ASSERT_TRUE(challenge && challenge->type == proto::MsgType::auth);
  send_bytes(fd3, proto::encode_frame(proto::MsgType::auth_ok, proto::to_json(proto::AuthOk{auth::Proof{}})));
  EXPECT_NE(read_error(fd3).find("key mismatch"), std::string::npos);
  EXPECT_GE(seconds_until_closed(fd3, 3), 0);
  ::close(fd3);
  RawCoordinator ok(s, key_file());  // a real one still gets in
  EXPECT_TRUE(ok.ok());
  expect_normal_test(s, c);
}

TEST(Security, AgentWithoutKeyServesLoopbackOnlyUnlessInsecure) {
  const auto r = run_fabperf({"agent", "--listen", "0.0.0.0:0"}, 10s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("without a key"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const auto both = run_fabperf({"agent", "--listen", "127.0.0.1:0", "--insecure", "--key-file", key_file()}, 10s);
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_NE(both.err.find("--insecure"), std::string::npos);
  // With --insecure it does listen on all addresses (and says it is insecure).
  const std::string log = temp_path("insecure.log");
  const int pid = spawn_fabperf({"agent", "--listen", "0.0.0.0:0", "--insecure"}, temp_path("insecure.out"), log);
  std::string text;
  for (int i = 0; i < 50 && text.find("INSECURE") == std::string::npos; ++i) {
    std::this_thread::sleep_for(100ms);
    text = read_file(log);
  }
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  EXPECT_NE(text.find("INSECURE"), std::string::npos) << text;
  EXPECT_NE(text.find("listening on 0.0.0.0:"), std::string::npos) << text;
}

TEST(Security, KeyFilesMustBePrivateAndKeygenRefusesToOverwrite) {
  const std::string k = temp_path("cli.key");
  auto r = run_fabperf({"keygen", k});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_fabperf({"keygen", k});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("file exists (use --force"), std::string::npos) << r.err;
  EXPECT_EQ(run_fabperf({"keygen", k, "--force"}).exit_code, 0);
  ASSERT_EQ(::chmod(k.c_str(), 0644), 0);
  r = run_fabperf({"agent", "--listen", "127.0.0.1:0", "--key-file", k}, 10s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("refusing to use it: group or others can access it (mode 0644)"), std::string::npos) << r.err;
  r = run_fabperf({"run", "--local", "2", "--key-file", k}, 10s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = run_fabperf({"run", "--local", "2", "--key-file", temp_path("no-such.key")}, 10s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no-such.key"), std::string::npos) << r.err;
  // --local with a key: the local agents get it too.
  r = run_fabperf({"run", "--local", "2", "--time", "1", "-q", "--key-file", key_file()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// ---- hostile bytes ----------------------------------------------------------------------

TEST(Security, RandomBytesAndHostileLengthsAreDroppedPromptly) {
  AgentProcess s(with_key()), c(with_key());
  {
    const int fd = connect_to(s.endpoint().port);
    std::vector<std::uint8_t> junk(4096);
    for (std::size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<std::uint8_t>((i * 7919) ^ (i >> 3));
    send_bytes(fd, junk);
    const double t = seconds_until_closed(fd, 5);
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 2.0);
    ::close(fd);
  }
  {
    auto h = proto::encode_header(proto::MsgType::hello, 0);
    h[8] = h[9] = h[10] = h[11] = 0xff;
    const int fd = connect_to(s.endpoint().port);
    send_bytes(fd, h.data(), h.size());
    // Dropped at once, before any allocation; a stranger is not told more.
    const double t = seconds_until_closed(fd, 5);
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 2.0);
    ::close(fd);
  }
  {
    // Before authentication even a plausible large frame is refused.
    const int fd = connect_to(s.endpoint().port);
    json big = proto::to_json(proto::Hello{proto::kVersion, proto::kVersion, "x", {}, auth::make_nonce()});
    big["padding"] = std::string(8000, 'x');
    send_bytes(fd, proto::encode_frame(proto::MsgType::hello, big));
    EXPECT_FALSE(read_frame(fd).has_value());  // no AUTH challenge: dropped
    const double t = seconds_until_closed(fd, 5);
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 2.0);
    ::close(fd);
  }
  expect_normal_test(s, c);
}

TEST(Security, TruncatedFrameThenSilenceIsDroppedWithoutDisturbingOthers) {
  AgentProcess s(with_key()), c(with_key());
  const int fd = connect_to(s.endpoint().port);
  const auto h = proto::encode_header(proto::MsgType::hello, 200);
  send_bytes(fd, h.data(), h.size());
  send_bytes(fd, "{\"proto_min\":", 13);
  const double t0 = now_s();
  // Meanwhile a real coordinator runs a normal test.
  expect_normal_test(s, c);
  const double t = seconds_until_closed(fd, 10);
  const double total = now_s() - t0;
  EXPECT_GE(t, 0) << "a stalled half frame was never dropped";
  EXPECT_GT(total, 4.0);
  EXPECT_LT(total, 8.0);
  ::close(fd);
}

TEST(Security, WrongTypesAndOutOfRangeValuesAreNamedAndRefused) {
  AgentProcess s(with_key()), c(with_key());
  {
    const int fd = connect_to(s.endpoint().port);
    send_bytes(fd, proto::encode_frame(proto::MsgType::hello, json{{"proto_min", "2"}, {"proto_max", 2}}));
    EXPECT_NE(read_error(fd).find("HELLO.proto_min: expected a non-negative integer, got string"), std::string::npos);
    EXPECT_GE(seconds_until_closed(fd, 3), 0);
    ::close(fd);
  }
  {
    const int fd = connect_to(s.endpoint().port);
    send_bytes(fd, proto::encode_frame(proto::MsgType::hello, json{{"proto_min", 7}, {"proto_max", 9}}));
    EXPECT_NE(read_error(fd).find("coordinator speaks 7..9, this agent speaks 2"), std::string::npos);
    ::close(fd);
  }
  {
    RawCoordinator rc(s, key_file());
    ASSERT_TRUE(rc.ok());
    proto::SetupServer m;
    m.test_id = "t1";
    m.token = proto::random_token();
    m.spec = small_spec();
    m.expect_connections = 1;
    json j = proto::to_json(m);
    j["spec"]["threads"] = 1e9;
    rc.send(proto::MsgType::setup_server, j);
    auto f = rc.next();
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->type, proto::MsgType::error);
    EXPECT_NE(f->body.value("message", "").find("threads"), std::string::npos) << f->body.dump();
  }
  {
    RawCoordinator rc(s, key_file());
    ASSERT_TRUE(rc.ok());
    proto::SetupServer m;
    m.test_id = "t2";
    m.token = proto::random_token();
    m.spec = small_spec();
    m.expect_connections = 1;
    json j = proto::to_json(m);
    j["expect_connections"] = "lots";
    rc.send(proto::MsgType::setup_server, j);
    auto f = rc.next();
    ASSERT_TRUE(f.has_value());
    EXPECT_NE(f->body.value("message", "").find("SETUP_SERVER.expect_connections: expected a non-negative integer"),
              std::string::npos)
        << f->body.dump();
  }
  {
    // Buffers over the agent's --max-buffer-memory (default 1 GiB): refused with the limit named.
    RawCoordinator rc(s, key_file());
    ASSERT_TRUE(rc.ok());
    proto::SetupServer m;
    m.test_id = "t3";
    m.token = proto::random_token();
    SpecParams p;
    p.mode = Mode::stream;
    p.buffsize = 16u << 20;
    m.spec = TestSpec::make(p);
    m.expect_connections = 8000;  // 16 MiB + 8000 x 256 KiB receive buffers > 1 GiB
    rc.send(proto::MsgType::setup_server, proto::to_json(m));
    auto f = rc.next();
    ASSERT_TRUE(f.has_value());
    EXPECT_NE(f->body.value("message", "").find("--max-buffer-memory 1024 MiB"), std::string::npos) << f->body.dump();
  }
  expect_normal_test(s, c);
}

// ---- data plane -------------------------------------------------------------------------

TEST(Security, DataConnectionWithoutValidTokenIsRefused) {
  AgentProcess s(with_key()), c(with_key());
  {
    RawCoordinator rc(s, key_file());
    ASSERT_TRUE(rc.ok());
    proto::SetupServer m;
    m.test_id = "d1";
    m.token = proto::random_token();
    m.spec = small_spec();
    m.expect_connections = 4;
    rc.send(proto::MsgType::setup_server, proto::to_json(m));
    auto f = rc.next();
    ASSERT_TRUE(f.has_value() && f->type == proto::MsgType::setup_server_ok) << (f ? f->body.dump() : "closed");
    const auto port = proto::parse_setup_server_ok(f->body).data_port;
    // A well-formed hello with a proof under the wrong token.
    std::uint8_t hello[80] = {};
    const std::uint8_t magic[4] = {0x46, 0x42, 0x50, 0x44};
    std::memcpy(hello, magic, 4);
    hello[4] = 0;
    hello[5] = 2;  // version 2
    hello[7] = 1;  // write
    const int fd = connect_to(port);
    send_bytes(fd, hello, sizeof hello);
    std::uint8_t ack[40] = {};
    ASSERT_TRUE(recv_exact(fd, ack, 8, 3000));
    EXPECT_EQ(ack[7], 2) << "expected 'token rejected'";
    EXPECT_GE(seconds_until_closed(fd, 3), 0);
    ::close(fd);
    // Random bytes on the data port.
    const int fd2 = connect_to(port);
    std::vector<std::uint8_t> junk(80, 0xab);
    send_bytes(fd2, junk);
    ASSERT_TRUE(recv_exact(fd2, ack, 8, 3000));
    EXPECT_EQ(ack[7], 1) << "expected 'hello not understood'";
    ::close(fd2);
  }  // the raw coordinator goes away: the agent releases the test
  expect_normal_test(s, c);
}

TEST(Security, AgentToldToConnectToANonAgentFailsSetUpAndSendsNoLoad) {
  AgentProcess s(with_key()), c(with_key());
  for (const bool forge : {false, true}) {
    Listener l(forge);
    {
      RawCoordinator rc(c, key_file());
      ASSERT_TRUE(rc.ok());
      proto::SetupClient m;
      m.test_id = forge ? "n2" : "n1";
      m.token = proto::random_token();
      m.spec = small_spec();
      m.node_index = 1;
      m.targets = {proto::Target{0, "127.0.0.1", l.port(), {}}};
      rc.send(proto::MsgType::setup_client, proto::to_json(m));
      auto f = rc.next(15000);
      ASSERT_TRUE(f.has_value());
      EXPECT_EQ(f->type, proto::MsgType::error);
      const std::string msg = f->body.value("message", "");
      EXPECT_NE(msg.find("client set-up failed: data handshake with 127.0.0.1:" + std::to_string(l.port())), std::string::npos) << msg;
      if (forge) EXPECT_NE(msg.find("did not prove it is an agent of this test"), std::string::npos) << msg;
      else EXPECT_NE(msg.find("not an agent of this test"), std::string::npos) << msg;
    }
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(l.connections(), 1);
    EXPECT_LE(l.max_bytes_per_connection(), 80u) << "load was sent to a non-agent";
  }
  expect_normal_test(s, c);
}

// ---- liveness -----------------------------------------------------------------------------

TEST(Security, StoppedAgentIsReportedStalledAndServesAfterContinue) {
  AgentProcess s1(with_key()), s2(with_key()), c(with_key());
  const std::string json_path = temp_path("stopped.json");
  const int coord = spawn_fabperf({"run", "--servers", s1.address() + "," + s2.address(), "--clients", c.address(), "--time", "5",
                                   "--mode", "stream", "--json", json_path, "--key-file", key_file()},
                                  temp_path("stopped.out"), temp_path("stopped.err"));
  std::this_thread::sleep_for(2s);
  s2.kill(SIGSTOP);
  int st = 0;
  bool exited = false;
  const double t0 = now_s();
  while (now_s() - t0 < 25) {
    if (::waitpid(coord, &st, WNOHANG) == coord) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  s2.kill(SIGCONT);
  if (!exited) {
    ::kill(coord, SIGKILL);
    ::waitpid(coord, &st, 0);
  }
  ASSERT_TRUE(exited) << "coordinator hung on a stopped agent";
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3) << read_file(temp_path("stopped.err"));
  const json doc = json::parse(read_file(json_path));
  for (const auto& n : doc["nodes"]) {
    EXPECT_EQ(n["status"], n["node"] == s2.address() ? "stalled" : "ok") << n.dump();
  }
  // The continued agent notices its coordinator is gone, stops, and serves the next test.
  expect_normal_test(s2, c);
  expect_normal_test(s1, c);
}

// The coordinator vanishes (SIGKILL: its connections close) or goes silent (SIGSTOP: they stay
// open, heartbeats stop). Either way both agents must drop every data connection within 5 s.
void coordinator_loss_stops_traffic(int sig) {
  AgentProcess s(with_key()), c(with_key());
  const int coord = spawn_fabperf({"run", "--servers", s.address(), "--clients", c.address(), "--time", "60", "--mode", "stream",
                                   "--parallel", "2", "--key-file", key_file()},
                                  temp_path("kc.out"), temp_path("kc.err"));
  // Wait until the data connections are up: control (1) + data (2) on each agent.
  const double t_up = now_s();
  while (now_s() - t_up < 10 && (established_sockets(s.pid()) < 3 || established_sockets(c.pid()) < 3)) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_GE(established_sockets(s.pid()), 3);
  ASSERT_GE(established_sockets(c.pid()), 3);
  std::this_thread::sleep_for(1500ms);  // traffic is flowing (start is 0.3 s after set-up)
  ASSERT_GE(established_sockets(c.pid()), 3) << "the test ended before the coordinator was lost";
  ::kill(coord, sig);
  const double t0 = now_s();
  double gone = -1;
  while (now_s() - t0 < 10) {
    if (established_sockets(s.pid()) == 0 && established_sockets(c.pid()) == 0) {
      gone = now_s() - t0;
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  ::kill(coord, SIGKILL);
  ::waitpid(coord, nullptr, 0);
  ASSERT_GE(gone, 0) << "agents still hold connections 10 s after the coordinator was lost";
  EXPECT_LT(gone, 5.0);
  ::testing::Test::RecordProperty("seconds_until_traffic_stopped", std::to_string(gone));
  std::cout << "traffic stopped " << gone << " s after the coordinator got signal " << sig << "\n";
  expect_normal_test(s, c);
}

TEST(Security, KilledCoordinatorStopsAllTrafficWithinFiveSeconds) { coordinator_loss_stops_traffic(SIGKILL); }

TEST(Security, StoppedCoordinatorStopsAllTrafficWithinFiveSeconds) { coordinator_loss_stops_traffic(SIGSTOP); }
