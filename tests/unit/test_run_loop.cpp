// TestRun, the run loop every engine shares, driven by a fake engine: no sockets, no agents. The
// fake's flows count bytes on their own threads as a transport would, so the schedule, the
// window's edges, the intervals, the stop, an abort and the trials reach the result as they do
// for TCP and RDMA.
#include <fabperf/engine/engine.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>

#include <fabperf/core/clock.hpp>

#include "common/fake_engine.hpp"

using namespace fabperf;
using fabperf::fakes::FakeEngine;
using fabperf::fakes::FakeEngineOptions;
using namespace std::chrono_literals;

namespace {

struct Harness {
  explicit Harness(int flows, bool stall = false, int slow_read = 0) {
    SpecParams p;
    p.time = 1s;
    auto ctx = std::make_unique<RunContext>(TestSpec::make(p), 0, "fakehost");
    auto eng = std::make_unique<FakeEngine>(
        FakeEngineOptions{.flows = flows, .per_tick = 1000, .stall = stall, .slow_read = slow_read});
    engine = eng.get();
    eng->prepare_client(*ctx, {});
    run = std::make_unique<TestRun>(std::move(eng), std::move(ctx));
  }
  // A schedule starting 50 ms from now: window 100..900 ms, intervals of 200 ms, end at 1 s.
  static Schedule schedule() {
    const std::int64_t t0 = mono_now_ns() + 50'000'000;
    return {t0, t0 + 100'000'000, t0 + 900'000'000, t0 + 1'000'000'000, 200'000'000};
  }
  AgentResult go(const Schedule& s) {
    std::promise<AgentResult> done;
    auto f = done.get_future();
    run->start(s, [&](AgentResult r) { done.set_value(std::move(r)); });
    EXPECT_EQ(f.wait_for(10s), std::future_status::ready);
    AgentResult r = f.get();
    run->finish();
    return r;
  }
  FakeEngine* engine;
  std::unique_ptr<TestRun> run;
};

}  // namespace

TEST(TestRunFake, WindowIntervalsAndTotalsFollowTheSchedule) {
  Harness h(3);
  const auto t0 = std::chrono::steady_clock::now();
  const AgentResult r = h.go(Harness::schedule());
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(h.engine->sealed);
  EXPECT_FALSE(r.aborted) << r.abort_reason;
  ASSERT_EQ(r.flows.size(), 3u);
  // The window is the schedule's 0.8 s as this host's clock measured it between the two
  // snapshots; either may be taken late on a busy host (a sanitizer build under load), so what
  // holds is that it was measured and lies inside the run.
  EXPECT_GT(r.window_s, 0.0);
  EXPECT_LE(r.window_s, took.count());
  // Intervals: 200, 400, 600 ms and the close; they add up to the window's bytes.
  ASSERT_EQ(r.intervals.size(), 4u);
  std::uint64_t iv = 0;
  for (const auto& s : r.intervals) iv += s.tx_bytes;
  std::uint64_t win = 0;
  for (const auto& f : r.flows) {
    EXPECT_GT(f.tx_bytes_window, 0u);
    EXPECT_LE(f.tx_bytes_window, f.tx_bytes_total);  // warm-up and tail are outside the window
    EXPECT_LT(f.tx_bytes_window, f.tx_bytes_total);
    // A fake flow counts a send as delivered (Flow::edge's default, as RDMA's completions).
    // A snapshot reads the sent and the delivered count one after the other, so a send between the
    // two reads at either edge of the window moves one of them by a tick (CI saw 3,974,000 vs
    // 3,975,000): equal to within a tick per edge is what holds.
    EXPECT_LE(std::max(f.tx_delivered_window, f.tx_bytes_window) - std::min(f.tx_delivered_window, f.tx_bytes_window),
              2 * fakes::FakeEngineOptions{}.per_tick);
    win += f.tx_delivered_window;
  }
  EXPECT_EQ(iv, win);
  // The engine's trials reach the result.
  ASSERT_EQ(r.trials.size(), 1u);
  EXPECT_EQ(r.trials[0].chosen, "write");
  // Every data thread's CPU time over the window is there.
  EXPECT_EQ(r.threads.size(), 3u);
}

TEST(TestRunFake, AnEdgeWhoseReadsWerePreemptedIsReadAgain) {
  // The fifth read of the flow's acknowledged count is the window's close (open, three
  // intervals, close) and takes 50 ms while the flow goes on counting. Read once, the close
  // would pair a sent count from before the pause with an acknowledged one from after it: the
  // window would gain 50 ms of bytes its time does not hold.
  Harness h(1, false, 5);
  const AgentResult r = h.go(Harness::schedule());
  ASSERT_EQ(r.flows.size(), 1u);
  const FlowResult& f = r.flows[0];
  ASSERT_GT(f.tx_bytes_window, 0u);
  // Both counts come from one read of the edge: less than 20 ms of the flow's bytes apart (a
  // sanitizer build under load may be preempted inside a read that was not the paused one).
  const double per_ms = static_cast<double>(f.tx_bytes_window) / (r.window_s * 1e3);
  EXPECT_LE(static_cast<double>(f.tx_delivered_window), static_cast<double>(f.tx_bytes_window) + 20 * per_ms)
      << f.tx_bytes_window << " bytes over " << r.window_s << " s";
}

TEST(TestRunFake, AbortEndsTheRunWithItsReason) {
  Harness h(2);
  const Schedule s = Harness::schedule();
  std::thread aborter([&] {
    std::this_thread::sleep_for(300ms);  // inside the window
    h.run->abort("the coordinator said stop");
  });
  const AgentResult r = h.go(s);
  aborter.join();
  EXPECT_TRUE(r.aborted);
  EXPECT_EQ(r.abort_reason, "the coordinator said stop");
}

TEST(TestRunFake, AFlowThatIgnoresTheStopIsAbandonedAtTheHardDeadline) {
  // The stalled flow keeps going after end_at; the watchdog aborts the engine at the hard
  // deadline (end + 3 s without drain progress) and the result still comes back.
  Harness h(1, true);
  const auto t0 = std::chrono::steady_clock::now();
  const AgentResult r = h.go(Harness::schedule());
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 1s + std::chrono::nanoseconds(RunContext::kGraceNs));
  EXPECT_LT(took, 10s);
  ASSERT_EQ(r.flows.size(), 1u);
  EXPECT_GT(r.flows[0].tx_bytes_window, 0u);
}

namespace {

// The CPUs a thread may run on after enter_data_thread (its affinity mask).
std::vector<int> cpus_after_enter(RunContext& ctx, FlowRole end, bool pin) {
  std::vector<int> out;
  std::thread([&] {
    ctx.enter_data_thread("t", 0, end, pin);
    cpu_set_t set;
    CPU_ZERO(&set);
    pthread_getaffinity_np(pthread_self(), sizeof set, &set);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  }).join();
  return out;
}

}  // namespace

// Two agents on one host: a flow's client end and server end are pinned to different CPUs
// whatever order their threads start in, and a light thread (the delay probe) takes no CPU of
// the rotation. It used to be one rotation for every thread: a probe started first moved the
// sender onto the receiver's core.
TEST(RunContextPinning, ClientAndServerEndsTakeDifferentCpusAndTheProbeFloats) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  SpecParams p;
  RunContext client(TestSpec::make(p), 1, "h"), server(TestSpec::make(p), 0, "h");
  client.set_cpus(cpus);
  server.set_cpus(cpus);
  const auto probe = cpus_after_enter(client, FlowRole::client, false);
  EXPECT_GE(probe.size(), 2u) << "the probe thread was pinned";
  const auto recv = cpus_after_enter(server, FlowRole::server, true);
  const auto send = cpus_after_enter(client, FlowRole::client, true);
  ASSERT_EQ(send.size(), 1u);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_NE(send[0], recv[0]) << "sender and receiver of one flow pinned to one core";
  EXPECT_EQ(send[0], cpus[0]);
  EXPECT_EQ(recv[0], cpus[1]);
}
