#include <fabperf/clock.hpp>
#include <fabperf/coordinator.hpp>
#include <fabperf/error.hpp>
#include <fabperf/sysstat.hpp>
#include <fabperf/units.hpp>

#include "proto/conn.hpp"

#include <algorithm>
#include <csignal>
#include <ctime>
#include <fmt/format.h>
#include <functional>
#include <spdlog/spdlog.h>

namespace fabperf {
namespace {

using namespace std::chrono_literals;
using proto::FramedConn;
using proto::MsgType;
using nlohmann::json;

constexpr auto kFrameDeadline = 5s;
// Agents send a heartbeat every second: this much silence means the agent is gone or stopped.
constexpr auto kIdleDeadline = 5s;
constexpr int kClockPings = 8;

std::string iso_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Completes when count_down() was called n times.
class Latch {
 public:
  Latch(asio::any_io_executor ex, std::size_t n) : timer_(ex, asio::steady_timer::time_point::max()), n_(n) {}
  void count_down() {
    if (n_ > 0 && --n_ == 0) timer_.cancel();
  }
  asio::awaitable<void> wait() {
    while (n_ > 0) {
      error_code ec;
      co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

 private:
  asio::steady_timer timer_;
  std::size_t n_;
};

struct Node {
  NodeRecord rec;
  HostPort hp;
  std::shared_ptr<FramedConn> conn;
  std::uint16_t data_port{0};
  std::string failure;  // set-up phase failure, if any
};

class Coordinator {
 public:
  explicit Coordinator(const RunRequest& req) : req_(req), signals_(io_, SIGINT, SIGTERM) {
    std::uint32_t i = 0;
    for (const auto& s : req.servers) add_node(i++, s, true);
    for (const auto& c : req.clients) add_node(i++, c, false);
  }

  RunRecord run() {
    RunRecord record;
    std::exception_ptr failure;
    signals_.async_wait([this](error_code ec, int) {
      if (ec) return;
      on_interrupt();
    });
    asio::co_spawn(io_, [&]() -> asio::awaitable<void> {
      try {
        record = co_await flow();
      } catch (...) {
        failure = std::current_exception();
      }
      for (auto& n : nodes_) {
        if (n.conn) n.conn->close();
      }
      finished_ = true;
      for (auto& t : heartbeat_timers_) t->cancel();
      signals_.cancel();
    }, asio::detached);
    io_.run();
    if (failure) std::rethrow_exception(failure);
    return record;
  }

 private:
  void add_node(std::uint32_t index, const HostPort& hp, bool server) {
    Node n;
    n.hp = hp;
    n.rec.links = hp.links;
    n.rec.index = index;
    n.rec.name = hp.str();
    n.rec.is_server = server;
    n.rec.is_client = !server;
    nodes_.push_back(std::move(n));
  }

  void on_interrupt() {
    if (!running_) {
      // Nothing measured yet: release everybody and stop.
      interrupted_ = true;
      for (auto& n : nodes_) {
        if (n.conn) n.conn->close();
      }
      return;
    }
    if (interrupted_) return;
    interrupted_ = true;
    spdlog::warn("interrupted: stopping the test and collecting what was measured");
    for (auto& n : nodes_) {
      if (n.conn && n.conn->is_open()) n.conn->send(MsgType::abort, proto::to_json(proto::Abort{"interrupted by the user"}));
    }
    signals_.async_wait([this](error_code ec, int) {
      if (!ec) {
        spdlog::warn("second interrupt: abandoning result collection");
        for (auto& n : nodes_) {
          if (n.conn) n.conn->close();
        }
      }
    });
  }

  // Runs fn on every node concurrently; an exception marks that node's failure.
  asio::awaitable<void> each(const std::function<asio::awaitable<void>(Node&)>& fn, std::function<bool(const Node&)> which = {}) {
    std::vector<Node*> sel;
    for (auto& n : nodes_) {
      if (!which || which(n)) sel.push_back(&n);
    }
    Latch latch(co_await asio::this_coro::executor, sel.size());
    for (Node* n : sel) {
      asio::co_spawn(io_, [&fn, &latch, n]() -> asio::awaitable<void> {
        try {
          co_await fn(*n);
        } catch (const std::exception& e) {
          n->failure = e.what();
        }
        latch.count_down();
      }, asio::detached);
    }
    co_await latch.wait();
  }

  void throw_if_failed(const std::string& phase) {
    std::vector<std::string> errs;
    for (const auto& n : nodes_) {
      if (!n.failure.empty()) errs.push_back(n.failure);
    }
    if (errs.empty()) return;
    for (auto& n : nodes_) {
      if (n.conn && n.conn->is_open()) n.conn->send(MsgType::abort, proto::to_json(proto::Abort{phase + " failed on another agent"}));
    }
    std::string msg = errs.front();
    for (std::size_t i = 1; i < errs.size(); ++i) msg += "\n" + errs[i];
    throw Error(ExitCode::infrastructure, msg);
  }

  // Reads frames until `want`, skipping heartbeats; an ERROR from the agent becomes an Error.
  asio::awaitable<json> expect(Node& n, MsgType want, std::chrono::milliseconds idle = kIdleDeadline) {
    for (;;) {
      auto f = co_await n.conn->read(idle, kFrameDeadline);
      if (f.type == MsgType::heartbeat) continue;
      if (f.type == want) co_return std::move(f.body);
      if (f.type == MsgType::error) {
        const auto e = proto::parse_error(f.body);
        throw Error(ExitCode::infrastructure, fmt::format("agent {}: {}", n.rec.name, e.message));
      }
      throw ProtocolError(fmt::format("agent {}: expected {}, got {}", n.rec.name, proto::to_string(want), proto::to_string(f.type)));
    }
  }

  asio::awaitable<void> connect(Node& n) {
    auto ex = co_await asio::this_coro::executor;
    Tcp::resolver resolver(ex);
    error_code ec;
    auto results = co_await resolver.async_resolve(n.hp.host, std::to_string(n.hp.port), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) throw SystemError("cannot reach agent", n.rec.name, fmt::format("name does not resolve ({})", ec.message()));
    Tcp::socket sock(ex);
    asio::steady_timer timer(ex);
    bool timed_out = false;
    timer.expires_after(req_.connect_timeout);
    timer.async_wait([&](error_code e) {
      if (!e) {
        timed_out = true;
        error_code ignored;
        sock.close(ignored);
      }
    });
    co_await asio::async_connect(sock, results, asio::redirect_error(asio::use_awaitable, ec));
    timer.cancel();
    if (timed_out) {
      throw SystemError("cannot reach agent", n.rec.name,
                        fmt::format("connection timed out after {:.1f} s", static_cast<double>(req_.connect_timeout.count()) / 1e3));
    }
    if (ec) throw SystemError("cannot reach agent", n.rec.name, ec.message());
    n.rec.address = numeric_address(sock.remote_endpoint().address());
    n.conn = std::make_shared<FramedConn>(std::move(sock), n.rec.name);
    const json body = co_await handshake(n);
    proto::HelloOk ok;
    try {
      ok = proto::parse_hello_ok(body);
    } catch (const ProtocolError& e) {
      throw ProtocolError(fmt::format("agent {}: not a fabperf agent or wrong protocol ({})", n.rec.name, e.what()));
    }
    n.rec.hostname = ok.hostname;
    asio::co_spawn(io_, heartbeats(n.conn), asio::detached);
  }

  // Gives up on an agent during the handshake: tells it why (so its log says so), then closes.
  asio::awaitable<void> tell_auth_failure(Node& n, std::string tell_agent) {
    n.conn->send(MsgType::error, proto::to_json(proto::ErrorMsg{"auth", std::move(tell_agent)}));
    co_await n.conn->flush();
    n.conn->close();
  }
  Error auth_error(const Node& n, const std::string& why) {
    return Error(ExitCode::infrastructure, fmt::format("authentication failed for {}: {}", n.rec.name, why));
  }

  // HELLO and, when the agent challenges, the mutual HMAC proof; returns HELLO_OK's body.
  asio::awaitable<json> handshake(Node& n) {
    proto::Hello hello{proto::kVersion, proto::kVersion, req_.coordinator_name, proto::local_capabilities(),
                       auth::make_nonce()};
    n.conn->send(MsgType::hello, proto::to_json(hello));
    proto::Frame f;
    try {
      f = co_await n.conn->read(kIdleDeadline, kFrameDeadline, proto::kMaxPreAuthBody);
    } catch (const ProtocolError& e) {
      throw ProtocolError(fmt::format("agent {}: not a fabperf agent or wrong protocol ({})", n.rec.name, e.what()));
    }
    if (f.type == MsgType::error) {
      const auto e = proto::parse_error(f.body);
      throw Error(ExitCode::infrastructure, fmt::format("agent {}: {}", n.rec.name, e.message));
    }
    if (f.type == MsgType::hello_ok) {
      if (!req_.key.empty()) {
        co_await tell_auth_failure(
            n, "this coordinator has a key and refuses an agent without one (start the agent with --key-file)");
        throw auth_error(n, "the agent has no key (it accepts unauthenticated coordinators); refusing to use it with a key");
      }
      co_return std::move(f.body);
    }
    if (f.type != MsgType::auth) {
      throw ProtocolError(fmt::format("agent {}: not a fabperf agent or wrong protocol (expected AUTH or HELLO_OK, got {})",
                                      n.rec.name, proto::to_string(f.type)));
    }
    const auto a = proto::parse_auth(f.body);
    if (req_.key.empty()) {
      co_await tell_auth_failure(n, "the coordinator has no key");
      throw auth_error(n, "the agent requires a key; give --key-file FILE (or set FABPERF_KEY_FILE)");
    }
    if (!auth::proofs_equal(auth::agent_proof(req_.key, hello.nonce, a.nonce), a.proof)) {
      co_await tell_auth_failure(n, "key mismatch (the agent's proof does not match the coordinator's key)");
      throw auth_error(n, "key mismatch");
    }
    n.conn->send(MsgType::auth_ok, proto::to_json(proto::AuthOk{auth::coordinator_proof(req_.key, a.nonce, hello.nonce)}));
    // The agent answers HELLO_OK, or ERROR when it rejects our proof.
    proto::Frame g = co_await n.conn->read(kIdleDeadline, kFrameDeadline, proto::kMaxPreAuthBody);
    if (g.type == MsgType::error) {
      const auto e = proto::parse_error(g.body);
      throw Error(ExitCode::infrastructure, fmt::format("authentication failed for {}: {}", n.rec.name, e.message));
    }
    if (g.type != MsgType::hello_ok) {
      throw ProtocolError(fmt::format("agent {}: expected HELLO_OK, got {}", n.rec.name, proto::to_string(g.type)));
    }
    co_return std::move(g.body);
  }

  asio::awaitable<void> heartbeats(std::shared_ptr<FramedConn> conn) {
    // Kept where run() can cancel it: a sleeping heartbeat would otherwise hold io_.run() (and
    // the whole process) up to a second after the test is over.
    auto t = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor);
    heartbeat_timers_.push_back(t);
    while (conn->is_open() && !finished_) {
      t->expires_after(1s);
      error_code ec;
      co_await t->async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (conn->is_open()) conn->send(MsgType::heartbeat, json::object());
    }
  }

  asio::awaitable<void> sync_clock(Node& n) {
    std::vector<ClockSample> samples;
    for (int i = 0; i < kClockPings; ++i) {
      const std::int64_t t0 = mono_now_ns();
      n.conn->send(MsgType::ping, proto::to_json(proto::Ping{static_cast<std::uint64_t>(i)}));
      const auto pong = proto::parse_pong(co_await expect(n, MsgType::pong));
      const std::int64_t t3 = mono_now_ns();
      if (pong.seq != static_cast<std::uint64_t>(i)) throw ProtocolError(fmt::format("agent {}: PONG out of sequence", n.rec.name));
      samples.push_back({t0, pong.t_rx, pong.t_tx, t3});
    }
    n.rec.clock = estimate_clock_offset(samples);
    if (n.rec.clock.samples == 0) {
      throw ProtocolError(fmt::format("agent {}: clock synchronisation failed: no exchange was consistent "
                                      "(the agent's timestamps exceed the round trip)", n.rec.name));
    }
  }

  asio::awaitable<RunRecord> flow() {
    RunRecord rec;
    rec.spec = req_.spec;
    rec.test_id = proto::to_hex(proto::random_token()).substr(0, 16);
    rec.started_at = iso_now();
    const TestSpec& spec = req_.spec;

    const std::int64_t t_begin = mono_now_ns();
    auto since = [](std::int64_t t) { return static_cast<double>(mono_now_ns() - t) / 1e9; };
    co_await each([this](Node& n) { return connect(n); });
    throw_if_failed("connect");
    spdlog::info("coordinator: connected to {} agents in {:.3f} s", nodes_.size(), since(t_begin));
    // One agent given under two names would both serve and load itself. Sorted, not pairwise:
    // thousands of agents.
    {
      std::vector<std::pair<Tcp::endpoint, std::size_t>> eps;
      eps.reserve(nodes_.size());
      for (std::size_t i = 0; i < nodes_.size(); ++i) eps.emplace_back(nodes_[i].conn->socket().remote_endpoint(), i);
      std::sort(eps.begin(), eps.end());
      for (std::size_t i = 1; i < eps.size(); ++i) {
        if (eps[i].first == eps[i - 1].first) {
          const auto a = std::min(eps[i].second, eps[i - 1].second);
          const auto b = std::max(eps[i].second, eps[i - 1].second);
          throw Error(ExitCode::usage, fmt::format("{} and {} are the same agent", nodes_[a].rec.name, nodes_[b].rec.name));
        }
      }
    }
    if (interrupted_) throw Error(ExitCode::infrastructure, "interrupted before the test started");
    co_await each([this](Node& n) { return sync_clock(n); });
    throw_if_failed("clock synchronisation");

    const proto::Token token = proto::random_token();
    const std::uint32_t n_clients = static_cast<std::uint32_t>(req_.clients.size());
    co_await each([&](Node& n) -> asio::awaitable<void> {
      proto::SetupServer m;
      m.test_id = rec.test_id;
      m.token = token;
      m.spec = spec;
      m.node_index = n.rec.index;
      // Each client also opens one delay-probe connection to every server.
      m.expect_connections = n_clients * (spec.connections_per_pair() + 1);
      m.any_address = !n.hp.links.empty();
      n.conn->send(MsgType::setup_server, proto::to_json(m));
      const auto ok = proto::parse_setup_server_ok(co_await expect(n, MsgType::setup_server_ok, 30s));
      n.data_port = ok.data_port;
      n.rec.setup_warnings = ok.warnings;
    }, [](const Node& n) { return n.rec.is_server; });
    throw_if_failed("server set-up");

    std::vector<proto::Target> targets;
    for (const auto& n : nodes_) {
      if (n.rec.is_server) targets.push_back({n.rec.index, n.rec.address, n.data_port, n.hp.links});
    }
    co_await each([&](Node& n) -> asio::awaitable<void> {
      proto::SetupClient m;
      m.test_id = rec.test_id;
      m.token = token;
      m.spec = spec;
      m.node_index = n.rec.index;
      m.targets = targets;
      m.source_addrs = n.hp.links;
      n.conn->send(MsgType::setup_client, proto::to_json(m));
      // Opening many connections takes a while on big fabrics; the agent keeps heartbeating.
      const auto ok = proto::parse_setup_client_ok(co_await expect(n, MsgType::setup_client_ok, 120s));
      for (const auto& w : ok.warnings) {
        if (std::find(n.rec.setup_warnings.begin(), n.rec.setup_warnings.end(), w) == n.rec.setup_warnings.end()) {
          n.rec.setup_warnings.push_back(w);
        }
      }
    }, [](const Node& n) { return n.rec.is_client; });
    throw_if_failed("client set-up");
    spdlog::info("coordinator: {} agents set up in {:.3f} s", nodes_.size(), since(t_begin));
    // Bond sanity findings are worth reading before the numbers arrive.
    for (const auto& n : nodes_) {
      for (const auto& w : n.rec.setup_warnings) {
        if (w.rfind("bond ", 0) == 0) spdlog::warn("{}: {}", n.rec.name, w);
      }
    }
    if (interrupted_) {
      throw_if_failed("start");
      throw Error(ExitCode::infrastructure, "interrupted before the test started");
    }

    // A common start far enough ahead that every START arrives first.
    std::int64_t max_rtt = 0;
    for (const auto& n : nodes_) max_rtt = std::max(max_rtt, n.rec.clock.rtt_ns);
    const std::int64_t start = mono_now_ns() + std::max<std::int64_t>(300'000'000, 4 * max_rtt);
    const std::int64_t open = start + spec.warmup().count();
    const std::int64_t close = start + spec.time().count() - spec.cooldown().count();
    const std::int64_t end = start + spec.time().count();
    for (auto& n : nodes_) {
      const std::int64_t off = n.rec.clock.offset_ns;
      n.conn->send(MsgType::start, proto::to_json(proto::Start{start + off, open + off, close + off, end + off, req_.interval.count()}));
    }
    running_ = true;

    // Collect. Agents stop by their own schedule; one that goes silent is marked and the rest go on.
    co_await each([&](Node& n) -> asio::awaitable<void> {
      try {
        n.rec.result = parse_agent_result(co_await expect(n, MsgType::result));
      } catch (const ProtocolError& e) {
        n.rec.status = NodeStatus::failed;
        n.rec.error = e.what();
      } catch (const std::exception& e) {
        const std::string what = e.what();
        n.rec.status = what.find("no message within") != std::string::npos ? NodeStatus::stalled : NodeStatus::lost;
        n.rec.error = what;
      }
    });
    running_ = false;
    spdlog::info("coordinator: results of {} agents collected {:.3f} s after the test's end", nodes_.size(),
                 static_cast<double>(mono_now_ns() - end) / 1e9);
    const std::int64_t t_release = mono_now_ns();
    for (auto& n : nodes_) {
      if (n.conn && n.conn->is_open()) n.conn->send(MsgType::bye, json::object());
    }
    co_await each([](Node& n) -> asio::awaitable<void> {
      if (n.conn) co_await n.conn->flush();
    });
    spdlog::info("coordinator: {} agents released in {:.3f} s", nodes_.size(), since(t_release));
    rec.interrupted = interrupted_;
    for (auto& n : nodes_) rec.nodes.push_back(n.rec);
    co_return rec;
  }

  const RunRequest& req_;
  asio::io_context io_;
  asio::signal_set signals_;
  std::vector<Node> nodes_;
  bool running_{false};
  bool interrupted_{false};
  bool finished_{false};
  std::vector<std::shared_ptr<asio::steady_timer>> heartbeat_timers_;
};

}  // namespace

RunRecord run_test(const RunRequest& request) {
  std::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  Coordinator c(request);
  return c.run();
}

}  // namespace fabperf
