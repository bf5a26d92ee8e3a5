#include <gtest/gtest.h>
#include <fabperf/core/clock.hpp>

#include <cstdint>
#include <vector>

using namespace fabperf;

namespace {

// One exchange with a known true offset (agent clock - coordinator clock): the ping takes `up` ns,
// the agent holds it `proc` ns, the pong takes `down` ns. t0 and t3 are coordinator time.
ClockSample exchange(std::int64_t t0, std::int64_t offset, std::int64_t up, std::int64_t proc, std::int64_t down) {
  const std::int64_t t1 = t0 + up + offset;
  const std::int64_t t2 = t1 + proc;
  const std::int64_t t3 = t2 - offset + down;
  return {t0, t1, t2, t3};
}

}  // namespace

TEST(ClockOffset, SymmetricDelaysRecoverOffsetExactly) {
  for (std::int64_t offset : {0LL, 1LL, -1LL, 123'456'789LL, -987'654'321'000LL, 5'000'000'000'000LL}) {
    const ClockSample s[] = {exchange(1'000'000, offset, 40'000, 5'000, 40'000)};
    const auto e = estimate_clock_offset(s);
    EXPECT_EQ(e.offset_ns, offset);
    EXPECT_EQ(e.rtt_ns, 80'000);
    EXPECT_EQ(e.uncertainty_ns, 40'000);
    EXPECT_EQ(e.samples, 1);
  }
}

TEST(ClockOffset, ProcessingTimeIsNotRoundTrip) {
  // 10 ms spent in the agent must not count as network round trip.
  const ClockSample s[] = {exchange(0, 777, 1'000, 10'000'000, 1'000)};
  const auto e = estimate_clock_offset(s);
  EXPECT_EQ(e.rtt_ns, 2'000);
  EXPECT_EQ(e.offset_ns, 777);
  EXPECT_EQ(e.uncertainty_ns, 1'000);
}

TEST(ClockOffset, PicksTheMinimumRttSample) {
  const std::int64_t offset = -42'000'000;
  std::vector<ClockSample> s;
  // Queueing on one leg skews the naive offset; the quiet exchange (rtt 20 us) is the one to use.
  s.push_back(exchange(0, offset, 500'000, 3'000, 20'000));          // rtt 520 us, skewed +240 us
  s.push_back(exchange(1'000'000, offset, 10'000, 3'000, 300'000));  // rtt 310 us, skewed -145 us
  s.push_back(exchange(2'000'000, offset, 10'000, 3'000, 10'000));   // rtt 20 us, exact
  s.push_back(exchange(3'000'000, offset, 90'000, 3'000, 10'000));   // rtt 100 us, skewed +40 us
  s.push_back(exchange(4'000'000, offset, 12'000, 3'000, 10'000));   // rtt 22 us
  const auto e = estimate_clock_offset(s);
  EXPECT_EQ(e.rtt_ns, 20'000);
  EXPECT_EQ(e.offset_ns, offset);
  EXPECT_EQ(e.uncertainty_ns, 10'000);
  EXPECT_EQ(e.samples, 5);
}

TEST(ClockOffset, AsymmetricBestSampleErrsByHalfTheAsymmetry) {
  // Only asymmetric exchanges: the estimate is off by (up - down) / 2, which the uncertainty covers.
  const std::int64_t offset = 1'000'000;
  const ClockSample s[] = {exchange(0, offset, 30'000, 0, 10'000), exchange(100'000, offset, 70'000, 0, 10'000)};
  const auto e = estimate_clock_offset(s);
  EXPECT_EQ(e.rtt_ns, 40'000);
  EXPECT_EQ(e.uncertainty_ns, 20'000);
  EXPECT_EQ(e.offset_ns, offset + 10'000);
  EXPECT_LE(e.offset_ns - offset, e.uncertainty_ns);
}

TEST(ClockOffset, FirstOfEqualRttSamplesWins) {
  const ClockSample s[] = {exchange(0, 100, 5'000, 0, 5'000), exchange(50'000, 100, 8'000, 0, 2'000)};
  const auto e = estimate_clock_offset(s);
  EXPECT_EQ(e.rtt_ns, 10'000);
  EXPECT_EQ(e.offset_ns, 100);
}

TEST(ClockOffset, NegativeRttSamplesIgnored) {
  // An agent claiming to have held the ping longer than the whole round trip is lying or broken.
  const ClockSample bad{0, 1'000, 1'000'000, 10'000};  // rtt = 10'000 - 999'000 < 0
  const ClockSample good = exchange(20'000, 500, 30'000, 1'000, 30'000);
  const ClockSample s[] = {bad, good, bad};
  const auto e = estimate_clock_offset(s);
  EXPECT_EQ(e.rtt_ns, 60'000);
  EXPECT_EQ(e.offset_ns, 500);
  EXPECT_EQ(e.uncertainty_ns, 30'000);
}

TEST(ClockOffset, ZeroRttSampleIsValid) {
  const ClockSample s[] = {exchange(0, 5, 0, 100, 0), exchange(1'000, 9, 1'000, 0, 1'000)};
  const auto e = estimate_clock_offset(s);
  EXPECT_EQ(e.rtt_ns, 0);
  EXPECT_EQ(e.uncertainty_ns, 0);
  EXPECT_EQ(e.offset_ns, 5);
}

TEST(ClockOffset, UncertaintyIsHalfTheRtt) {
  for (std::int64_t rtt : {2LL, 3LL, 1'000LL, 1'000'001LL}) {
    const ClockSample s[] = {exchange(0, 0, rtt / 2, 7, rtt - rtt / 2)};
    const auto e = estimate_clock_offset(s);
    EXPECT_EQ(e.rtt_ns, rtt);
    EXPECT_EQ(e.uncertainty_ns, rtt / 2);
  }
}

TEST(ClockOffset, OnlyImpossibleSamplesGiveNoEstimate) {
  // The agent claims to have held each ping longer than the whole round trip.
  const ClockSample s[] = {{0, 10, 500, 100}, {1000, 1010, 1600, 1100}};
  EXPECT_EQ(estimate_clock_offset(s).samples, 0);
}

TEST(ClockOffset, NoSamples) {
  const auto e = estimate_clock_offset({});
  EXPECT_EQ(e.offset_ns, 0);
  EXPECT_EQ(e.rtt_ns, 0);
  EXPECT_EQ(e.uncertainty_ns, 0);
  EXPECT_EQ(e.samples, 0);
}

TEST(MonoClock, IsMonotonic) {
  const auto a = mono_now_ns();
  const auto b = mono_now_ns();
  EXPECT_GT(a, 0);
  EXPECT_GE(b, a);
}
