#include <fabperf/core/error.hpp>
#include <fabperf/sysinfo/sysstat.hpp>

#include "coordinator/coordinator_internal.hpp"
#include "net/stop_watch.hpp"
#include "proto/tls_psk.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <algorithm>
#include <set>

namespace fabperf {
namespace coord {
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

Error auth_error(const std::string& name, const std::string& why) {
  return Error(ExitCode::infrastructure, fmt::format("authentication failed for {}: {}", name, why));
}

RunRequest admin_request(const AgentQuery& q) {
  RunRequest r;
  r.servers = q.agents;
  r.connect_timeout = q.connect_timeout;
  r.coordinator_name = q.coordinator_name;
  r.key = q.key;
  return r;
}

// An agent's ERROR answer as the Error to throw: "cleaning" is waited out by setup_exchange,
// "key_required" (to HELLO) explains itself.
[[noreturn]] void throw_agent_error(const Node& n, const json& body) {
  const auto e = proto::parse_error(body);
  if (e.code == proto::ErrorCode::cleaning)
    throw AgentCleaning(ExitCode::infrastructure, fmt::format("agent {}: {}", n.rec.name, e.message));
  if (e.code == proto::ErrorCode::key_required)
    throw auth_error(n.rec.name, "the agent requires a key; give --key-file FILE (or set FABPERF_KEY_FILE)");
  throw Error(ExitCode::infrastructure, fmt::format("agent {}: {}", n.rec.name, e.message));
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
    const std::string address = numeric_address(remote.address());
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
    co_return Dialed{std::move(conn), address, HostPort{address, remote.port(), {}}.str()};
  }

 private:
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds handshake_deadline_;
  std::shared_ptr<asio::ssl::context> tls_;
};

}  // namespace

Coordinator::Coordinator(const RunRequest& req, Dialer* dialer, CoordinatorTiming timing)
    : req_(req), t_(timing), dialer_(dialer) {
  if (!dialer_) {
    own_dialer_ = std::make_unique<TcpDialer>(req_, t_.idle);
    dialer_ = own_dialer_.get();
  }
  const auto add = [&](const HostPort& hp, bool server) {
    Node& n = nodes_.emplace_back();
    n.hp = hp;
    n.rec.index = static_cast<std::uint32_t>(nodes_.size() - 1);
    n.rec.name = hp.str();
    n.rec.links = hp.links;
    n.rec.is_server = server;
    n.rec.is_client = !server;
    return nodes_.size() - 1;
  };
  for (const auto& s : req.servers) server_node_.push_back(add(s, true));
  for (const auto& c : req.clients) {
    // With pairs, an agent listed as a server and as a client is one node with both roles.
    const auto same = std::ranges::find(req.servers, c);
    if (req.pairs.empty() || same == req.servers.end()) {
      client_node_.push_back(add(c, false));
    } else {
      client_node_.push_back(static_cast<std::size_t>(same - req.servers.begin()));
      nodes_[client_node_.back()].rec.is_client = true;
    }
  }
  check_pairs();
}

void Coordinator::administer(const NodeTask& fn) {
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
        close_all();
        io_.stop();  // no need to wait for the heartbeat timers to notice
      },
      asio::detached);
  io_.run();
}

RunRecord Coordinator::run() {
  RunRecord record;
  std::exception_ptr failure;
  // main() owns SIGINT/SIGTERM (fabperf/core/stop.hpp); requests made from now on stop this test.
  StopWatch stop_watch(io_, [this](int) { on_interrupt(); });
  asio::co_spawn(
      io_,
      [&]() -> asio::awaitable<void> {
        try {
          record = co_await flow();
        } catch (...) {
          failure = std::current_exception();
        }
        close_all();
        finished_ = true;
        for (auto& t : heartbeat_timers_) t->cancel();
        stop_watch.cancel();
      },
      asio::detached);
  io_.run();
  if (failure) std::rethrow_exception(failure);
  return record;
}

// Explicit pairs must name existing agents, never a node with itself, each pair once, and leave
// no agent without a partner (it would wait for connections that never come).
void Coordinator::check_pairs() {
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
  if (const auto k = std::ranges::find(serves, false) - serves.begin(); k < std::ssize(serves))
    throw UsageError(fmt::format("server {} is in no pair", req_.servers[k].str()));
  if (const auto k = std::ranges::find(loads, false) - loads.begin(); k < std::ssize(loads))
    throw UsageError(fmt::format("client {} is in no pair", req_.clients[k].str()));
}

// The servers client node `cn` loads.
std::vector<std::size_t> Coordinator::servers_of(std::size_t cn) const {
  std::vector<std::size_t> out;
  if (req_.pairs.empty()) return server_node_;
  for (const auto& [c, s] : req_.pairs) {
    if (client_node_[c] == cn) out.push_back(server_node_[s]);
  }
  return out;
}

void Coordinator::close_all() {
  for (auto& n : nodes_) {
    if (n.conn) n.conn->close();
  }
}

void Coordinator::abort_all(const std::string& reason) {
  for (auto& n : nodes_) {
    if (n.conn && n.conn->is_open()) n.conn->send(MsgType::abort, proto::to_json(proto::Abort{reason}));
  }
}

void Coordinator::on_interrupt() {
  // Nothing measured yet: release everybody and stop. Measuring, a second interrupt abandons the results.
  if (!running_ || interrupted_) {
    if (running_) spdlog::warn("second interrupt: abandoning result collection");
    interrupted_ = true;
    close_all();
    return;
  }
  interrupted_ = true;
  spdlog::warn("interrupted: stopping the test and collecting what was measured");
  abort_all("interrupted by the user");
}

// Runs fn on every node concurrently, at most `window` at once; an exception marks that node's failure.
asio::awaitable<void> Coordinator::each(const NodeTask& fn, std::function<bool(const Node&)> which,
                                        std::size_t window) {
  std::vector<Node*> sel;
  for (auto& n : nodes_) {
    if (!which || which(n)) sel.push_back(&n);
  }
  const std::size_t workers = window == 0 ? sel.size() : std::min(window, sel.size());
  std::size_t next = 0;           // the next node a worker takes (one thread: no lock)
  std::size_t running = workers;  // the last worker to finish cancels `done`
  asio::steady_timer done(io_, asio::steady_timer::time_point::max());
  for (std::size_t w = 0; w < workers; ++w) {
    asio::co_spawn(
        io_,
        [&]() -> asio::awaitable<void> {
          while (next < sel.size()) {
            Node* n = sel[next++];
            try {
              co_await fn(*n);
            } catch (const std::exception& e) {
              n->failure = e.what();
            }
          }
          if (--running == 0) done.cancel();
        },
        asio::detached);
  }
  while (running > 0) {  // NOLINT(bugprone-infinite-loop): the workers count it down
    error_code ec;
    co_await done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

void Coordinator::throw_if_failed(const std::string& phase) {
  // An interrupt before the start closes the connections, so the phase's errors are only its echo.
  if (interrupted_) throw Interrupted("interrupted before the test started");
  std::string msg;  // every agent's failure, a line each
  for (const auto& n : nodes_) {
    if (!n.failure.empty()) msg += (msg.empty() ? "" : "\n") + n.failure;
  }
  if (msg.empty()) return;
  abort_all(phase + " failed on another agent");
  throw Error(ExitCode::infrastructure, msg);
}

asio::awaitable<void> Coordinator::phase(const char* name, const NodeTask& fn, std::function<bool(const Node&)> which,
                                         std::size_t window) {
  co_await each(fn, std::move(which), window);
  throw_if_failed(name);
}

// Reads frames until `want`, skipping heartbeats; an ERROR from the agent becomes an Error.
// answer_bound false: the caller bounds the wait itself (RESULT: result_drain + result_grace
// after the test's end, however long the test). on_heartbeat sees each heartbeat's body; by
// value: a coroutine keeps its parameters, and a reference to a default argument would dangle.
asio::awaitable<json> Coordinator::expect(Node& n, MsgType want, std::chrono::milliseconds idle,
                                          std::chrono::milliseconds frame, bool answer_bound,
                                          std::function<void(const json&)> on_heartbeat) {
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
    if (f.type == MsgType::error) throw_agent_error(n, f.body);
    throw ProtocolError(
        fmt::format("agent {}: expected {}, got {}", n.rec.name, proto::to_string(want), proto::to_string(f.type)));
  }
}

// Sends a set-up message and returns the agent's answer; resends it every 200 ms while the
// agent is still cleaning up its previous test, for at most cleaning_wait.
asio::awaitable<json> Coordinator::setup_exchange(Node& n, MsgType type, const json& body, MsgType want,
                                                  std::chrono::milliseconds idle) {
  const auto until = std::chrono::steady_clock::now() + t_.cleaning_wait;
  for (;;) {
    n.conn->send(type, body);
    try {
      co_return co_await expect(n, want, idle, t_.frame);
    } catch (const AgentCleaning&) {
      if (std::chrono::steady_clock::now() >= until) throw;
    }
    // Still cleaning (no co_await inside a handler).
    asio::steady_timer t(co_await asio::this_coro::executor);
    t.expires_after(200ms);
    co_await t.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<void> Coordinator::connect(Node& n) {
  Dialed d = co_await dialer_->dial(n.hp, n.rec.name);
  n.rec.address = std::move(d.address);
  n.endpoint = std::move(d.endpoint);
  n.conn = std::move(d.conn);
  n.conn->send(MsgType::hello, proto::to_json(proto::Hello{proto::kVersion, proto::kVersion, req_.coordinator_name,
                                                           proto::local_capabilities()}));
  proto::HelloOk ok;
  try {
    const proto::Frame f = co_await n.conn->read(t_.idle, t_.frame, proto::kMaxPreAuthBody);
    if (f.type == MsgType::error) throw_agent_error(n, f.body);
    if (f.type != MsgType::hello_ok)
      throw ProtocolError(fmt::format("expected HELLO_OK, got {}", proto::to_string(f.type)));
    ok = proto::parse_hello_ok(f.body);
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

asio::awaitable<void> Coordinator::heartbeats(std::shared_ptr<ControlConn> conn) {
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

asio::awaitable<void> Coordinator::sync_clock(Node& n) {
  std::vector<ClockSample> samples;
  std::int64_t best_rtt = INT64_MAX;
  for (int i = 0; i < kClockPings; ++i) {
    const std::int64_t w0 = wall_now_ns();
    const std::int64_t t0 = mono_now_ns();
    const auto ping = proto::to_json(proto::Ping{static_cast<std::uint64_t>(i)});  // named: see request()
    const auto pong = proto::parse_pong(co_await request(n, MsgType::ping, ping, MsgType::pong));
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

// One agent given under two names would both serve and load itself. Sorted, not pairwise:
// thousands of agents.
void Coordinator::refuse_duplicates() const {
  std::vector<std::pair<std::string, std::size_t>> eps;
  eps.reserve(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) eps.emplace_back(nodes_[i].endpoint, i);
  std::ranges::sort(eps);  // by endpoint, then index: the first of two equal ones is the one given first
  const auto it = std::ranges::adjacent_find(eps, {}, &std::pair<std::string, std::size_t>::first);
  if (it != eps.end()) {
    throw Error(ExitCode::usage, fmt::format("{} and {} are the same agent", nodes_[it->second].rec.name,
                                             nodes_[(it + 1)->second].rec.name));
  }
}

// GCC 12 at -O2 takes Asio's coroutine-frame allocation, inlined into this coroutine's ramp, for a
// mismatched new/delete pair: the false positive the sanitizer builds switch off (CMakeLists.txt).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
// The run, phase by phase: a phase that failed on any agent ends it there (throw_if_failed).
asio::awaitable<RunRecord> Coordinator::flow() {
  RunRecord rec;
  rec.spec = req_.spec;  // --socksize auto replaces it before any set-up
  rec.test_id = to_hex(proto::random_token()).substr(0, 16);
  rec.started_at = iso8601_utc_now();

  const std::int64_t t_begin = mono_now_ns();
  co_await phase(
      "connect", [this](Node& n) { return connect(n); }, {}, t_.dial_window);
  spdlog::info("coordinator: connected to {} agents in {:.3f} s", nodes_.size(), seconds_since(t_begin));
  refuse_duplicates();
  if (interrupted_) throw Interrupted("interrupted before the test started");
  co_await phase("clock synchronisation", [this](Node& n) { return sync_clock(n); });
  spdlog::info("coordinator: clocks of {} agents synchronised at {:.3f} s", nodes_.size(), seconds_since(t_begin));
  if (req_.spec.socksize_auto()) co_await auto_socksize(rec);

  const proto::Token token = proto::random_token();
  // RDMA queue pairs exchanged through this control channel (not --rdma-cm).
  const bool rdma_cc = rec.spec.transport() == Transport::rdma && !rec.spec.rdma_cm();
  co_await setup_servers(rec, token, rdma_cc);
  spdlog::info("coordinator: servers set up at {:.3f} s", seconds_since(t_begin));
  co_await setup_clients(rec, token, rdma_cc);
  if (rdma_cc) co_await connect_rdma(rec);
  spdlog::info("coordinator: {} agents set up in {:.3f} s", nodes_.size(), seconds_since(t_begin));
  // Bond sanity findings are worth reading before the numbers arrive.
  for (const auto& n : nodes_) {
    for (const auto& w : n.rec.setup_warnings) {
      if (w.rfind("bond ", 0) == 0) spdlog::warn("{}: {}", n.rec.name, w);
    }
  }
  if (interrupted_) throw Interrupted("interrupted before the test started");

  const Window w = start_test(rec);
  co_await collect(w);
  co_await release();
  rec.interrupted = interrupted_;
  for (auto& n : nodes_) rec.nodes.push_back(n.rec);
  co_return rec;
}
#pragma GCC diagnostic pop

}  // namespace coord

std::vector<AgentLinks> fetch_links(const AgentQuery& query) {
  const RunRequest req = coord::admin_request(query);
  coord::Coordinator c(req);
  std::vector<AgentLinks> out(query.agents.size());
  c.administer([&](coord::Node& n) -> asio::awaitable<void> {
    try {
      static_cast<proto::LinksReply&>(out[n.rec.index]) =
          proto::parse_links(co_await c.request(n, proto::MsgType::links_request, proto::MsgType::links));
    } catch (const ProtocolError& e) {
      throw ProtocolError(fmt::format("agent {}: bad LINKS reply: {}", n.rec.name, e.what()));
    }
  });
  for (const auto& n : c.nodes()) {
    out[n.rec.index].agent = n.rec.name;
    out[n.rec.index].error = n.failure;
  }
  return out;
}

std::vector<AgentShutdown> shutdown_agents(const AgentQuery& query, const std::string& reason) {
  const RunRequest req = coord::admin_request(query);
  coord::Coordinator c(req);
  c.administer([&](coord::Node& n) -> asio::awaitable<void> {
    const auto body = proto::to_json(proto::Shutdown{reason});  // named: see request()
    (void)co_await c.request(n, proto::MsgType::shutdown, body, proto::MsgType::bye);
    n.conn->close();
  });
  std::vector<AgentShutdown> out;
  for (const auto& n : c.nodes()) out.push_back({n.rec.name, n.failure});
  return out;
}

std::uint32_t slot_of(std::vector<std::uint32_t>& v, std::uint32_t h) {
  const auto it = std::ranges::find(v, h);
  if (it != v.end()) return static_cast<std::uint32_t>(it - v.begin());
  v.push_back(h);
  return static_cast<std::uint32_t>(v.size() - 1);
}

void set_host_pairs(RunRequest& req, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& host_pairs,
                    const std::function<HostPort(std::uint32_t)>& endpoint) {
  std::vector<std::uint32_t> cl, sv;
  req.pairs.clear();
  for (const auto& [c, s] : host_pairs) req.pairs.emplace_back(slot_of(cl, c), slot_of(sv, s));
  req.clients.clear();
  req.servers.clear();
  for (const auto h : cl) req.clients.push_back(endpoint(h));
  for (const auto h : sv) req.servers.push_back(endpoint(h));
}

RunRecord run_test(const RunRequest& request) {
  raise_fd_limit();
  return coord::Coordinator(request).run();
}

RunRecord run_test(const RunRequest& request, Dialer& dialer, const CoordinatorTiming& timing) {
  return coord::Coordinator(request, &dialer, timing).run();
}

}  // namespace fabperf
