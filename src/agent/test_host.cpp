#include "agent/test_host.hpp"

#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>

#include "agent/result_fit.hpp"
#include "sysinfo/file_read.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <algorithm>

namespace fabperf {
namespace {

using proto::MsgType;

// What one test may make an agent spend besides memory (reserve): a thread per data connection,
// and RDMA queue pairs. The systemd unit's TasksMax leaves room for these.
constexpr std::uint64_t kMaxDataThreads = 10000;
constexpr std::uint64_t kMaxQueuePairs = 4096;
// Descriptors kept out of tests' reach: control sessions, listeners, logs, /proc and /sys reads.
constexpr std::uint64_t kReservedDescriptors = 256;

// How many descriptors a test's connections may use under this process's RLIMIT_NOFILE.
std::uint64_t descriptor_room() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  return rl.rlim_cur > kReservedDescriptors ? rl.rlim_cur - kReservedDescriptors : 0;
}

// A coordinator-chosen congestion control must be one the host already offers: setting another
// one makes the kernel try to load module tcp_<name> (with CAP_NET_ADMIN it succeeds).
std::optional<std::string> congestion_problem(const std::string& name) {
  if (name.empty()) return std::nullopt;
  const std::string available = sysfs::read_line("/proc/sys/net/ipv4/tcp_available_congestion_control");
  if (std::ranges::count(sysfs::words(available), name) > 0) return std::nullopt;
  return fmt::format("--congestion {}: not offered by this host (available: {}); load it as root first if it is wanted",
                     name, available.empty() ? "unknown" : available);
}

// The most time-series intervals one test may ask for: an hour at the smallest interval (10 ms).
constexpr std::int64_t kMaxIntervals = 360'000;

// What is wrong with a START's schedule for this test, judged on the schedule itself (what the
// agent will actually run): it may last no longer than the test's time (which SETUP already held
// to --max-duration) nor than --max-duration, and may not ask for more intervals than
// kMaxIntervals. The order of its instants is checked when it is parsed.
std::optional<std::string> schedule_problem(const proto::Start& m, std::chrono::nanoseconds test_time,
                                            std::chrono::seconds max_duration) {
  const std::int64_t runs = m.end_at - m.start_at;
  const auto secs = [](std::int64_t ns) { return static_cast<double>(ns) / 1e9; };
  if (runs > std::chrono::nanoseconds(max_duration).count()) {
    return fmt::format("schedule runs {:.3f} s, longer than this agent's --max-duration {} s", secs(runs),
                       max_duration.count());
  }
  if (runs > test_time.count()) {
    return fmt::format("schedule runs {:.3f} s, longer than the test's time {:.3f} s", secs(runs),
                       secs(test_time.count()));
  }
  if (runs / m.interval_ns > kMaxIntervals) {
    return fmt::format("schedule asks for {} intervals of {:.3f} s, more than {}", runs / m.interval_ns,
                       secs(m.interval_ns), kMaxIntervals);
  }
  return std::nullopt;
}

}  // namespace

void send_error(proto::MessageSink& peer, proto::ErrorCode code, std::string message) {
  spdlog::warn("agent: to {}: {}", peer.peer(), message);
  peer.send(MsgType::error, proto::to_json(proto::ErrorMsg{code, std::move(message)}));
}

// One test held by one session, from the first SETUP to the RESULT (or abort).
struct TestHost::TestState {
  std::string test_id;
  std::string owner;  // coordinator description for "busy" errors
  std::string since;
  std::unique_ptr<RunContext> ctx;
  std::unique_ptr<Engine> engine;
  std::shared_ptr<TestRun> run;
  bool server_ready{false};
  bool client_ready{false};
  std::uint64_t buffer_bytes{0};  // reserved by the roles set up so far (--max-buffer-memory)
  std::uint64_t threads{0};       // data threads, against kMaxDataThreads
  std::uint64_t descriptors{0};   // data connections' descriptors, against RLIMIT_NOFILE
  std::uint64_t queue_pairs{0};   // RDMA, against kMaxQueuePairs
  // What the pool does with this test: nothing yet, START's work (a release asked for meanwhile
  // waits for it: start_then_release), or the release (release_async() scheduled it once).
  enum class Pool { idle, starting, start_then_release, releasing } pool{Pool::idle};
  std::int64_t end_at{0};  // the started run's end, on this host's clock (0: not started)
};

TestHost::TestHost(asio::io_context& io, asio::thread_pool& pool, TestHostLimits limits, EngineFactory make_engine,
                   std::string hostname, std::function<void()> on_idle)
    : io_(io),
      pool_(pool),
      limits_(limits),
      make_engine_(std::move(make_engine)),
      hostname_(std::move(hostname)),
      on_idle_(std::move(on_idle)) {}

std::optional<std::string> TestHost::held_by_other(const proto::MessageSink* peer) const {
  if (!owner_ || owner_ == peer) return std::nullopt;
  return fmt::format("running test {} for coordinator {}", test_->test_id, test_->owner);
}

// Claims the agent for this session or explains who holds it. Returns false when busy.
bool TestHost::claim(proto::MessageSink& peer, const std::string& who, const std::string& test_id,
                     const TestSpec& spec) {
  const auto refuse = [&peer](proto::ErrorCode code, std::string why) {
    send_error(peer, code, std::move(why));
    return false;
  };
  if (const auto other = held_by_other(&peer))
    return refuse(proto::ErrorCode::busy, fmt::format("agent busy: {} since {}", *other, test_->since));
  // Its own code: a coordinator waits for this one (Coordinator::setup_exchange) and not for "busy".
  if (!owner_ && test_)
    return refuse(proto::ErrorCode::cleaning, "agent busy: still cleaning up the previous test, retry in a moment");
  if (spec.time() > limits_.max_duration) {
    return refuse(proto::ErrorCode::limit,
                  fmt::format("test time {} s exceeds this agent's --max-duration {} s",
                              spec.time().count() / 1'000'000'000, limits_.max_duration.count()));
  }
  if (test_ && (test_->test_id != test_id || test_->run))
    return refuse(proto::ErrorCode::protocol, fmt::format("test {} is already set up on this agent", test_->test_id));
  if (!test_) {
    test_ = std::make_shared<TestState>();
    test_->test_id = test_id;
    test_->owner = who;
    test_->since = wall_clock_text("%H:%M:%S", false);
    owner_ = &peer;
  }
  return true;
}

// Reserves what a role will spend: buffer memory (and RDMA queue memory), data threads, file
// descriptors and queue pairs. Throws Error naming the limit when one would be exceeded, so a
// test this agent cannot carry is refused at set-up, never half-started.
// `descriptors`: the role's sockets (a client's also count its delay probe per server).
void TestHost::reserve(const TestSpec& spec, std::uint64_t flows, std::uint64_t descriptors, const char* role) {
  const bool rdma = spec.transport() == Transport::rdma;
  // RDMA: per queue pair a CQ of 4*qdepth entries, send and receive queues of 2*qdepth work
  // requests and the send loop's prepared work requests: about 1 KiB per unit of qdepth.
  const std::uint64_t queues = rdma ? flows * spec.qdepth() * 1024 : 0;
  const std::uint64_t need = estimate_buffer_memory(spec, flows) + queues;
  if (test_->buffer_bytes + need > limits_.max_buffer_memory) {
    throw Error(
        ExitCode::usage,
        fmt::format("{} role needs {} MiB of buffers{} ({} connections, buffsize {}), more than this agent's "
                    "--max-buffer-memory {} MiB",
                    role, (test_->buffer_bytes + need + (1u << 20) - 1) >> 20, rdma ? " and queue pair memory" : "",
                    flows, spec.buffsize(), limits_.max_buffer_memory >> 20));
  }
  // One data thread per connection (TCP and RDMA alike), plus rpc's testers.
  const std::uint64_t threads = flows + (spec.mode() == Mode::rpc ? spec.threads() : 0);
  if (test_->threads + threads > kMaxDataThreads) {
    throw Error(ExitCode::usage, fmt::format("{} role needs {} data threads ({} connections), more than this agent's "
                                             "limit of {} per test",
                                             role, test_->threads + threads, flows, kMaxDataThreads));
  }
  if (rdma && test_->queue_pairs + flows > kMaxQueuePairs) {
    throw Error(ExitCode::usage,
                fmt::format("{} role needs {} RDMA queue pairs, more than this agent's limit of {} per test", role,
                            test_->queue_pairs + flows, kMaxQueuePairs));
  }
  const std::uint64_t fd_room = limits_.descriptors ? *limits_.descriptors : descriptor_room();
  if (test_->descriptors + descriptors > fd_room) {
    throw Error(ExitCode::usage, fmt::format("{} role needs {} file descriptors ({} connections), more than this agent "
                                             "may open (RLIMIT_NOFILE leaves {} for tests)",
                                             role, test_->descriptors + descriptors, descriptors, fd_room));
  }
  test_->buffer_bytes += need;
  test_->threads += threads;
  test_->descriptors += descriptors;
  if (rdma) test_->queue_pairs += flows;
}

void TestHost::ensure_engine(const TestSpec& spec, std::uint32_t node_index) {
  if (!test_->ctx) {
    if (auto why = congestion_problem(spec.congestion())) throw Error(ExitCode::usage, *why);
    test_->ctx = std::make_unique<RunContext>(spec, node_index, hostname_);
    test_->engine = make_engine_(spec.transport());
  } else if (!(test_->ctx->spec() == spec) || test_->ctx->node_index() != node_index) {
    throw ProtocolError("server and client set-up of one test disagree on the spec or node index");
  }
}

// A set-up that failed ends the test: the peer is told, whatever was prepared is released.
void TestHost::setup_failed(proto::MessageSink& peer, const std::string& what) {
  send_error(peer, proto::ErrorCode::setup_failed, what);
  if (owner_ == &peer) drop();
}

// The test is no longer anybody's: it is released.
void TestHost::drop() {
  owner_ = nullptr;
  release_async();
}

asio::awaitable<void> TestHost::setup_server(PeerPtr peer, std::string who, proto::SetupServer m,
                                             std::string bind_address) {
  if (!claim(*peer, who, m.test_id, m.spec)) co_return;
  auto state = test_;
  std::uint16_t port = 0;
  std::vector<proto::RdmaEndpoint> endpoints;
  try {
    ensure_engine(m.spec, m.node_index);
    if (state->server_ready) throw ProtocolError("server role already set up");
    const std::string control_address = bind_address;
    if (m.any_address) bind_address = bind_address.find(':') == std::string::npos ? "0.0.0.0" : "::";
    reserve(m.spec, m.expect_connections, m.expect_connections, "server");
    ServerPlan plan{bind_address,    m.token,  m.expect_connections, m.rdma_clients, m.link_addrs,
                    control_address, m.test_id};
    co_await on_pool(pool_, [&] {
      port = state->engine->prepare_server(*state->ctx, plan);
      if (auto* x = state->engine->endpoint_exchange()) endpoints = x->take_endpoints();
    });
    state->server_ready = true;
  } catch (const std::exception& e) {
    setup_failed(*peer, fmt::format("server set-up failed: {}", e.what()));
    co_return;
  }
  spdlog::info("agent: test {}: serving data on {} port {}", m.test_id, bind_address, port);
  peer->send(MsgType::setup_server_ok,
             proto::to_json(proto::SetupServerOk{port, state->ctx->warnings(), std::move(endpoints)}));
}

asio::awaitable<void> TestHost::setup_client(PeerPtr peer, std::string who, proto::SetupClient m) {
  if (!claim(*peer, who, m.test_id, m.spec)) co_return;
  auto state = test_;
  std::vector<proto::RdmaEndpoint> endpoints;
  try {
    ensure_engine(m.spec, m.node_index);
    if (state->client_ready) throw ProtocolError("client role already set up");
    const std::uint64_t per_pair = m.spec.connections_per_pair();
    // TCP opens one more connection per server for the delay probe.
    const std::uint64_t sockets = m.targets.size() * (per_pair + (m.spec.transport() == Transport::tcp ? 1 : 0));
    reserve(m.spec, std::uint64_t{m.targets.size()} * per_pair, sockets, "client");
    ClientPlan plan{derive_client_token(m.token, m.node_index), m.targets, m.source_addrs, m.bind_devs, m.test_id};
    co_await on_pool(pool_, [&] {
      state->engine->prepare_client(*state->ctx, plan);
      if (auto* x = state->engine->endpoint_exchange()) endpoints = x->take_endpoints();
    });
    state->client_ready = true;
  } catch (const std::exception& e) {
    setup_failed(*peer, fmt::format("client set-up failed: {}", e.what()));
    co_return;
  }
  peer->send(MsgType::setup_client_ok,
             proto::to_json(proto::SetupClientOk{static_cast<std::uint32_t>(state->ctx->flow_count()),
                                                 state->ctx->warnings(), std::move(endpoints)}));
}

// The clients' queue pair endpoints for this server's queue pairs (after every SETUP_CLIENT).
asio::awaitable<void> TestHost::rdma_connect(PeerPtr peer, proto::RdmaConnect m) {
  if (owner_ != peer.get() || !test_ || test_->test_id != m.test_id || !test_->server_ready || test_->run) {
    send_error(
        *peer, proto::ErrorCode::protocol,
        fmt::format("RDMA_CONNECT for test {}, which this coordinator has not set up here as a server", m.test_id));
    co_return;
  }
  auto state = test_;
  std::size_t ready = 0;
  try {
    auto* x = state->engine->endpoint_exchange();
    if (!x) {
      throw ProtocolError(
          fmt::format("RDMA_CONNECT: the {} transport has no queue pairs to connect", state->engine->name()));
    }
    co_await on_pool(pool_, [&] { ready = x->connect_endpoints(*state->ctx, m.endpoints); });
  } catch (const std::exception& e) {
    setup_failed(*peer, fmt::format("RDMA queue pair set-up failed: {}", e.what()));
    co_return;
  }
  peer->send(MsgType::rdma_connect_ok, proto::to_json(proto::RdmaConnectOk{static_cast<std::uint32_t>(ready)}));
}

asio::awaitable<void> TestHost::start(PeerPtr peer, proto::Start m) {
  if (owner_ != peer.get() || !test_ || test_->run || !(test_->server_ready || test_->client_ready)) {
    send_error(*peer, proto::ErrorCode::protocol, "START without a test set up by this coordinator");
    co_return;
  }
  const std::int64_t now = mono_now_ns();
  std::string bad_schedule;
  proto::ErrorCode code = proto::ErrorCode::protocol;
  if (m.end_at < now) {
    // On a host so loaded that the START waited out the whole test (1,024 agents on 2 cores).
    bad_schedule = fmt::format(
        "START: arrived {:.1f} s after the test's end on this agent's clock (an overloaded host, or a clock that "
        "jumped)",
        static_cast<double>(now - m.end_at) / 1e9);
  } else if (m.start_at > now + 60'000'000'000LL) {
    bad_schedule = "START: schedule is not within the next minute of this agent's clock";
  } else if (auto why = schedule_problem(m, test_->ctx->spec().time(), limits_.max_duration)) {
    bad_schedule = "START: " + *why;
    code = proto::ErrorCode::limit;
  }
  if (!bad_schedule.empty()) {
    send_error(*peer, code, bad_schedule);
    drop();
    co_return;
  }
  Schedule s{m.start_at, m.window_open, m.window_close, m.end_at, m.interval_ns};
  auto state = test_;
  state->end_at = m.end_at;
  state->run = std::make_shared<TestRun>(std::move(state->engine), std::move(state->ctx));
  state->pool = TestState::Pool::starting;
  std::string error;
  try {
    co_await on_pool(pool_, [&] { start_run(state, s, peer); });
  } catch (const std::exception& e) {
    error = e.what();
  }
  bool release = state->pool == TestState::Pool::start_then_release;
  state->pool = TestState::Pool::idle;
  if (!error.empty()) {
    // E.g. std::system_error from std::thread: a host out of threads. The test is refused, the
    // agent lives on (release_async joins whatever did start).
    send_error(*peer, proto::ErrorCode::start_failed,
               fmt::format("test {} could not start: {}", state->test_id, error));
    state->run->abort(fmt::format("could not start: {}", error));
    if (test_ == state) owner_ = nullptr;
    release = true;
  }
  if (release && test_ == state) release_async();
}

void TestHost::start_run(const std::shared_ptr<TestState>& state, const Schedule& s,
                         const std::weak_ptr<proto::MessageSink>& weak) {
  state->run->start(s, [this, weak, state](AgentResult r) {
    // Encoded here, on the run's driver thread: a server's result of a thousand connections took
    // the I/O thread long enough on a loaded host that its heartbeats stopped for 5 s and the
    // coordinator gave the agent up (bench-scale, 1,024 agents on 2 cores).
    std::optional<nlohmann::json> body;
    std::string failed;
    try {
      fit_result(r, proto::kMaxBody);
      body = to_json(r);
    } catch (const std::exception& e) {
      failed = e.what();
    }
    const std::string ended = r.aborted ? " (aborted: " + r.abort_reason + ")" : "";
    asio::post(io_, [this, weak, state, body = std::move(body), failed = std::move(failed), ended] {
      if (auto c = weak.lock(); c && c->is_open()) {
        if (body) {
          c->send(MsgType::result, *body);
        } else {
          send_error(*c, proto::ErrorCode::result, fmt::format("result could not be sent: {}", failed));
        }
      }
      spdlog::info("agent: test {} finished{}", state->test_id, ended);
      if (test_ == state) drop();
    });
  });
}

bool TestHost::draining(const proto::MessageSink* peer) const {
  return owned_by(peer) && test_ && test_->run && test_->end_at > 0 && mono_now_ns() > test_->end_at;
}

std::optional<std::uint64_t> TestHost::received(const proto::MessageSink* peer) const {
  if (!owned_by(peer) || !test_ || !test_->run) return std::nullopt;
  return test_->run->context().received_bytes();
}

void TestHost::abort(const proto::MessageSink* peer, const std::string& reason) {
  if (owner_ != peer || !test_) return;
  spdlog::warn("agent: test aborted by coordinator: {}", reason);
  if (test_->run) {
    test_->run->abort("aborted by coordinator: " + reason);
  } else {
    drop();
  }
}

void TestHost::session_ended(const proto::MessageSink* peer, const std::string& who, const std::string& why) {
  if (owner_ != peer || owner_ == nullptr) return;
  // The coordinator is gone: nothing may keep sending on its behalf.
  spdlog::warn("agent: lost coordinator {} during a test ({}): stopping all traffic", who, why);
  if (test_ && test_->run) test_->run->abort("coordinator connection lost");
  drop();
}

void TestHost::stop(const std::string& why) {
  if (!test_) return;
  if (test_->run) test_->run->abort("agent stopped: " + why);
  release_async();
}

// Joins every thread and closes every socket of the current test off the I/O thread, then marks
// the agent free.
void TestHost::release_async() {
  // Both the lost session and the finished run may ask for the release: join only once (two
  // concurrent joins of the same threads are undefined behaviour and hung the agent). While START
  // still starts threads on the pool, the release waits for it.
  if (!test_) return;
  if (test_->pool == TestState::Pool::starting) test_->pool = TestState::Pool::start_then_release;
  if (test_->pool != TestState::Pool::idle) return;
  test_->pool = TestState::Pool::releasing;
  auto state = test_;
  asio::post(pool_, [this, state] {
    if (state->run) {
      state->run->finish();
    } else if (state->engine) {
      state->engine->abort();
      state->engine->join();
    }
    asio::post(io_, [this, state] {
      if (test_ == state) test_.reset();
      if (!test_ && on_idle_) on_idle_();
    });
  });
}

}  // namespace fabperf
