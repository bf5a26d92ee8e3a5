#include <fabperf/clock.hpp>
#include <fabperf/coordinator.hpp>
#include <fabperf/error.hpp>
#include <fabperf/sysstat.hpp>
#include <fabperf/units.hpp>

#include "coordinator/dialer.hpp"
#include "net/stop_watch.hpp"
#include "proto/conn.hpp"
#include "proto/tls_psk.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <algorithm>
#include <cmath>
#include <csignal>
#include <ctime>
#include <functional>
#include <map>
#include <set>

namespace fabperf {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using proto::ControlConn;
using proto::FramedConn;
using proto::MsgType;

// The deadlines (CoordinatorTiming's defaults, coordinator/dialer.hpp), and why:
// - idle 5 s: agents send a heartbeat every second; this much silence means gone or stopped.
// - cleaning_wait 15 s: a set-up waits this long for an agent still releasing its previous test
//   (its threads joining): a plan's next step, or `--resume` right after an interrupted run, can
//   meet that on a busy host. Another coordinator's running test ("busy") is not waited for.
// - result_drain 5 s + result_grace 10 s: after the test's end an agent joins its threads and
//   reads its last samples, then sends its RESULT; the grace covers the transfer (a 16 MiB RESULT
//   at ~30 Mbit/s) and a loaded host. A node whose RESULT has not arrived by then is stalled.
// - drain_max 60 s: an agent whose heartbeats say "draining" after the test's end (its
//   connections still deliver what the kernels held at the stop: 8 flows with 4 MB socket buffers
//   took 52 s at 10 Mbit/s, measured) is waited for result_grace past each such heartbeat, never longer than
//   the agent's own limit (RunContext::kMaxDrainNs) after the drain allowance. Without it such a
//   node was reported stalled and its counters lost.
// - result_frame 15 s: a RESULT frame is the largest there is.
// - answer 60 s: an answer to a request (HELLO_OK, PONG, SETUP_*_OK, LINKS, RDMA_CONNECT_OK)
//   must come within this, however many heartbeats the agent sends meanwhile: heartbeats say the
//   agent lives, not that it works on the request. Opening a set-up's thousands of connections on
//   a loaded host is the longest legitimate wait (seconds); a peer that only heartbeats is named
//   and dropped instead of holding the run (and the monitor) forever.

// An agent's "cleaning" answer to a set-up (see cleaning_wait above).
class AgentCleaning : public Error {
 public:
  using Error::Error;
};
constexpr int kClockPings = 8;

// Completes when count_down() was called n times.
class Latch {
 public:
  Latch(const asio::any_io_executor& ex, std::size_t n) : timer_(ex, asio::steady_timer::time_point::max()), n_(n) {}
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
  std::shared_ptr<ControlConn> conn;
  std::string endpoint;  // address:port as dialled
  std::uint16_t data_port{0};
  std::string failure;  // set-up phase failure, if any
  // RDMA through the control channel: this node's server and client queue pair endpoints.
  std::vector<proto::RdmaEndpoint> rdma_server_eps;
  std::vector<proto::RdmaEndpoint> rdma_client_eps;
};

Error auth_error(const std::string& name, const std::string& why) {
  return Error(ExitCode::infrastructure, fmt::format("authentication failed for {}: {}", name, why));
}

// Agents over TCP: resolve, connect within the request's timeout, and with a key the TLS 1.3
// handshake with the key's PSK (both ends prove the key, and every later frame is protected).
class TcpDialer final : public Dialer {
 public:
  TcpDialer(const RunRequest& req, std::chrono::milliseconds handshake_deadline)
      : connect_timeout_(req.connect_timeout), handshake_deadline_(handshake_deadline) {
    if (!req.key.empty()) tls_ = proto::make_tls_context(req.key, false);
  }

  asio::awaitable<Dialed> dial(const HostPort& hp, const std::string& name) override {
    auto ex = co_await asio::this_coro::executor;
    Tcp::resolver resolver(ex);
    error_code ec;
    auto results = co_await resolver.async_resolve(hp.host, std::to_string(hp.port),
                                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec) throw SystemError("cannot reach agent", name, fmt::format("name does not resolve ({})", ec.message()));
    Tcp::socket sock(ex);
    asio::steady_timer timer(ex);
    bool timed_out = false;
    timer.expires_after(connect_timeout_);
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
      throw SystemError(
          "cannot reach agent", name,
          fmt::format("connection timed out after {:.1f} s", static_cast<double>(connect_timeout_.count()) / 1e3));
    }
    if (ec) throw SystemError("cannot reach agent", name, ec.message());
    const auto remote = sock.remote_endpoint();
    Dialed d;
    d.address = numeric_address(remote.address());
    d.endpoint = HostPort{d.address, remote.port(), {}}.str();
    auto conn = std::make_shared<FramedConn>(std::move(sock), name, tls_);
    if (tls_) {
      try {
        co_await conn->start_tls(handshake_deadline_);
      } catch (const proto::TlsHandshakeError& e) {
        switch (tls::classify_client_failure(e.openssl_error())) {
          case tls::HandshakeFailure::key_mismatch: throw auth_error(name, "key mismatch (the agent refused this key)");
          case tls::HandshakeFailure::not_tls:
            throw auth_error(name,
                             "the agent has no key (it did not answer in TLS; it accepts unauthenticated "
                             "coordinators or is not a fabperf agent); refusing to use it with a key");
          case tls::HandshakeFailure::certificate:
            throw auth_error(name,
                             "the peer answered with a certificate instead of the shared key: it does not hold "
                             "the key (an impostor, or a TLS service that is not a fabperf agent); refusing it");
          case tls::HandshakeFailure::other: break;
        }
        throw auth_error(name, e.what());
      }
    }
    d.conn = std::move(conn);
    co_return d;
  }

 private:
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds handshake_deadline_;
  std::shared_ptr<asio::ssl::context> tls_;
};

class Coordinator {
 public:
  // dialer: null for agents over TCP (TcpDialer).
  Coordinator(const RunRequest& req, Dialer* dialer = nullptr, CoordinatorTiming timing = {})
      : req_(req), t_(timing), dialer_(dialer) {
    if (!dialer_) {
      own_dialer_ = std::make_unique<TcpDialer>(req_, t_.idle);
      dialer_ = own_dialer_.get();
    }
    std::uint32_t i = 0;
    for (const auto& s : req.servers) {
      server_node_.push_back(nodes_.size());
      add_node(i++, s, true);
    }
    for (const auto& c : req.clients) {
      std::size_t at = nodes_.size();
      if (!req.pairs.empty()) {
        for (std::size_t k = 0; k < req.servers.size(); ++k) {
          if (req.servers[k] == c) at = server_node_[k];
        }
      }
      client_node_.push_back(at);
      if (at == nodes_.size()) {
        add_node(i++, c, false);
      } else {
        nodes_[at].rec.is_client = true;
      }
    }
    check_pairs();
  }

  // Connects to every node in parallel, then runs fn on each one that answered; failures stay
  // in Node::failure. No test is set up; the connections close at the end.
  void administer(const std::function<asio::awaitable<void>(Node&)>& fn) {
    asio::co_spawn(
        io_,
        [&]() -> asio::awaitable<void> {
          co_await each([&](Node& n) -> asio::awaitable<void> {
            co_await connect(n);
            co_await fn(n);
            if (n.conn->is_open()) {
              n.conn->send(MsgType::bye, json::object());
              co_await n.conn->flush();
            }
          });
          for (auto& n : nodes_) {
            if (n.conn) n.conn->close();
          }
          io_.stop();  // no need to wait for the heartbeat timers to notice
        },
        asio::detached);
    io_.run();
  }
  [[nodiscard]] const std::vector<Node>& nodes() const { return nodes_; }

  asio::awaitable<json> expect_reply(Node& n, MsgType want) { return expect(n, want); }

  RunRecord run() {
    RunRecord record;
    std::exception_ptr failure;
    // main() owns SIGINT/SIGTERM (fabperf/stop.hpp); requests made from now on stop this test.
    StopWatch stop_watch(io_, [this](int) { on_interrupt(); });
    asio::co_spawn(
        io_,
        [&]() -> asio::awaitable<void> {
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
          stop_watch.cancel();
        },
        asio::detached);
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

  // Explicit pairs must name existing agents, never a node with itself, each pair once, and leave
  // no agent without a partner (it would wait for connections that never come).
  void check_pairs() {
    if (req_.pairs.empty()) return;
    std::vector<bool> serves(server_node_.size(), false), loads(client_node_.size(), false);
    std::set<std::pair<std::size_t, std::size_t>> seen;
    for (const auto& [c, s] : req_.pairs) {
      if (c >= client_node_.size() || s >= server_node_.size()) {
        throw UsageError(fmt::format("pair ({}, {}): no such client or server", c, s));
      }
      const std::size_t cn = client_node_[c], sn = server_node_[s];
      if (cn == sn)
        throw UsageError(
            fmt::format("pair {} -> {}: a node cannot load itself", nodes_[cn].rec.name, nodes_[sn].rec.name));
      if (!seen.insert({cn, sn}).second) {
        throw UsageError(fmt::format("pair {} -> {} is listed twice", nodes_[cn].rec.name, nodes_[sn].rec.name));
      }
      loads[c] = serves[s] = true;
    }
    for (std::size_t k = 0; k < serves.size(); ++k) {
      if (!serves[k]) throw UsageError(fmt::format("server {} is in no pair", req_.servers[k].str()));
    }
    for (std::size_t k = 0; k < loads.size(); ++k) {
      if (!loads[k]) throw UsageError(fmt::format("client {} is in no pair", req_.clients[k].str()));
    }
  }

  // The servers client node `cn` loads.
  [[nodiscard]] std::vector<std::size_t> servers_of(std::size_t cn) const {
    std::vector<std::size_t> out;
    if (req_.pairs.empty()) return server_node_;
    for (const auto& [c, s] : req_.pairs) {
      if (client_node_[c] == cn) out.push_back(server_node_[s]);
    }
    return out;
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
    if (interrupted_) {
      spdlog::warn("second interrupt: abandoning result collection");
      for (auto& n : nodes_) {
        if (n.conn) n.conn->close();
      }
      return;
    }
    interrupted_ = true;
    spdlog::warn("interrupted: stopping the test and collecting what was measured");
    for (auto& n : nodes_) {
      if (n.conn && n.conn->is_open())
        n.conn->send(MsgType::abort, proto::to_json(proto::Abort{"interrupted by the user"}));
    }
  }

  // Runs fn on every node concurrently; an exception marks that node's failure.
  asio::awaitable<void> each(const std::function<asio::awaitable<void>(Node&)>& fn,
                             std::function<bool(const Node&)> which = {}) {
    std::vector<Node*> sel;
    for (auto& n : nodes_) {
      if (!which || which(n)) sel.push_back(&n);
    }
    Latch latch(co_await asio::this_coro::executor, sel.size());
    for (Node* n : sel) {
      asio::co_spawn(
          io_,
          [&fn, &latch, n]() -> asio::awaitable<void> {
            try {
              co_await fn(*n);
            } catch (const std::exception& e) {
              n->failure = e.what();
            }
            latch.count_down();
          },
          asio::detached);
    }
    co_await latch.wait();
  }

  void throw_if_failed(const std::string& phase) {
    // An interrupt before the start closes the connections, so the phase's errors are only its echo.
    if (interrupted_) throw Interrupted("interrupted before the test started");
    std::vector<std::string> errs;
    for (const auto& n : nodes_) {
      if (!n.failure.empty()) errs.push_back(n.failure);
    }
    if (errs.empty()) return;
    for (auto& n : nodes_) {
      if (n.conn && n.conn->is_open())
        n.conn->send(MsgType::abort, proto::to_json(proto::Abort{phase + " failed on another agent"}));
    }
    std::string msg = errs.front();
    for (std::size_t i = 1; i < errs.size(); ++i) msg += "\n" + errs[i];
    throw Error(ExitCode::infrastructure, msg);
  }

  // Reads frames until `want`, skipping heartbeats; an ERROR from the agent becomes an Error.
  asio::awaitable<json> expect(Node& n, MsgType want) { return expect(n, want, t_.idle, t_.frame); }
  asio::awaitable<json> expect(Node& n, MsgType want, std::chrono::milliseconds idle) {
    return expect(n, want, idle, t_.frame);
  }
  // answer_bound false: the caller bounds the wait itself (RESULT: result_drain + result_grace
  // after the test's end, however long the test). on_heartbeat sees each heartbeat's body; by
  // value: a coroutine keeps its parameters, and a reference to a default argument would dangle.
  asio::awaitable<json> expect(Node& n, MsgType want, std::chrono::milliseconds idle, std::chrono::milliseconds frame,
                               bool answer_bound = true, std::function<void(const json&)> on_heartbeat = nullptr) {
    using Clock = std::chrono::steady_clock;
    const auto until = answer_bound ? Clock::now() + t_.answer : Clock::time_point::max();
    for (;;) {
      const auto wait =
          answer_bound
              ? std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()), 1ms, idle)
              : idle;
      proto::Frame f;
      try {
        f = co_await n.conn->read(wait, frame);
      } catch (const TimeoutError&) {
        if (wait == idle) throw;  // silent for the idle deadline: not this bound's doing
        n.conn->close();
        throw TimeoutError("wait for", fmt::format("{} from agent {}", proto::to_string(want), n.rec.name),
                           fmt::format("no answer within {:g} s (it sent only heartbeats)",
                                       std::chrono::duration<double>(t_.answer).count()));
      }
      if (f.type == MsgType::heartbeat) {
        if (on_heartbeat) on_heartbeat(f.body);
        continue;
      }
      if (f.type == want) co_return std::move(f.body);
      if (f.type == MsgType::error) {
        const auto e = proto::parse_error(f.body);
        if (e.code == proto::ErrorCode::cleaning)
          throw AgentCleaning(ExitCode::infrastructure, fmt::format("agent {}: {}", n.rec.name, e.message));
        throw Error(ExitCode::infrastructure, fmt::format("agent {}: {}", n.rec.name, e.message));
      }
      throw ProtocolError(
          fmt::format("agent {}: expected {}, got {}", n.rec.name, proto::to_string(want), proto::to_string(f.type)));
    }
  }

  // Sends a set-up message and returns the agent's answer; resends it every 200 ms while the
  // agent is still cleaning up its previous test, for at most cleaning_wait.
  asio::awaitable<json> setup_exchange(Node& n, MsgType type, const json& body, MsgType want,
                                       std::chrono::milliseconds idle) {
    const auto until = std::chrono::steady_clock::now() + t_.cleaning_wait;
    for (;;) {
      n.conn->send(type, body);
      bool cleaning = false;
      try {
        co_return co_await expect(n, want, idle);
      } catch (const AgentCleaning&) {
        if (std::chrono::steady_clock::now() >= until) throw;
        cleaning = true;
      }
      if (cleaning) {
        asio::steady_timer t(co_await asio::this_coro::executor);
        t.expires_after(200ms);
        co_await t.async_wait(asio::use_awaitable);
      }
    }
  }

  asio::awaitable<void> connect(Node& n) {
    Dialed d = co_await dialer_->dial(n.hp, n.rec.name);
    n.rec.address = std::move(d.address);
    n.endpoint = std::move(d.endpoint);
    n.conn = std::move(d.conn);
    const json body = co_await handshake(n);
    proto::HelloOk ok;
    try {
      ok = proto::parse_hello_ok(body);
    } catch (const ProtocolError& e) {
      throw ProtocolError(fmt::format("agent {}: not a fabperf agent or wrong protocol ({})", n.rec.name, e.what()));
    }
    // Keyed, the agent's word is authenticated: an agent that answered on another address than
    // the one dialled sits behind a relay, which could hand one host's role to another. (Ports
    // are not compared: agents of one host told apart by port share that host's figures.)
    if (!req_.key.empty() && ok.address != n.rec.address) {
      throw auth_error(n.rec.name, fmt::format("dialled {} but the agent answered on {}: a relay, port forward or NAT "
                                               "sits between (it could swap agents); dial the agent's own address",
                                               n.rec.address, ok.address.empty() ? "an unstated address" : ok.address));
    }
    n.rec.hostname = ok.hostname;
    asio::co_spawn(io_, heartbeats(n.conn), asio::detached);
  }

  // HELLO on a connection the dialer made ready; returns HELLO_OK's body.
  asio::awaitable<json> handshake(Node& n) {
    proto::Hello hello{proto::kVersion, proto::kVersion, req_.coordinator_name, proto::local_capabilities()};
    n.conn->send(MsgType::hello, proto::to_json(hello));
    proto::Frame f;
    try {
      f = co_await n.conn->read(t_.idle, t_.frame, proto::kMaxPreAuthBody);
    } catch (const ProtocolError& e) {
      throw ProtocolError(fmt::format("agent {}: not a fabperf agent or wrong protocol ({})", n.rec.name, e.what()));
    }
    if (f.type == MsgType::error) {
      const auto e = proto::parse_error(f.body);
      if (e.code == proto::ErrorCode::key_required)
        throw auth_error(n.rec.name, "the agent requires a key; give --key-file FILE (or set FABPERF_KEY_FILE)");
      throw Error(ExitCode::infrastructure, fmt::format("agent {}: {}", n.rec.name, e.message));
    }
    if (f.type != MsgType::hello_ok) {
      throw ProtocolError(fmt::format("agent {}: not a fabperf agent or wrong protocol (expected HELLO_OK, got {})",
                                      n.rec.name, proto::to_string(f.type)));
    }
    co_return std::move(f.body);
  }

  asio::awaitable<void> heartbeats(std::shared_ptr<ControlConn> conn) {
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
    std::int64_t best_rtt = INT64_MAX;
    for (int i = 0; i < kClockPings; ++i) {
      const std::int64_t w0 = wall_now_ns();
      const std::int64_t t0 = mono_now_ns();
      n.conn->send(MsgType::ping, proto::to_json(proto::Ping{static_cast<std::uint64_t>(i)}));
      const auto pong = proto::parse_pong(co_await expect(n, MsgType::pong));
      const std::int64_t t3 = mono_now_ns();
      const std::int64_t w3 = wall_now_ns();
      if (pong.t_wall != 0 && t3 - t0 < best_rtt) {
        best_rtt = t3 - t0;
        const std::int64_t wall_mid = w0 + (w3 - w0) / 2;  // whole nanoseconds
        n.rec.wall_offset_s = static_cast<double>(pong.t_wall - wall_mid) / 1e9;
      }
      if (pong.seq != static_cast<std::uint64_t>(i))
        throw ProtocolError(fmt::format("agent {}: PONG out of sequence", n.rec.name));
      samples.push_back({t0, pong.t_rx, pong.t_tx, t3});
    }
    n.rec.clock = estimate_clock_offset(samples);
    if (n.rec.clock.samples == 0) {
      throw ProtocolError(
          fmt::format("agent {}: clock synchronisation failed: no exchange was consistent "
                      "(the agent's timestamps exceed the round trip)",
                      n.rec.name));
    }
  }

  // --socksize auto: the slowest data interface of any node (from each agent's inventory) times
  // the round trip between a client and a server, estimated as the largest client plus the
  // largest server round trip of the control connections (the coordinator sits between them or
  // on one of them, so this errs on the large side).
  asio::awaitable<void> auto_socksize(RunRecord& rec) {
    struct Seen {
      std::int64_t speed_mbps;
      std::string what;  // "eth0 on host:port"
    };
    std::vector<Seen> seen;
    co_await each([&](Node& n) -> asio::awaitable<void> {
      n.conn->send(MsgType::links_request, json::object());
      const auto reply = proto::parse_links(co_await expect(n, MsgType::links));
      const std::vector<std::string> addrs = n.hp.links.empty() ? std::vector<std::string>{n.rec.address} : n.hp.links;
      for (const auto& a : addrs) {
        std::int64_t s = -1;
        std::string name = "?";
        for (const auto& l : reply.links) {
          for (const auto& cidr : l.addresses) {
            if (cidr.substr(0, cidr.find('/')) == a) {
              s = l.speed_mbps;
              name = l.name;
            }
          }
        }
        seen.push_back({s, fmt::format("{} ({}) on {}", name, a, n.rec.name)});
      }
    });
    if (std::any_of(nodes_.begin(), nodes_.end(), [](const Node& n) { return !n.failure.empty(); })) co_return;
    std::int64_t speed = -1;
    std::string slowest;
    for (const auto& s : seen) {
      if (s.speed_mbps <= 0) {  // one unknown speed makes the product unknown
        speed = 0;
        slowest = s.what + " reports no speed";
        break;
      }
      if (speed < 0 || s.speed_mbps < speed) {
        speed = s.speed_mbps;
        slowest = s.what;
      }
    }
    std::int64_t rtt_c = 0, rtt_s = 0;
    for (const auto& n : nodes_) {
      auto& r = n.rec.is_client ? rtt_c : rtt_s;
      r = std::max(r, n.rec.clock.rtt_ns);
    }
    const std::int64_t rtt = rtt_c + rtt_s;
    const std::uint64_t size = socksize_from_bdp(speed, rtt);
    if (size == 0) {
      rec.socksize_basis = fmt::format("socksize auto: link speed unknown ({}): left to the OS (autotuning)", slowest);
      co_return;
    }
    rec.spec = rec.spec.with_auto_socksize(size);
    rec.socksize_basis = fmt::format(
        "socksize auto: {} = 2 x BDP ({} Mb/s, slowest link {}, x round trip {:.0f} us) (min 256K, max 100M)",
        format_size(size), speed, slowest, static_cast<double>(rtt) / 1e3);
  }

  // NOLINTNEXTLINE(readability-function-size): over 120 lines before the check; split it, do not grow it
  asio::awaitable<RunRecord> flow() {
    RunRecord rec;
    rec.spec = req_.spec;
    rec.test_id = proto::to_hex(proto::random_token()).substr(0, 16);
    rec.started_at = iso8601_utc_now();
    const TestSpec& spec = rec.spec;  // --socksize auto replaces it before any set-up

    const std::int64_t t_begin = mono_now_ns();
    auto since = [](std::int64_t t) { return static_cast<double>(mono_now_ns() - t) / 1e9; };
    co_await each([this](Node& n) { return connect(n); });
    throw_if_failed("connect");
    spdlog::info("coordinator: connected to {} agents in {:.3f} s", nodes_.size(), since(t_begin));
    // One agent given under two names would both serve and load itself. Sorted, not pairwise:
    // thousands of agents.
    {
      std::vector<std::pair<std::string, std::size_t>> eps;
      eps.reserve(nodes_.size());
      for (std::size_t i = 0; i < nodes_.size(); ++i) eps.emplace_back(nodes_[i].endpoint, i);
      std::sort(eps.begin(), eps.end());
      for (std::size_t i = 1; i < eps.size(); ++i) {
        if (eps[i].first == eps[i - 1].first) {
          const auto a = std::min(eps[i].second, eps[i - 1].second);
          const auto b = std::max(eps[i].second, eps[i - 1].second);
          throw Error(ExitCode::usage,
                      fmt::format("{} and {} are the same agent", nodes_[a].rec.name, nodes_[b].rec.name));
        }
      }
    }
    if (interrupted_) throw Interrupted("interrupted before the test started");
    co_await each([this](Node& n) { return sync_clock(n); });
    throw_if_failed("clock synchronisation");
    if (req_.spec.socksize_auto()) {
      co_await auto_socksize(rec);
      throw_if_failed("link inventory for --socksize auto");
    }

    const proto::Token token = proto::random_token();
    // Clients loading each server node.
    std::vector<std::uint32_t> n_clients(nodes_.size(), 0);
    // RDMA queue pairs exchanged through this control channel (not --rdma-cm): each server
    // learns which clients to create queue pairs for.
    const bool rdma_cc = spec.transport() == Transport::rdma && !spec.rdma_cm();
    std::vector<std::vector<std::uint32_t>> rdma_clients(nodes_.size());
    for (std::size_t k = 0; k < nodes_.size(); ++k) {
      if (!nodes_[k].rec.is_client) continue;
      for (const std::size_t sn : servers_of(k)) {
        ++n_clients[sn];
        if (rdma_cc) rdma_clients[sn].push_back(nodes_[k].rec.index);
      }
    }
    co_await each(
        [&](Node& n) -> asio::awaitable<void> {
          proto::SetupServer m;
          m.test_id = rec.test_id;
          m.token = token;
          m.spec = spec;
          m.node_index = n.rec.index;
          // Each client also opens one delay-probe connection to every server (unless --delay-probe off).
          m.expect_connections = n_clients[static_cast<std::size_t>(&n - nodes_.data())] *
                                 (spec.connections_per_pair() + (spec.delay_probe().count() != 0 ? 1 : 0));
          m.any_address = !n.hp.links.empty();
          const std::size_t at = static_cast<std::size_t>(&n - nodes_.data());
          if (rdma_cc) {
            m.rdma_clients = rdma_clients[at];
            m.link_addrs = n.hp.links;
          }
          auto ok = proto::parse_setup_server_ok(
              co_await setup_exchange(n, MsgType::setup_server, proto::to_json(m), MsgType::setup_server_ok, 30s));
          if (!rdma_cc && ok.data_port == 0)
            throw ProtocolError(fmt::format("agent {}: SETUP_SERVER_OK.data_port: 0", n.rec.name));
          if (rdma_cc) {
            const std::size_t want = rdma_clients[at].size() * spec.connections_per_pair();
            if (ok.rdma.size() != want) {
              throw ProtocolError(fmt::format("agent {}: SETUP_SERVER_OK.rdma: {} queue pairs, expected {}", n.rec.name,
                                              ok.rdma.size(), want));
            }
            for (const auto& e : ok.rdma) {
              if (e.node != n.rec.index) {
                throw ProtocolError(
                    fmt::format("agent {}: SETUP_SERVER_OK.rdma: an endpoint of node {}, not of this node {}",
                                n.rec.name, e.node, n.rec.index));
              }
            }
            n.rdma_server_eps = std::move(ok.rdma);
          }
          n.data_port = ok.data_port;
          n.rec.setup_warnings = ok.warnings;
        },
        [](const Node& n) { return n.rec.is_server; });
    throw_if_failed("server set-up");

    co_await each(
        [&](Node& n) -> asio::awaitable<void> {
          std::vector<proto::Target> targets;
          for (const std::size_t sn : servers_of(static_cast<std::size_t>(&n - nodes_.data()))) {
            const Node& t = nodes_[sn];
            std::vector<proto::RdmaEndpoint> eps;
            for (const auto& e : t.rdma_server_eps) {
              if (e.peer == n.rec.index) eps.push_back(e);
            }
            targets.push_back({t.rec.index, t.rec.address, t.data_port, t.hp.links, std::move(eps)});
          }
          proto::SetupClient m;
          m.test_id = rec.test_id;
          m.token = token;
          m.spec = spec;
          m.node_index = n.rec.index;
          m.targets = targets;
          m.source_addrs = n.hp.links;
          m.bind_devs = req_.bind_devs;
          // Opening many connections takes a while on big fabrics; the agent keeps heartbeating.
          auto ok = proto::parse_setup_client_ok(
              co_await setup_exchange(n, MsgType::setup_client, proto::to_json(m), MsgType::setup_client_ok, 120s));
          if (rdma_cc) {
            for (const auto& e : ok.rdma) {
              if (e.node != n.rec.index || e.peer >= nodes_.size() || !nodes_[e.peer].rec.is_server) {
                throw ProtocolError(fmt::format(
                    "agent {}: SETUP_CLIENT_OK.rdma: endpoint of node {} for node {} does not fit this test",
                    n.rec.name, e.node, e.peer));
              }
            }
            n.rdma_client_eps = std::move(ok.rdma);
          }
          for (const auto& w : ok.warnings) {
            if (std::find(n.rec.setup_warnings.begin(), n.rec.setup_warnings.end(), w) == n.rec.setup_warnings.end()) {
              n.rec.setup_warnings.push_back(w);
            }
          }
        },
        [](const Node& n) { return n.rec.is_client; });
    throw_if_failed("client set-up");
    if (rdma_cc) {
      // The clients' queue pairs are at RTS; each server brings its own up against them.
      co_await each(
          [&](Node& n) -> asio::awaitable<void> {
            proto::RdmaConnect m{rec.test_id, {}};
            for (const auto& c : nodes_) {
              for (const auto& e : c.rdma_client_eps) {
                if (e.peer == n.rec.index) m.endpoints.push_back(e);
              }
            }
            if (m.endpoints.size() != n.rdma_server_eps.size()) {
              throw ProtocolError(fmt::format("agent {}: its clients returned {} RDMA queue pairs for its {}",
                                              n.rec.name, m.endpoints.size(), n.rdma_server_eps.size()));
            }
            n.conn->send(MsgType::rdma_connect, proto::to_json(m));
            const auto ok = proto::parse_rdma_connect_ok(co_await expect(n, MsgType::rdma_connect_ok, 30s));
            if (ok.queue_pairs != m.endpoints.size()) {
              throw ProtocolError(fmt::format("agent {}: RDMA_CONNECT_OK.queue_pairs: {}, expected {}", n.rec.name,
                                              ok.queue_pairs, m.endpoints.size()));
            }
          },
          [](const Node& n) { return n.rec.is_server && !n.rdma_server_eps.empty(); });
      throw_if_failed("RDMA queue pair set-up");
    }
    spdlog::info("coordinator: {} agents set up in {:.3f} s", nodes_.size(), since(t_begin));
    // Bond sanity findings are worth reading before the numbers arrive.
    for (const auto& n : nodes_) {
      for (const auto& w : n.rec.setup_warnings) {
        if (w.rfind("bond ", 0) == 0) spdlog::warn("{}: {}", n.rec.name, w);
      }
    }
    if (interrupted_) {
      throw_if_failed("start");
      throw Interrupted("interrupted before the test started");
    }

    // A common start far enough ahead that every START arrives first: four round trips, and 2 ms
    // an agent (1,024 agents on 2 cores took over 2 s to read theirs after a 0.3 s lead).
    std::int64_t max_rtt = 0;
    for (const auto& n : nodes_) max_rtt = std::max(max_rtt, n.rec.clock.rtt_ns);
    const std::int64_t start = mono_now_ns() + std::max({std::int64_t{300'000'000}, 4 * max_rtt,
                                                         static_cast<std::int64_t>(nodes_.size()) * 2'000'000});
    const std::int64_t open = start + spec.warmup().count();
    const std::int64_t close = start + spec.time().count() - spec.cooldown().count();
    const std::int64_t end = start + spec.time().count();
    for (auto& n : nodes_) {
      const std::int64_t off = n.rec.clock.offset_ns;
      n.conn->send(MsgType::start, proto::to_json(proto::Start{start + off, open + off, close + off, end + off,
                                                               req_.interval.count()}));
    }
    running_ = true;
    if (req_.sink) {
      RunRecord header = rec;
      for (const auto& n : nodes_) header.nodes.push_back(n.rec);
      req_.sink->started(header);
    }

    // Collect. Agents stop by their own schedule; one that goes silent is marked and the rest go on.
    // With a sink, each node's result goes out as it arrives and is not kept here.
    // Heartbeats alone do not keep a node waited for: its RESULT must arrive within result_drain +
    // result_grace of the test's end, or the node is reported stalled and the rest still reported.
    const auto end_tp =
        std::chrono::steady_clock::now() + std::chrono::nanoseconds(std::max<std::int64_t>(0, end - mono_now_ns()));
    const auto result_deadline = end_tp + t_.result_drain + t_.result_grace;
    co_await each([&](Node& n) -> asio::awaitable<void> {
      bool overdue = false;
      asio::steady_timer bound(co_await asio::this_coro::executor);
      const auto arm = [&overdue, &bound, conn = n.conn](std::chrono::steady_clock::time_point at) {
        bound.expires_at(at);  // a pending wait ends with operation_aborted
        bound.async_wait([&overdue, conn](error_code e) {
          if (e) return;
          overdue = true;
          conn->close();  // the agent sees its coordinator gone and stops
        });
      };
      arm(result_deadline);
      // An agent whose connections still drain what the kernels hold after the stop (a slow link,
      // big socket buffers) says so in its heartbeats: its RESULT is waited for while it does,
      // never past the agent's own drain limit (drain_max) and the grace.
      const auto drain_cap = end_tp + t_.result_drain + t_.drain_max + t_.result_grace;
      auto on_heartbeat = [&](const json& body) {
        if (const auto rx = body.find("rx_bytes"); rx != body.end() && rx->is_number_unsigned())
          live_progress(n, rx->get<std::uint64_t>(), start, end);
        const auto it = body.find("draining");
        if (it == body.end() || !it->is_boolean() || !it->get<bool>() || overdue) return;
        const auto at = std::min(drain_cap, std::chrono::steady_clock::now() + t_.result_grace);
        if (at > bound.expiry()) arm(at);
      };
      try {
        n.rec.result =
            parse_agent_result(co_await expect(n, MsgType::result, t_.idle, t_.result_frame, false, on_heartbeat));
      } catch (const ProtocolError& e) {
        n.rec.status = NodeStatus::failed;
        n.rec.error = e.what();
      } catch (const TimeoutError& e) {
        // Silent past the idle deadline, heartbeats included: the connection may still be up.
        n.rec.status = NodeStatus::stalled;
        n.rec.error = e.what();
      } catch (const std::exception& e) {
        const std::string what = e.what();
        if (overdue) {
          n.rec.status = NodeStatus::stalled;
          // The bound it was given: longer than the usual one while it said it was draining.
          n.rec.error = fmt::format("agent {}: no RESULT within {:.3g} s of the test's end (it still sent heartbeats)",
                                    n.rec.name, std::chrono::duration<double>(bound.expiry() - end_tp).count());
        } else {
          n.rec.status = NodeStatus::lost;
          n.rec.error = what;
        }
      }
      bound.cancel();
      if (req_.sink) {
        req_.sink->node(n.rec);
        n.rec.result.reset();
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
  CoordinatorTiming t_;
  Dialer* dialer_;
  std::unique_ptr<Dialer> own_dialer_;  // TCP, when no dialer was given
  asio::io_context io_;
  std::vector<Node> nodes_;
  std::vector<std::size_t> server_node_;  // index in nodes_ of req_.servers[i]
  std::vector<std::size_t> client_node_;  // index in nodes_ of req_.clients[i]
  bool running_{false};
  // The live progress line: each node's last two received-byte counts, and when it last spoke.
  struct Live {
    std::uint64_t bytes{0};
    std::int64_t t{0};
    double mb_per_s{0};
  };
  std::map<const Node*, Live> live_;
  std::int64_t last_progress_ns_{0};

  void live_progress(const Node& n, std::uint64_t bytes, std::int64_t start, std::int64_t end) {
    if (!req_.progress) return;
    const std::int64_t now = mono_now_ns();
    Live& l = live_[&n];
    const std::int64_t since = l.t > 0 ? l.t : start;  // the first count runs from the start
    if (now > since && bytes >= l.bytes)
      l.mb_per_s = static_cast<double>(bytes - l.bytes) / 1e6 / (static_cast<double>(now - since) / 1e9);
    l.bytes = bytes;
    l.t = now;
    if (now - last_progress_ns_ < 900'000'000) return;  // once a second, whichever node spoke last
    last_progress_ns_ = now;
    double total = 0;
    for (const auto& [node, v] : live_) total += v.mb_per_s;
    req_.progress(std::max(0.0, static_cast<double>(now - start) / 1e9), static_cast<double>(end - start) / 1e9, total);
  }
  bool interrupted_{false};
  bool finished_{false};
  std::vector<std::shared_ptr<asio::steady_timer>> heartbeat_timers_;
};

}  // namespace

std::string progress_text(double elapsed_s, double total_s, double mb_per_s) {
  return fmt::format("{:.1f} of {:.1f} s, {:.0f} MB/s now", std::min(elapsed_s, total_s), total_s, mb_per_s);
}

std::uint64_t socksize_from_bdp(std::int64_t speed_mbps, std::int64_t rtt_ns) {
  if (speed_mbps <= 0) return 0;
  constexpr std::uint64_t kMin = 256u << 10, kGrain = 64u << 10;
  const double bdp =
      static_cast<double>(speed_mbps) * 1e6 / 8.0 * static_cast<double>(std::max<std::int64_t>(rtt_ns, 0)) / 1e9;
  const double want = 2.0 * bdp;
  if (want >= static_cast<double>(limits::kMaxSocksize)) return limits::kMaxSocksize;
  std::uint64_t size = static_cast<std::uint64_t>(std::ceil(want / static_cast<double>(kGrain))) * kGrain;
  return std::clamp<std::uint64_t>(size, kMin, limits::kMaxSocksize);
}

namespace {
RunRequest admin_request(const AgentQuery& q) {
  RunRequest r;
  r.servers = q.agents;
  r.connect_timeout = q.connect_timeout;
  r.coordinator_name = q.coordinator_name;
  r.key = q.key;
  return r;
}
}  // namespace

std::vector<AgentLinks> fetch_links(const AgentQuery& query) {
  const RunRequest req = admin_request(query);
  Coordinator c(req);
  std::vector<AgentLinks> out(query.agents.size());
  c.administer([&](Node& n) -> asio::awaitable<void> {
    n.conn->send(MsgType::links_request, json::object());
    proto::LinksReply r;
    try {
      r = proto::parse_links(co_await c.expect_reply(n, MsgType::links));
    } catch (const ProtocolError& e) {
      throw ProtocolError(fmt::format("agent {}: bad LINKS reply: {}", n.rec.name, e.what()));
    }
    auto& o = out[n.rec.index];
    o.hostname = std::move(r.hostname);
    o.links = std::move(r.links);
    o.limits = r.limits;
    o.rdma = std::move(r.rdma);
  });
  for (const auto& n : c.nodes()) {
    out[n.rec.index].agent = n.rec.name;
    out[n.rec.index].error = n.failure;
  }
  return out;
}

std::vector<AgentShutdown> shutdown_agents(const AgentQuery& query, const std::string& reason) {
  const RunRequest req = admin_request(query);
  Coordinator c(req);
  c.administer([&](Node& n) -> asio::awaitable<void> {
    n.conn->send(MsgType::shutdown, proto::to_json(proto::Shutdown{reason}));
    (void)co_await c.expect_reply(n, MsgType::bye);
    n.conn->close();
  });
  std::vector<AgentShutdown> out;
  for (const auto& n : c.nodes()) out.push_back({n.rec.name, n.failure});
  return out;
}

void set_host_pairs(RunRequest& req, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& host_pairs,
                    const std::function<HostPort(std::uint32_t)>& endpoint) {
  std::vector<std::uint32_t> cl, sv;
  const auto slot = [](std::vector<std::uint32_t>& v, std::uint32_t h) {
    const auto it = std::find(v.begin(), v.end(), h);
    if (it != v.end()) return static_cast<std::uint32_t>(it - v.begin());
    v.push_back(h);
    return static_cast<std::uint32_t>(v.size() - 1);
  };
  req.pairs.clear();
  for (const auto& [c, s] : host_pairs) req.pairs.emplace_back(slot(cl, c), slot(sv, s));
  req.clients.clear();
  req.servers.clear();
  for (const auto h : cl) req.clients.push_back(endpoint(h));
  for (const auto h : sv) req.servers.push_back(endpoint(h));
}

RunRecord run_test(const RunRequest& request) {
  raise_fd_limit();
  Coordinator c(request);
  return c.run();
}

RunRecord run_test(const RunRequest& request, Dialer& dialer, const CoordinatorTiming& timing) {
  Coordinator c(request, &dialer, timing);
  return c.run();
}

}  // namespace fabperf
