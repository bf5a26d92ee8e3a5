// ArmTrial: the warm-up trial behind --send-method auto, driven with a synthetic clock.
#include <fabperf/core/clock.hpp>
#include "engine/trial.hpp"

#include <gtest/gtest.h>

#include <barrier>
#include <thread>

using namespace fabperf;

namespace {
constexpr std::int64_t kMs = 1'000'000;

// Runs one "thread" through the trial: every ms it asks for the arm and counts the bytes that
// arm moves in a ms (rate[arm] bytes per ms).
int drive(ArmTrial& t, std::int64_t from, std::int64_t to, std::array<std::uint64_t, 2> per_ms) {
  ArmTrial::Cursor c;
  int last = -1;
  for (std::int64_t now = from; now < to; now += kMs) {
    last = t.pick(c, now);
    t.count(c, per_ms[static_cast<std::size_t>(last)]);
  }
  return last;
}
}  // namespace

TEST(ArmTrial, SlicesAlternateAfterTheSettleSlice) {
  // 500 ms: settle 0-100, then arms 0 1 0 1 in 100 ms slices.
  ArmTrial t("send method", {"write", "sendfile"}, 0, 500 * kMs, true);
  ArmTrial::Cursor c;
  EXPECT_EQ(t.pick(c, 50 * kMs), 0);  // settle: the first candidate
  EXPECT_EQ(t.pick(c, 150 * kMs), 0);
  EXPECT_EQ(t.pick(c, 250 * kMs), 1);
  EXPECT_EQ(t.pick(c, 350 * kMs), 0);
  EXPECT_EQ(t.pick(c, 450 * kMs), 1);
  EXPECT_FALSE(t.decided());
  t.pick(c, 500 * kMs);
  EXPECT_TRUE(t.decided());
}

TEST(ArmTrial, KeepsTheFasterArm) {
  ArmTrial t("send method", {"write", "sendfile"}, 0, 500 * kMs, true);
  // sendfile moves 30% less per ms, as on a host where it loses.
  EXPECT_EQ(drive(t, 0, 600 * kMs, {1'000'000, 700'000}), 0);
  const TrialResult r = t.result();
  EXPECT_EQ(r.chosen, "write");
  EXPECT_NE(r.reason.find("higher throughput (+43%)"), std::string::npos) << r.reason;
  ASSERT_EQ(r.arms.size(), 2u);
  EXPECT_EQ(r.arms[0].bytes, 200u * 1'000'000u);  // two 100 ms slices
  EXPECT_EQ(r.arms[1].bytes, 200u * 700'000u);
  EXPECT_DOUBLE_EQ(r.arms[0].seconds, 0.2);
  // And the other way round, on a host where sendfile wins.
  ArmTrial u("send method", {"write", "sendfile"}, 0, 500 * kMs, true);
  EXPECT_EQ(drive(u, 0, 600 * kMs, {1'000'000, 1'500'000}), 1);
  EXPECT_EQ(u.result().chosen, "sendfile");
}

TEST(ArmTrial, EqualThroughputFallsToCpuPerByte) {
  ArmTrial t("send method", {"write", "sendfile"}, 0, 500 * kMs, true);
  // A link is the limit: both arms move the same bytes. The CPU clock is real, so spin in arm 0's
  // slices and not in arm 1's: arm 1 costs less per byte.
  ArmTrial::Cursor c;
  for (std::int64_t now = 0; now < 600 * kMs; now += kMs) {
    const int a = t.pick(c, now);
    if (a == 0 && now >= 100 * kMs && now < 500 * kMs) {
      const auto until = clock_now_ns(CLOCK_THREAD_CPUTIME_ID) + 200'000;  // 0.2 ms of CPU
      while (clock_now_ns(CLOCK_THREAD_CPUTIME_ID) < until) {
      }
    }
    t.count(c, 1'000'000);
  }
  const TrialResult r = t.result();
  EXPECT_EQ(r.chosen, "sendfile") << r.reason;
  EXPECT_NE(r.reason.find("equal throughput"), std::string::npos) << r.reason;
  EXPECT_GT(r.arms[0].cpu_s, r.arms[1].cpu_s);
}

TEST(ArmTrial, AnArmWithNoBytesIsNotComparedAndSaysSo) {
  // sendfile's slices see no call (one that began in write's slice outlasted them, as on a loaded
  // host): no comparison, and the first candidate runs even though it moved fewer bytes.
  for (const std::array<std::uint64_t, 2> rate : {std::array<std::uint64_t, 2>{1'000'000, 0}, {0, 1'000'000}}) {
    ArmTrial t("send method", {"write", "sendfile"}, 0, 500 * kMs, true);
    EXPECT_EQ(drive(t, 0, 600 * kMs, rate), 0);
    const TrialResult r = t.result();
    EXPECT_EQ(r.chosen, "write");
    const std::string idle = rate[0] == 0 ? "write" : "sendfile";
    EXPECT_NE(r.reason.find("not compared: " + idle + " moved no bytes in its 100 ms slices"), std::string::npos)
        << r.reason;
  }
}

TEST(ArmTrial, TooShortAWarmUpIsNotTriedAndSaysSo) {
  ArmTrial t("send method", {"write", "sendfile"}, 0, 60 * kMs, true);  // 5 slices of 12 ms
  EXPECT_TRUE(t.decided());
  ArmTrial::Cursor c;
  EXPECT_EQ(t.pick(c, 0), 0);
  const TrialResult r = t.result();
  EXPECT_EQ(r.chosen, "write");
  EXPECT_TRUE(r.arms.empty());
  EXPECT_NE(r.reason.find("not tried: 60 ms of warm-up"), std::string::npos) << r.reason;
}

TEST(ArmTrial, ThreadsShareSlicesAndTheDecision) {
  // Two threads step through the same synthetic instants together (a barrier per ms), as real
  // threads go through the same real ones.
  ArmTrial t("send method", {"write", "sendfile"}, 0, 500 * kMs, true);
  std::barrier step(2);
  auto run = [&](int& last) {
    ArmTrial::Cursor c;
    for (std::int64_t now = 0; now < 600 * kMs; now += kMs) {
      step.arrive_and_wait();
      last = t.pick(c, now);
      t.count(c, last == 1 ? 900'000 : 500'000);
    }
  };
  int a = -1, b = -1;
  std::thread t1([&] { run(a); });
  std::thread t2([&] { run(b); });
  t1.join();
  t2.join();
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(t.result().arms[1].bytes, 2u * 200u * 900'000u);
  EXPECT_EQ(t.result().arms[0].bytes, 2u * 200u * 500'000u);
}

TEST(ArmPicker, FixedChoiceNeverReadsTheClock) {
  ArmPicker p(nullptr, 1);
  int calls = 0;
  auto clock = [&] {
    ++calls;
    return std::int64_t{0};
  };
  EXPECT_EQ(p.arm(clock), 1);
  EXPECT_EQ(calls, 0);
  ArmTrial t("x", {"a", "b"}, 0, 500 * kMs, true);
  ArmPicker q(&t, 0);
  std::int64_t now = 600 * kMs;  // past the trial: decided on the first call, then held
  EXPECT_EQ(q.arm([&] {
    ++calls;
    return now;
  }),
            0);
  EXPECT_EQ(q.arm([&] {
    ++calls;
    return now;
  }),
            0);
  EXPECT_EQ(calls, 1);
}
