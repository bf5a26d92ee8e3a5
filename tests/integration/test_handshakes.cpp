// The TCP engine's server side handshakes data connections concurrently: a burst of clients all
// gets in, and a client that connects and never sends its hello delays nobody else. In-process
// engines on 127.0.0.1 (the server half and client halves of a test, as agents run them).
#include "engine/tcp_engine.hpp"

#include <fabperf/core/clock.hpp>
#include <fabperf/engine/data_hello.hpp>
#include <fabperf/proto/proto.hpp>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

using namespace fabperf;

namespace {

TestSpec spec_with(std::uint32_t parallel) {
  SpecParams p;
  p.mode = Mode::stream;
  p.parallel = parallel;
  return TestSpec::make(p);
}

// A client's half: every connection to the server (parallel + 1 probe), or the error.
struct ClientRun {
  std::unique_ptr<RunContext> ctx;
  TcpEngine engine;
  std::string error;
  double seconds{0};
};

void run_client(ClientRun& c, const TestSpec& spec, std::uint32_t node, const proto::Token& test_token,
                std::uint16_t port, const std::string& host = "127.0.0.1") {
  c.ctx = std::make_unique<RunContext>(spec, node, "client");
  ClientPlan plan;
  plan.token = derive_client_token(test_token, node);
  plan.targets.push_back({0, host, port, {}});
  const std::int64_t t0 = mono_now_ns();
  try {
    c.engine.prepare_client(*c.ctx, plan);
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  c.seconds = static_cast<double>(mono_now_ns() - t0) / 1e9;
}

int connect_silent(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

}  // namespace

TEST(DataHandshakes, ManyClientsAtOnceAllGetIn) {
  constexpr std::uint32_t kClients = 64, kParallel = 8;
  const TestSpec spec = spec_with(kParallel);
  const proto::Token token = proto::random_token();
  RunContext server_ctx(spec, 0, "server");
  TcpEngine server;
  const std::uint32_t expect = kClients * (kParallel + 1);  // + one delay probe per pair
  const std::uint16_t port = server.prepare_server(server_ctx, {"127.0.0.1", token, expect});
  std::vector<std::unique_ptr<ClientRun>> clients;
  for (std::uint32_t i = 0; i < kClients; ++i) clients.push_back(std::make_unique<ClientRun>());
  {
    std::vector<std::thread> threads;
    for (std::uint32_t i = 0; i < kClients; ++i) {
      threads.emplace_back([&, i] { run_client(*clients[i], spec, i + 1, token, port); });
    }
    for (auto& t : threads) t.join();
  }
  double slowest = 0;
  for (const auto& c : clients) {
    EXPECT_EQ(c->error, "");
    EXPECT_EQ(c->ctx->flow_count(), kParallel + 1);
    slowest = std::max(slowest, c->seconds);
  }
  server.seal(server_ctx);
  EXPECT_EQ(server_ctx.flow_count(), expect);
  std::printf("%u connections from %u clients at once: slowest client set up in %.3f s\n", expect, kClients, slowest);
  server_ctx.abort("test over");
  for (auto& c : clients) c->ctx->abort("test over");
}

TEST(DataHandshakes, ASilentConnectionDelaysNobody) {
  const TestSpec spec = spec_with(4);
  const proto::Token token = proto::random_token();
  RunContext server_ctx(spec, 0, "server");
  TcpEngine server;
  const std::uint16_t port = server.prepare_server(server_ctx, {"127.0.0.1", token, 2 * 5});
  // Connected first and never says anything: one at a time, every handshake behind it waited for
  // its 5 s deadline, and the clients' own 5 s deadlines ran out meanwhile.
  const int silent = connect_silent(port);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server has taken it in
  ClientRun a, b;
  std::thread ta([&] { run_client(a, spec, 1, token, port); });
  std::thread tb([&] { run_client(b, spec, 2, token, port); });
  ta.join();
  tb.join();
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(b.error, "");
  EXPECT_LT(std::max(a.seconds, b.seconds), 2.0) << "handshakes waited behind the silent connection";
  EXPECT_EQ(a.ctx->flow_count(), 5u);
  EXPECT_EQ(b.ctx->flow_count(), 5u);
  server.seal(server_ctx);
  EXPECT_EQ(server_ctx.flow_count(), 10u);
  // The silent one is not a flow; the server closed it when the test was sealed.
  char byte = 0;
  EXPECT_EQ(::recv(silent, &byte, 1, 0), 0);
  ::close(silent);
  server_ctx.abort("test over");
  a.ctx->abort("test over");
  b.ctx->abort("test over");
}

// A flood from one address while a server waits for its clients (issue 28): 100 silent
// connections from one address hold at most 16 handshake slots (its oldest give way), their log
// lines keep to the rate limit, and the test's own client still gets in. Loopback is exempt from
// the per-address limit, so this needs two addresses of a namespace of its own:
// tests/netns/test_data_port_flood.sh runs it with FABPERF_FLOOD_ADDRS="SERVER STRANGER".
TEST(DataHandshakes, AFloodFromOneAddressHoldsAtMostItsShare) {
  const char* env = std::getenv("FABPERF_FLOOD_ADDRS");
  if (env == nullptr) GTEST_SKIP() << "run by tests/netns/test_data_port_flood.sh inside a namespace";
  std::istringstream in(env);
  std::string server_addr, stranger;
  in >> server_addr >> stranger;
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("flood", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  const TestSpec spec = spec_with(1);
  const proto::Token token = proto::random_token();
  RunContext ctx(spec, 0, "server");
  TcpEngine server;
  const std::uint16_t port = server.prepare_server(ctx, {server_addr, token, 2});
  std::vector<int> silent;
  for (int i = 0; i < 100; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ASSERT_EQ(::inet_pton(AF_INET, stranger.c_str(), &a.sin_addr), 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    a.sin_port = htons(port);
    ASSERT_EQ(::inet_pton(AF_INET, server_addr.c_str(), &a.sin_addr), 1);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    silent.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the server has taken them in
  int held = 0;
  for (const int fd : silent) {
    char byte = 0;
    if (::recv(fd, &byte, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN) ++held;  // neither closed nor reset
  }
  std::printf("100 silent connections from %s: %d still held after 0.5 s\n", stranger.c_str(), held);
  EXPECT_LE(held, 16);
  EXPECT_GE(held, 1);
  ClientRun client;
  run_client(client, spec, 1, token, port, server_addr);
  EXPECT_EQ(client.error, "");
  server.seal(ctx);
  EXPECT_EQ(ctx.flow_count(), 2u);
  spdlog::set_default_logger(previous);
  std::istringstream lines(log.str());
  int about_data = 0;
  for (std::string line; std::getline(lines, line);) about_data += line.find("data connection") != std::string::npos;
  std::printf("%d log lines about them\n", about_data);
  EXPECT_GE(about_data, 1);
  EXPECT_LE(about_data, 10);
  for (const int fd : silent) ::close(fd);
  ctx.abort("test over");
  client.ctx->abort("test over");
}

// A hello recorded on its way to one server of a test, replayed to another server of the same
// test (same test token): refused, because the hello names the server it is for, and the proofs
// bind it (audit finding 9). The recording server itself accepted it.
TEST(DataHandshakes, AHelloSeenOnItsWayToOneServerIsRefusedByAnother) {
  const TestSpec spec = spec_with(1);
  const proto::Token token = proto::random_token();
  RunContext ctx1(spec, 0, "server-1"), ctx2(spec, 1, "server-2");
  TcpEngine s1, s2;
  const std::uint16_t port1 = s1.prepare_server(ctx1, {"127.0.0.1", token, 2});
  const std::uint16_t port2 = s2.prepare_server(ctx2, {"127.0.0.1", token, 2});
  // A recording relay in front of server 1: it keeps what the client sends on its first
  // connection: the HELLO (52 bytes) and the PROOF (36).
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::listen(lfd, 4);
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::mutex mu;  // the relay thread records, the test reads
  std::vector<std::uint8_t> recorded;
  std::atomic<bool> stop{false};
  std::thread relay([&] {
    // Every connection the client opens (its data connection and its delay probe) is relayed.
    std::vector<std::pair<int, int>> pairs;
    std::uint8_t buf[4096];
    while (!stop) {
      std::vector<pollfd> p{{lfd, POLLIN, 0}};
      for (const auto& [c, sv] : pairs) {
        p.push_back({c, POLLIN, 0});
        p.push_back({sv, POLLIN, 0});
      }
      if (::poll(p.data(), p.size(), 20) <= 0) continue;
      if (p[0].revents) pairs.emplace_back(::accept(lfd, nullptr, nullptr), connect_silent(port1));
      for (std::size_t i = 1; i < p.size(); ++i) {
        if (!p[i].revents) continue;
        const auto& pr = pairs[(i - 1) / 2];
        const bool from_client = (i - 1) % 2 == 0;
        const ssize_t k = ::recv(p[i].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (k <= 0) continue;
        if (from_client && (i - 1) / 2 == 0) {
          std::lock_guard lk(mu);
          if (recorded.size() < 88) {
            recorded.insert(recorded.end(), buf,
                            buf + std::min<ssize_t>(k, 88 - static_cast<ssize_t>(recorded.size())));
          }
        }
        (void)!::send(from_client ? pr.second : pr.first, buf, static_cast<std::size_t>(k), MSG_NOSIGNAL);
      }
    }
    for (const auto& [c, sv] : pairs) {
      ::close(c);
      ::close(sv);
    }
  });
  ClientRun client;
  client.ctx = std::make_unique<RunContext>(spec, 2, "client");
  ClientPlan plan;
  plan.token = derive_client_token(token, 2);
  plan.targets.push_back({0, "127.0.0.1", ntohs(a.sin_port), {}});  // server 1 (node 0), through the relay
  EXPECT_NO_THROW(client.engine.prepare_client(*client.ctx, plan));
  std::vector<std::uint8_t> hello;
  {
    std::lock_guard lk(mu);
    hello = recorded;
  }
  ASSERT_EQ(hello.size(), 88u);
  // Reads n bytes of the server's answer on fd (bounded).
  auto answer = [](int fd, std::size_t n) {
    std::vector<std::uint8_t> got(n);
    std::size_t have = 0;
    for (int i = 0; i < 100 && have < n; ++i) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t k = ::recv(fd, got.data() + have, n - have, 0);
      if (k <= 0) break;
      have += static_cast<std::size_t>(k);
    }
    got.resize(have);
    return got;
  };
  // The same HELLO to server 2 (node 1): it names server 1, and is refused at once.
  const int fd = connect_silent(port2);
  ASSERT_EQ(::send(fd, hello.data(), 52, MSG_NOSIGNAL), 52);
  const auto refusal = answer(fd, data_hello::kChallengeSize);
  ASSERT_EQ(refusal.size(), data_hello::kChallengeSize);
  EXPECT_EQ(data_hello::decode_challenge(refusal).status, data_hello::Status::wrong_server);
  ::close(fd);
  // Rewritten to name server 2, it gets a challenge, and the recorded PROOF (made for server 1's
  // nonce and node) is refused.
  auto forged = hello;
  forged[15] = 1;  // server node 1
  const int fd2 = connect_silent(port2);
  ASSERT_EQ(::send(fd2, forged.data(), 52, MSG_NOSIGNAL), 52);
  const auto challenge = answer(fd2, data_hello::kChallengeSize);
  ASSERT_EQ(challenge.size(), data_hello::kChallengeSize);
  EXPECT_EQ(data_hello::decode_challenge(challenge).status, data_hello::Status::ok);
  ASSERT_EQ(::send(fd2, forged.data() + 52, 36, MSG_NOSIGNAL), 36);
  const auto verdict = answer(fd2, data_hello::kVerdictSize);
  ASSERT_EQ(verdict.size(), data_hello::kVerdictSize);
  EXPECT_EQ(data_hello::decode_verdict(verdict), data_hello::Status::bad_proof);
  ::close(fd2);
  stop = true;
  relay.join();
  ::close(lfd);
  s1.seal(ctx1);
  s2.seal(ctx2);
  EXPECT_EQ(ctx2.flow_count(), 0u);
  ctx1.abort("test over");
  ctx2.abort("test over");
  client.ctx->abort("test over");
}

// --congestion reaches a connection before its first segment, on both ends: a client socket gets
// it before connect(), accepted sockets from the listener. Set later (the data threads did, at
// start), the host's default had the connection first, and bbr's switches on TCP's own pacing,
// which a later cubic leaves on: every flow of `--congestion cubic` on a bbr host stayed paced.
TEST(DataHandshakes, CongestionControlIsSetBeforeTheFirstSegment) {
  std::ifstream def("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string host_default;
  def >> host_default;
  const std::string want = host_default == "reno" ? "cubic" : "reno";  // reno is always built in
  SpecParams p;
  p.mode = Mode::stream;
  p.parallel = 2;
  p.congestion = want;
  const TestSpec spec = TestSpec::make(p);
  const proto::Token token = proto::random_token();
  RunContext server_ctx(spec, 0, "server");
  TcpEngine server;
  const std::uint16_t port = server.prepare_server(server_ctx, {"127.0.0.1", token, 3});
  ClientRun c;
  run_client(c, spec, 1, token, port);
  ASSERT_EQ(c.error, "");
  server.seal(server_ctx);
  const auto congestion = [](const Flow* f) {
    char name[16] = {};
    socklen_t len = sizeof name;
    EXPECT_EQ(getsockopt(dynamic_cast<const TcpFlow*>(f)->fd(), IPPROTO_TCP, TCP_CONGESTION, name, &len), 0);
    return std::string(name, strnlen(name, sizeof name));
  };
  // No data thread has started (start() was never called): what the sockets say, they had from
  // the beginning.
  for (const RunContext* ctx : {c.ctx.get(), &server_ctx}) {
    ASSERT_EQ(ctx->flow_count(), 3u);
    for (const Flow* f : ctx->flows()) EXPECT_EQ(congestion(f), want) << "default " << host_default;
  }
  server_ctx.abort("test over");
  c.ctx->abort("test over");
}
