// The agent's test state machine (src/agent/test_host.hpp) without a network: coordinators are
// in-memory peers that record what the agent sends them, the engine is a fake whose flows count
// on their own threads. Set-up, start, result, busy, cleaning, limits, a lost coordinator, an
// abort and the agent's own stop, each in well under a second.
#include "agent/test_host.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include <fabperf/core/clock.hpp>

#include "common/fake_engine.hpp"

using namespace fabperf;
using namespace std::chrono_literals;
using fabperf::fakes::FakeEngine;
using fabperf::fakes::FakeEngineLog;
using fabperf::fakes::FakeEngineOptions;
using proto::MsgType;

namespace {

// A coordinator's end of a control session, kept in memory.
class MemoryPeer final : public proto::MessageSink {
 public:
  explicit MemoryPeer(std::string name) : name_(std::move(name)) {}
  void send(MsgType type, const nlohmann::json& body) override {
    if (open_) got.push_back(proto::Frame{type, body});
  }
  [[nodiscard]] bool is_open() const override { return open_; }
  [[nodiscard]] const std::string& peer() const override { return name_; }
  void close() { open_ = false; }

  [[nodiscard]] int count(MsgType t) const {
    int n = 0;
    for (const auto& f : got) n += f.type == t ? 1 : 0;
    return n;
  }
  // The last ERROR received (fails the test when there is none).
  [[nodiscard]] proto::ErrorMsg last_error() const {
    for (auto it = got.rbegin(); it != got.rend(); ++it) {
      if (it->type == MsgType::error) return proto::parse_error(it->body);
    }
    ADD_FAILURE() << name_ << " got no ERROR";
    return {};
  }
  std::vector<proto::Frame> got;

 private:
  std::string name_;
  bool open_{true};
};

TestSpec spec_of(std::chrono::milliseconds time) {
  SpecParams p;
  p.mode = Mode::stream;
  p.time = time;
  p.buffsize = 64 * 1024;
  return TestSpec::make(p);
}

proto::SetupServer server_setup(const std::string& id, const TestSpec& spec, std::uint32_t connections = 1) {
  proto::SetupServer m;
  m.test_id = id;
  m.spec = spec;
  m.expect_connections = connections;
  return m;
}

proto::SetupClient client_setup(const std::string& id, const TestSpec& spec) {
  proto::SetupClient m;
  m.test_id = id;
  m.spec = spec;
  m.targets = {proto::Target{0, "127.0.0.1", 5001, {}, {}}};
  return m;
}

// A schedule for a run of `run` starting 20 ms from now (the agent refuses one not within the
// next minute of its clock).
proto::Start schedule(std::chrono::milliseconds run, std::int64_t lead_ns = 20'000'000) {
  const std::int64_t t0 = mono_now_ns() + lead_ns;
  const std::int64_t r = std::chrono::nanoseconds(run).count();
  return proto::Start{t0, t0 + r / 10, t0 + r * 9 / 10, t0 + r, r / 4};
}

struct Harness {
  explicit Harness(FakeEngineOptions o = {}, TestHostLimits l = {}) : opts(std::move(o)), limits(l) {}
  ~Harness() {
    host.stop("test over");
    (void)drive_until([&] { return host.idle(); });
    pool.join();  // nothing the host posted may outlive it
  }

  // Runs io until done() holds or `limit` passes; false then.
  template <typename P>
  bool drive_until(P done, std::chrono::milliseconds limit = 10s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      io.restart();
      if (io.run_for(5ms) == 0) std::this_thread::sleep_for(1ms);
    }
    return true;
  }
  // One of the host's coroutines, to its end.
  void run(asio::awaitable<void> a) {
    bool done = false;
    asio::co_spawn(io, std::move(a), [&](const std::exception_ptr& e) {
      EXPECT_FALSE(e) << "the host's handler threw";
      done = true;
    });
    EXPECT_TRUE(drive_until([&] { return done; }));
  }

  asio::io_context io;
  asio::thread_pool pool{1};
  FakeEngineOptions opts;
  TestHostLimits limits;
  std::shared_ptr<FakeEngineLog> log = std::make_shared<FakeEngineLog>();
  int idle_calls = 0;
  TestHost host{io,         pool,
                limits,     [this](Transport) { return std::make_unique<FakeEngine>(opts, log); },
                "fakehost", [this] { ++idle_calls; }};
};

}  // namespace

TEST(TestHost, SetUpStartResultThenIdle) {
  Harness h(FakeEngineOptions{.flows = 2, .port = 5001});
  auto a = std::make_shared<MemoryPeer>("A");
  const auto spec = spec_of(200ms);
  h.run(h.host.setup_server(a, "A", server_setup("t1", spec), "127.0.0.1"));
  ASSERT_EQ(a->count(MsgType::setup_server_ok), 1);
  EXPECT_EQ(a->got.back().body.at("data_port"), 5001);
  h.run(h.host.setup_client(a, "A", client_setup("t1", spec)));
  ASSERT_EQ(a->count(MsgType::setup_client_ok), 1);
  EXPECT_EQ(a->got.back().body.at("connections"), 2);
  EXPECT_TRUE(h.host.owned_by(a.get()));
  h.run(h.host.start(a, schedule(200ms)));
  ASSERT_TRUE(h.drive_until([&] { return a->count(MsgType::result) == 1; }));
  const auto& r = a->got.back().body;
  EXPECT_FALSE(r.at("aborted").get<bool>());
  EXPECT_EQ(r.at("flows").size(), 2u);
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }));
  EXPECT_EQ(h.idle_calls, 1);
  EXPECT_FALSE(h.host.owned_by(a.get()));
  EXPECT_EQ(h.log->starts.load(), 1);
  EXPECT_EQ(a->count(MsgType::error), 0);
}

// START's work runs on the pool: while a server's thousand data threads start, the I/O thread
// still answers (heartbeats, other sessions).
TEST(TestHost, TheIOThreadAnswersWhileStartStartsTheDataThreads) {
  std::promise<void> go;
  Harness h(FakeEngineOptions{.flows = 1, .hold_start = go.get_future().share()});
  auto a = std::make_shared<MemoryPeer>("A");
  auto b = std::make_shared<MemoryPeer>("B");
  h.run(h.host.setup_client(a, "A", client_setup("t1", spec_of(200ms))));
  bool started = false;
  asio::co_spawn(h.io, h.host.start(a, schedule(200ms)), [&](const std::exception_ptr&) { started = true; });
  h.run(h.host.setup_server(b, "B", server_setup("t2", spec_of(200ms)), "127.0.0.1"));
  EXPECT_EQ(b->last_error().code, proto::ErrorCode::busy);
  EXPECT_FALSE(started);
  go.set_value();
  ASSERT_TRUE(h.drive_until([&] { return a->count(MsgType::result) == 1; }));
  EXPECT_TRUE(started);
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }));
  EXPECT_EQ(a->count(MsgType::error), 0);
}

TEST(TestHost, AnotherCoordinatorIsBusyNamingTheHolder) {
  Harness h;
  auto a = std::make_shared<MemoryPeer>("A");
  auto b = std::make_shared<MemoryPeer>("B");
  h.run(h.host.setup_server(a, "coordinator-a", server_setup("t1", spec_of(200ms)), "127.0.0.1"));
  h.run(h.host.setup_server(b, "coordinator-b", server_setup("t2", spec_of(200ms)), "127.0.0.1"));
  const auto e = b->last_error();
  EXPECT_EQ(e.code, proto::ErrorCode::busy);
  EXPECT_NE(e.message.find("running test t1 for coordinator coordinator-a"), std::string::npos) << e.message;
  EXPECT_EQ(h.host.held_by_other(b.get()), "running test t1 for coordinator coordinator-a");
  EXPECT_FALSE(h.host.held_by_other(a.get()));
  EXPECT_TRUE(h.host.owned_by(a.get()));
  // A START from the one that is not the owner is refused; the owner's test is untouched.
  h.run(h.host.start(b, schedule(200ms)));
  EXPECT_EQ(b->last_error().code, proto::ErrorCode::protocol);
  EXPECT_TRUE(h.host.owned_by(a.get()));
}

TEST(TestHost, ASetUpDuringTheReleaseIsToldCleaningThenServed) {
  std::promise<void> release;
  Harness h(FakeEngineOptions{.hold_join = release.get_future().share()});
  auto a = std::make_shared<MemoryPeer>("A");
  auto b = std::make_shared<MemoryPeer>("B");
  h.run(h.host.setup_server(a, "A", server_setup("t1", spec_of(200ms)), "127.0.0.1"));
  h.host.abort(a.get(), "changed my mind");  // before START: released, its join held
  ASSERT_TRUE(h.drive_until([&] { return h.log->joins == 1; }));
  EXPECT_FALSE(h.host.idle());
  h.run(h.host.setup_server(b, "B", server_setup("t2", spec_of(200ms)), "127.0.0.1"));
  EXPECT_EQ(b->last_error().code, proto::ErrorCode::cleaning);
  release.set_value();
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }));
  h.run(h.host.setup_server(b, "B", server_setup("t2", spec_of(200ms)), "127.0.0.1"));
  EXPECT_EQ(b->count(MsgType::setup_server_ok), 1);
}

TEST(TestHost, ALostCoordinatorStopsItsRunAndFreesTheAgent) {
  Harness h(FakeEngineOptions{.flows = 1});
  auto a = std::make_shared<MemoryPeer>("A");
  const auto spec = spec_of(10s);
  h.run(h.host.setup_client(a, "A", client_setup("t1", spec)));
  h.run(h.host.start(a, schedule(10s)));
  ASSERT_TRUE(h.drive_until([&] { return h.log->starts == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  a->close();
  h.host.session_ended(a.get(), "A", "closed");
  EXPECT_FALSE(h.host.owned_by(a.get()));
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);  // not the test's 10 s
  EXPECT_EQ(a->count(MsgType::result), 0);               // nobody to send it to
  EXPECT_EQ(h.idle_calls, 1);
}

TEST(TestHost, OnlyTheOwnerCanAbortAndItsResultSaysAborted) {
  Harness h;
  auto a = std::make_shared<MemoryPeer>("A");
  auto b = std::make_shared<MemoryPeer>("B");
  h.run(h.host.setup_client(a, "A", client_setup("t1", spec_of(10s))));
  h.run(h.host.start(a, schedule(10s)));
  ASSERT_TRUE(h.drive_until([&] { return h.log->starts == 1; }));
  h.host.abort(b.get(), "not yours");
  h.host.session_ended(b.get(), "B", "closed");  // another session ending changes nothing either
  EXPECT_TRUE(h.host.owned_by(a.get()));
  EXPECT_EQ(h.log->aborts.load(), 0);
  h.host.abort(a.get(), "operator");
  ASSERT_TRUE(h.drive_until([&] { return a->count(MsgType::result) == 1; }, 5s));
  const auto& r = a->got.back().body;
  EXPECT_TRUE(r.at("aborted").get<bool>());
  EXPECT_EQ(r.at("abort_reason"), "aborted by coordinator: operator");
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }));
}

TEST(TestHost, LimitsAreRefusedAtSetUpNamingTheLimit) {
  Harness h(FakeEngineOptions{}, TestHostLimits{1s, 1u << 20, 3});
  auto a = std::make_shared<MemoryPeer>("A");
  h.run(h.host.setup_server(a, "A", server_setup("t1", spec_of(2s)), "127.0.0.1"));
  auto e = a->last_error();
  EXPECT_EQ(e.code, proto::ErrorCode::limit);
  EXPECT_NE(e.message.find("exceeds this agent's --max-duration 1 s"), std::string::npos) << e.message;
  EXPECT_TRUE(h.host.idle());

  SpecParams big;
  big.time = 500ms;
  big.buffsize = 4u << 20;
  h.run(h.host.setup_server(a, "A", server_setup("t2", TestSpec::make(big)), "127.0.0.1"));
  e = a->last_error();
  EXPECT_EQ(e.code, proto::ErrorCode::setup_failed);
  EXPECT_NE(e.message.find("--max-buffer-memory 1 MiB"), std::string::npos) << e.message;
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }));

  h.run(h.host.setup_server(a, "A", server_setup("t3", spec_of(500ms), 4), "127.0.0.1"));
  e = a->last_error();
  EXPECT_NE(e.message.find("needs 4 file descriptors"), std::string::npos) << e.message;
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }));
  EXPECT_EQ(h.log->servers.load(), 0);  // the engine was never asked to set anything up
  EXPECT_EQ(a->count(MsgType::setup_server_ok), 0);
}

TEST(TestHost, AFailedSetUpIsReportedAndReleased) {
  Harness h(FakeEngineOptions{.fail_setup = "no such device"});
  auto a = std::make_shared<MemoryPeer>("A");
  auto b = std::make_shared<MemoryPeer>("B");
  h.run(h.host.setup_server(a, "A", server_setup("t1", spec_of(200ms)), "127.0.0.1"));
  const auto e = a->last_error();
  EXPECT_EQ(e.code, proto::ErrorCode::setup_failed);
  EXPECT_EQ(e.message, "server set-up failed: no such device");
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }));
  EXPECT_EQ(h.log->joins.load(), 1);  // what it had prepared was joined
  h.run(h.host.setup_client(b, "B", client_setup("t2", spec_of(200ms))));
  EXPECT_EQ(b->last_error().message, "client set-up failed: no such device");
}

TEST(TestHost, StartOutOfOrderOrOffTheScheduleIsRefused) {
  Harness h;
  auto a = std::make_shared<MemoryPeer>("A");
  h.run(h.host.start(a, schedule(200ms)));  // nothing set up
  EXPECT_EQ(a->last_error().message, "START without a test set up by this coordinator");

  h.run(h.host.setup_client(a, "A", client_setup("t1", spec_of(200ms))));
  h.run(h.host.start(a, schedule(200ms, 120'000'000'000)));  // two minutes ahead
  auto e = a->last_error();
  EXPECT_EQ(e.code, proto::ErrorCode::protocol);
  EXPECT_NE(e.message.find("not within the next minute"), std::string::npos) << e.message;
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }));

  // A START that arrives after the whole test's end: said as such (an overloaded host).
  h.run(h.host.setup_client(a, "A", client_setup("t1b", spec_of(200ms))));
  h.run(h.host.start(a, schedule(200ms, -1'500'000'000)));
  e = a->last_error();
  EXPECT_NE(e.message.find("START: arrived 1.3 s after the test's end"), std::string::npos) << e.message;
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }));

  h.run(h.host.setup_client(a, "A", client_setup("t2", spec_of(200ms))));
  h.run(h.host.start(a, schedule(400ms)));  // longer than the test's 0.2 s
  e = a->last_error();
  EXPECT_EQ(e.code, proto::ErrorCode::limit);
  EXPECT_NE(e.message.find("longer than the test's time"), std::string::npos) << e.message;
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }));
  EXPECT_EQ(h.log->starts.load(), 0);
}

TEST(TestHost, TheRolesOfOneTestMustAgree) {
  Harness h;
  auto a = std::make_shared<MemoryPeer>("A");
  h.run(h.host.setup_server(a, "A", server_setup("t1", spec_of(200ms)), "127.0.0.1"));
  h.run(h.host.setup_client(a, "A", client_setup("t1", spec_of(300ms))));  // another spec
  EXPECT_NE(a->last_error().message.find("disagree on the spec"), std::string::npos);
  ASSERT_TRUE(h.drive_until([&] { return h.host.idle(); }));
  h.run(h.host.setup_server(a, "A", server_setup("t2", spec_of(200ms)), "127.0.0.1"));
  h.run(h.host.setup_server(a, "A", server_setup("t2", spec_of(200ms)), "127.0.0.1"));
  EXPECT_EQ(a->last_error().message, "server set-up failed: server role already set up");
}

TEST(TestHost, TheAgentsStopAbortsTheRunThenCallsIdle) {
  Harness h;
  auto a = std::make_shared<MemoryPeer>("A");
  h.run(h.host.setup_client(a, "A", client_setup("t1", spec_of(10s))));
  h.run(h.host.start(a, schedule(10s)));
  ASSERT_TRUE(h.drive_until([&] { return h.log->starts == 1; }));
  h.host.stop("signal 15 received");
  ASSERT_TRUE(h.drive_until([&] { return a->count(MsgType::result) == 1 && h.idle_calls == 1; }, 5s));
  EXPECT_EQ(a->got.back().body.at("abort_reason"), "agent stopped: signal 15 received");
  EXPECT_TRUE(h.host.idle());
}
