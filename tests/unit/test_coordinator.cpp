// The coordinator's state machine (run_test over coordinator/dialer.hpp) against scripted agents
// over in-memory connections: a test that runs, a busy agent, one still cleaning up, an agent
// lost after the start, one that only sends heartbeats, one that falls silent, one agent under
// two names. Deadlines are shortened so each case is decided in about a second.
#include "coordinator/dialer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include <fabperf/core/clock.hpp>

#include "common/memory_conn.hpp"

using namespace fabperf;
using namespace std::chrono_literals;
using fabperf::fakes::MemoryConn;
using proto::MsgType;

namespace {

// What a scripted agent does, and what it saw.
struct Script {
  int cleaning_answers = 0;                     // SETUP answered "cleaning" this many times first
  std::optional<proto::ErrorCode> setup_error;  // SETUP refused with this code
  enum class AtStart { result, close, heartbeats_only, silent, drain } at_start = AtStart::result;
  std::chrono::milliseconds drain_for{0};  // AtStart::drain: "draining" heartbeats this long past
                                           // the end, then the RESULT (0: never)
  bool setup_heartbeats_only = false;      // SETUP never answered; heartbeats keep coming
  std::string endpoint;                    // where the dialer says it is ("" = its own)
  // SETUP_CLIENT answered after this long; *busy counts the set-ups under way, *most their peak.
  std::chrono::milliseconds setup_client_takes{0};
  int* busy = nullptr;
  int* most = nullptr;

  std::vector<MsgType> got;  // everything the coordinator sent it, heartbeats left out
  std::string abort_reason;
  [[nodiscard]] int count(MsgType t) const { return static_cast<int>(std::count(got.begin(), got.end(), t)); }
};

asio::awaitable<void> sleep_until_mono(std::int64_t t_ns) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(std::chrono::nanoseconds(std::max<std::int64_t>(0, t_ns - mono_now_ns())));
  error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

// After the test's end, heartbeats that say "draining" every 100 ms for `for_` (forever when 0),
// then `then()`.
asio::awaitable<void> drain_then(std::shared_ptr<MemoryConn> c, std::int64_t end_at, std::chrono::milliseconds for_,
                                 std::function<void()> then) {
  co_await sleep_until_mono(end_at);
  asio::steady_timer t(co_await asio::this_coro::executor);
  const auto until = std::chrono::steady_clock::now() + for_;
  while (c->is_open() && (for_.count() == 0 || std::chrono::steady_clock::now() < until)) {
    c->send(MsgType::heartbeat, nlohmann::json{{"draining", true}});
    t.expires_after(100ms);
    error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (c->is_open()) then();
}

asio::awaitable<void> heartbeat_until_closed(std::shared_ptr<MemoryConn> c) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (c->is_open()) {
    t.expires_after(100ms);
    error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    c->send(MsgType::heartbeat, nlohmann::json::object());
  }
}

// The agent's side of the protocol, as little of it as the coordinator needs.
asio::awaitable<void> scripted_agent(std::shared_ptr<MemoryConn> c, std::string name, Script& s) {
  std::uint32_t node = 0;
  const auto ex = co_await asio::this_coro::executor;
  auto answer_setup = [&]() {
    if (s.setup_heartbeats_only) {
      asio::co_spawn(ex, heartbeat_until_closed(c), asio::detached);
      return false;
    }
    if (s.setup_error) {
      c->send(MsgType::error,
              proto::to_json(proto::ErrorMsg{*s.setup_error, "agent busy: running test 1234 for coordinator other"}));
      return false;
    }
    if (s.cleaning_answers > 0) {
      --s.cleaning_answers;
      c->send(MsgType::error, proto::to_json(proto::ErrorMsg{proto::ErrorCode::cleaning, "still cleaning up"}));
      return false;
    }
    return true;
  };
  auto result = [&](bool aborted) {
    AgentResult r;
    r.node_index = node;
    r.hostname = name;
    r.aborted = aborted;
    r.abort_reason = aborted ? "aborted by coordinator: " + s.abort_reason : "";
    r.window_s = 0.16;
    c->send(MsgType::result, to_json(r));
  };
  try {
    for (;;) {
      auto f = co_await c->read(30s, 30s, proto::kMaxBody);
      if (f.type != MsgType::heartbeat) s.got.push_back(f.type);
      switch (f.type) {
        case MsgType::hello:
          c->send(MsgType::hello_ok, proto::to_json(proto::HelloOk{
                                         proto::kVersion, name, "scripted", 1, proto::local_capabilities(), {}}));
          break;
        case MsgType::ping: {
          const auto p = proto::parse_ping(f.body);
          const auto now = mono_now_ns();
          c->send(MsgType::pong, proto::to_json(proto::Pong{p.seq, now, now, wall_now_ns()}));
          break;
        }
        case MsgType::setup_server:
          node = proto::parse_setup_server(f.body).node_index;
          if (answer_setup()) c->send(MsgType::setup_server_ok, proto::to_json(proto::SetupServerOk{5001, {}, {}}));
          break;
        case MsgType::setup_client:
          node = proto::parse_setup_client(f.body).node_index;
          if (s.busy != nullptr) *s.most = std::max(*s.most, ++*s.busy);
          if (s.setup_client_takes.count() > 0)
            co_await sleep_until_mono(mono_now_ns() + s.setup_client_takes.count() * 1'000'000);
          if (s.busy != nullptr) --*s.busy;
          if (answer_setup()) c->send(MsgType::setup_client_ok, proto::to_json(proto::SetupClientOk{1, {}, {}}));
          break;
        case MsgType::start: {
          const auto m = proto::parse_start(f.body);
          switch (s.at_start) {
            case Script::AtStart::result:
              co_await sleep_until_mono(m.end_at);
              result(false);
              break;
            case Script::AtStart::close: c->close(); co_return;
            case Script::AtStart::heartbeats_only:
              asio::co_spawn(co_await asio::this_coro::executor, heartbeat_until_closed(c), asio::detached);
              break;
            case Script::AtStart::silent: break;
            case Script::AtStart::drain:
              asio::co_spawn(ex, drain_then(c, m.end_at, s.drain_for, [result] { result(false); }), asio::detached);
              break;
          }
          break;
        }
        case MsgType::abort: s.abort_reason = proto::parse_abort(f.body).reason; break;
        case MsgType::bye: co_return;
        default: break;
      }
    }
  } catch (const std::exception&) {
    // The coordinator closed the connection: the script ends with it.
  }
}

class ScriptedDialer final : public Dialer {
 public:
  explicit ScriptedDialer(std::map<std::string, Script>& scripts) : scripts_(scripts) {}
  asio::awaitable<Dialed> dial(const HostPort& hp, const std::string& name) override {
    most_dialling_ = std::max(most_dialling_, ++dialling_);
    co_await sleep_until_mono(mono_now_ns() + 5'000'000);  // a connect takes a while
    --dialling_;
    auto it = scripts_.find(hp.str());
    if (it == scripts_.end()) throw SystemError("cannot reach agent", name, "Connection refused");
    auto [mine, theirs] = MemoryConn::pair(co_await asio::this_coro::executor, "coordinator", name);
    asio::co_spawn(co_await asio::this_coro::executor, scripted_agent(theirs, hp.host, it->second), asio::detached);
    co_return Dialed{mine, "127.0.0.1", it->second.endpoint.empty() ? hp.str() : it->second.endpoint};
  }

  [[nodiscard]] int most_dialling() const { return most_dialling_; }

 private:
  std::map<std::string, Script>& scripts_;
  int dialling_ = 0;
  int most_dialling_ = 0;
};

// Short enough that a stall is decided within a second, long enough for a 0.2 s test.
CoordinatorTiming fast() {
  CoordinatorTiming t;
  t.idle = 1500ms;
  t.frame = 1000ms;
  t.cleaning_wait = 2s;
  t.result_drain = 100ms;
  t.result_grace = 300ms;
  t.result_frame = 1000ms;
  t.answer = 800ms;
  t.drain_max = 1500ms;
  return t;
}

RunRequest request(const std::vector<std::string>& servers, const std::vector<std::string>& clients) {
  RunRequest r;
  SpecParams p;
  p.mode = Mode::stream;
  p.time = 200ms;
  r.spec = TestSpec::make(p);
  for (const auto& s : servers) r.servers.push_back(parse_host_port(s, "server"));
  for (const auto& c : clients) r.clients.push_back(parse_host_port(c, "client"));
  r.interval = 50ms;
  return r;
}

const NodeRecord& node(const RunRecord& r, const std::string& name) {
  for (const auto& n : r.nodes) {
    if (n.name == name) return n;
  }
  throw std::runtime_error("no node " + name);
}

std::string error_of_run(const RunRequest& req, Dialer& d) {
  try {
    (void)run_test(req, d, fast());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Coordinator, TwoAgentsSetUpStartAndReport) {
  std::map<std::string, Script> scripts{{"s1:6668", {}}, {"c1:6668", {}}};
  ScriptedDialer d(scripts);
  const auto t0 = std::chrono::steady_clock::now();
  const RunRecord r = run_test(request({"s1"}, {"c1"}), d, fast());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  ASSERT_EQ(r.nodes.size(), 2u);
  for (const auto& n : r.nodes) {
    EXPECT_EQ(n.status, NodeStatus::ok) << n.name << ": " << n.error;
    ASSERT_TRUE(n.result) << n.name;
    EXPECT_EQ(n.result->hostname, n.name == "s1:6668" ? "s1" : "c1");
  }
  const auto& s = scripts.at("s1:6668");
  const auto& c = scripts.at("c1:6668");
  EXPECT_EQ(s.count(MsgType::hello), 1);
  EXPECT_EQ(s.count(MsgType::ping), 8);  // the clock exchange
  EXPECT_EQ(s.count(MsgType::setup_server), 1);
  EXPECT_EQ(c.count(MsgType::setup_client), 1);
  EXPECT_EQ(s.count(MsgType::start), 1);
  EXPECT_EQ(c.count(MsgType::start), 1);
  EXPECT_EQ(s.count(MsgType::bye), 1);
  EXPECT_EQ(s.count(MsgType::abort), 0);
}

TEST(Coordinator, ABusyAgentFailsTheSetUpNamingItAndTheOthersAreReleased) {
  std::map<std::string, Script> scripts{{"s1:6668", {}}, {"s2:6668", {}}, {"c1:6668", {}}};
  scripts["s2:6668"].setup_error = proto::ErrorCode::busy;
  ScriptedDialer d(scripts);
  const auto msg = error_of_run(request({"s1", "s2"}, {"c1"}), d);
  EXPECT_NE(msg.find("agent s2:6668: agent busy: running test 1234 for coordinator other"), std::string::npos) << msg;
  // The set-up stopped at the servers: the healthy server was told to release its test, the
  // client was never set up, nobody was started.
  EXPECT_EQ(scripts["s1:6668"].count(MsgType::abort), 1);
  EXPECT_NE(scripts["s1:6668"].abort_reason.find("failed on another agent"), std::string::npos);
  EXPECT_EQ(scripts["c1:6668"].count(MsgType::setup_client), 0);
  for (const auto& [name, s] : scripts) EXPECT_EQ(s.count(MsgType::start), 0) << name;
}

TEST(Coordinator, AnAgentStillCleaningIsAskedAgainUntilItIsFree) {
  std::map<std::string, Script> scripts{{"s1:6668", {}}, {"c1:6668", {}}};
  scripts["s1:6668"].cleaning_answers = 2;
  ScriptedDialer d(scripts);
  const RunRecord r = run_test(request({"s1"}, {"c1"}), d, fast());
  EXPECT_EQ(scripts["s1:6668"].count(MsgType::setup_server), 3);
  EXPECT_EQ(node(r, "s1:6668").status, NodeStatus::ok);

  std::map<std::string, Script> forever{{"s1:6668", {}}, {"c1:6668", {}}};
  forever["s1:6668"].cleaning_answers = 1000;
  ScriptedDialer d2(forever);
  const auto msg = error_of_run(request({"s1"}, {"c1"}), d2);  // gives up after cleaning_wait (2 s)
  EXPECT_NE(msg.find("agent s1:6668: still cleaning up"), std::string::npos) << msg;
}

TEST(Coordinator, AnAgentLostAfterTheStartIsMarkedAndTheOthersAreReported) {
  std::map<std::string, Script> scripts{{"s1:6668", {}}, {"c1:6668", {}}, {"c2:6668", {}}};
  scripts["c2:6668"].at_start = Script::AtStart::close;
  ScriptedDialer d(scripts);
  const RunRecord r = run_test(request({"s1"}, {"c1", "c2"}), d, fast());
  EXPECT_EQ(node(r, "c2:6668").status, NodeStatus::lost);
  EXPECT_FALSE(node(r, "c2:6668").result);
  EXPECT_EQ(node(r, "c1:6668").status, NodeStatus::ok);
  EXPECT_TRUE(node(r, "c1:6668").result);
  EXPECT_EQ(node(r, "s1:6668").status, NodeStatus::ok);
}

TEST(Coordinator, HeartbeatsWithoutAResultAreAStallAfterTheGrace) {
  std::map<std::string, Script> scripts{{"s1:6668", {}}, {"c1:6668", {}}};
  scripts["c1:6668"].at_start = Script::AtStart::heartbeats_only;
  ScriptedDialer d(scripts);
  const RunRecord r = run_test(request({"s1"}, {"c1"}), d, fast());
  const auto& c = node(r, "c1:6668");
  EXPECT_EQ(c.status, NodeStatus::stalled);
  EXPECT_NE(c.error.find("no RESULT within 0.4 s of the test's end (it still sent heartbeats)"), std::string::npos)
      << c.error;
  EXPECT_EQ(node(r, "s1:6668").status, NodeStatus::ok);
}

// Issue 28: an agent that answers SETUP with heartbeats only held `run` (and the monitor) forever.
// The answer has its own deadline; the agent is named, the others released, nothing started.
TEST(Coordinator, HeartbeatsInsteadOfASetUpAnswerAreBounded) {
  std::map<std::string, Script> scripts{{"s1:6668", {}}, {"c1:6668", {}}};
  scripts["s1:6668"].setup_heartbeats_only = true;
  ScriptedDialer d(scripts);
  const auto t0 = std::chrono::steady_clock::now();
  const auto msg = error_of_run(request({"s1"}, {"c1"}), d);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);  // answer 0.8 s, heartbeats every 0.1 s
  EXPECT_NE(msg.find("SETUP_SERVER_OK from agent s1:6668: no answer within 0.8 s (it sent only heartbeats)"),
            std::string::npos)
      << msg;
  for (const auto& [name, s] : scripts) EXPECT_EQ(s.count(MsgType::start), 0) << name;
}

// An agent whose connections still drain after the stop (the grid's 10 Mbit/s link with 8 x 4 MB
// of socket buffers: 26 s) says so in its heartbeats; its RESULT is waited for, up to drain_max
// past the allowance. Before, such a node was reported stalled and its counters lost.
TEST(Coordinator, ADrainingAgentIsWaitedForUpToTheDrainLimit) {
  std::map<std::string, Script> scripts{{"s1:6668", {}}, {"c1:6668", {}}};
  scripts["c1:6668"].at_start = Script::AtStart::drain;
  scripts["c1:6668"].drain_for = 1000ms;  // past drain 0.1 s + grace 0.3 s, within drain_max 1.5 s
  ScriptedDialer d(scripts);
  RunRecord r = run_test(request({"s1"}, {"c1"}), d, fast());
  EXPECT_EQ(node(r, "c1:6668").status, NodeStatus::ok) << node(r, "c1:6668").error;
  EXPECT_TRUE(node(r, "c1:6668").result);
  // "Draining" forever is still bounded: stalled once drain_max is spent.
  std::map<std::string, Script> forever{{"s1:6668", {}}, {"c1:6668", {}}};
  forever["c1:6668"].at_start = Script::AtStart::drain;
  ScriptedDialer d2(forever);
  const auto t0 = std::chrono::steady_clock::now();
  r = run_test(request({"s1"}, {"c1"}), d2, fast());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(node(r, "c1:6668").status, NodeStatus::stalled);
  EXPECT_EQ(node(r, "s1:6668").status, NodeStatus::ok);
  // The message names the extended bound it was given, not the usual 0.4 s (drain + grace).
  EXPECT_NE(node(r, "c1:6668").error.find("no RESULT within 1."), std::string::npos) << node(r, "c1:6668").error;
}

TEST(Coordinator, ASilentAgentIsAStallByTheIdleDeadline) {
  std::map<std::string, Script> scripts{{"s1:6668", {}}, {"c1:6668", {}}};
  scripts["s1:6668"].at_start = Script::AtStart::silent;
  CoordinatorTiming t = fast();
  t.result_grace = 5s;  // the idle deadline (1.5 s) decides, not the grace
  ScriptedDialer d(scripts);
  const RunRecord r = run_test(request({"s1"}, {"c1"}), d, t);
  const auto& s = node(r, "s1:6668");
  EXPECT_EQ(s.status, NodeStatus::stalled);
  EXPECT_NE(s.error.find("no message within 1.5 s"), std::string::npos) << s.error;
  EXPECT_EQ(node(r, "c1:6668").status, NodeStatus::ok);
}

TEST(Coordinator, OneAgentUnderTwoNamesIsRefusedBeforeAnySetUp) {
  std::map<std::string, Script> scripts{{"s1:6668", {}}, {"c1:6668", {}}};
  scripts["c1:6668"].endpoint = "s1:6668";  // c1 resolves to the same agent as s1
  ScriptedDialer d(scripts);
  const auto msg = error_of_run(request({"s1"}, {"c1"}), d);
  EXPECT_NE(msg.find("s1:6668 and c1:6668 are the same agent"), std::string::npos) << msg;
  for (const auto& [name, s] : scripts) EXPECT_EQ(s.count(MsgType::setup_server), 0) << name;
}

TEST(Coordinator, AnUnreachableAgentFailsTheConnectNamingIt) {
  std::map<std::string, Script> scripts{{"s1:6668", {}}};
  ScriptedDialer d(scripts);
  const auto msg = error_of_run(request({"s1"}, {"c9"}), d);
  EXPECT_NE(msg.find("c9:6668"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Connection refused"), std::string::npos) << msg;
  EXPECT_EQ(scripts["s1:6668"].count(MsgType::setup_server), 0);
}

// A big test is dialled and set up a window at a time: agents' pre-authentication and servers'
// handshake deadlines run from the accept, and a thousand begun together on one small host missed them.
TEST(Coordinator, DialsAndClientSetUpsRunAWindowAtATime) {
  std::map<std::string, Script> scripts{{"s1:6668", {}}};
  int busy = 0;
  int most = 0;
  std::vector<std::string> clients;
  for (int i = 0; i < 40; ++i) {
    clients.push_back("c" + std::to_string(i));
    auto& s = scripts[clients.back() + ":6668"];
    s.setup_client_takes = 20ms;
    s.busy = &busy;
    s.most = &most;
  }
  ScriptedDialer d(scripts);
  CoordinatorTiming t = fast();
  t.dial_window = 6;
  t.setup_connections = 1;  // one connection per client: the floor of 16 clients at once
  const RunRecord r = run_test(request({"s1"}, clients), d, t);
  for (const auto& n : r.nodes) EXPECT_EQ(n.status, NodeStatus::ok) << n.name << ": " << n.error;
  EXPECT_EQ(d.most_dialling(), 6);
  EXPECT_EQ(most, 16);
  EXPECT_EQ(busy, 0);
}
