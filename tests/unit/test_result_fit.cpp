// Results never lost to their size (agent/result_fit.hpp): the largest time series an agent
// accepts (--time 3600 --interval 0.01: 360,000 intervals and as many link samples) is reduced by
// the stated rule until its RESULT fits one control message, with totals intact.
#include "agent/result_fit.hpp"

#include <fabperf/proto/proto.hpp>
#include <fabperf/sysinfo/counters.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace fabperf;

namespace {

AgentResult hour_at_10ms() {
  AgentResult r;
  r.hostname = "node";
  r.window_s = 3600;
  constexpr std::int64_t kIntervals = 360'000, kStep = 10'000'000;
  r.intervals.reserve(kIntervals);
  for (std::int64_t i = 1; i <= kIntervals; ++i) {
    r.intervals.push_back(
        {i * kStep, 1'250'000'000ull + static_cast<std::uint64_t>(i), 1'000ull + static_cast<std::uint64_t>(i)});
  }
  LinkResult l;
  l.info.name = "eth0";
  for (std::int64_t i = 0; i <= kIntervals + 1; ++i) {
    LinkSample s;
    s.t_ns = i * kStep;
    s.counters.present = true;
    s.counters.tx_bytes = 10'000'000'000'000ull + static_cast<std::uint64_t>(i) * 1'250'000'000ull;
    s.counters.rx_bytes = 20'000'000'000ull + static_cast<std::uint64_t>(i) * 1'000ull;
    s.counters.tx_packets = static_cast<std::uint64_t>(i) * 900'000ull;
    l.samples.push_back(s);
  }
  r.links.push_back(std::move(l));
  return r;
}

std::uint64_t total_tx(const AgentResult& r) {
  std::uint64_t t = 0;
  for (const auto& s : r.intervals) t += s.tx_bytes;
  return t;
}

}  // namespace

TEST(ResultFit, LargestTimeSeriesIsDownsampledToFitWithTotalsKept) {
  AgentResult r = hour_at_10ms();
  const std::size_t before = to_json(r).dump().size();
  ASSERT_GT(before, proto::kMaxBody) << "the case must exceed the frame cap to test anything";
  const std::uint64_t tx = total_tx(r);
  const LinkSample first = r.links[0].samples.front(), last = r.links[0].samples.back();
  const std::int64_t end = r.intervals.back().t_ns;

  const int halvings = fit_result(r, proto::kMaxBody);
  EXPECT_GE(halvings, 1);
  EXPECT_NO_THROW((void)proto::encode_frame(proto::MsgType::result, to_json(r)));  // what the agent sends
  EXPECT_EQ(total_tx(r), tx);
  EXPECT_EQ(r.intervals.back().t_ns, end);
  EXPECT_EQ(r.links[0].samples.front().t_ns, first.t_ns);
  EXPECT_EQ(r.links[0].samples.back().t_ns, last.t_ns);
  EXPECT_EQ(r.links[0].samples.back().counters.tx_bytes, last.counters.tx_bytes);
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings.back().find("time series downsampled"), std::string::npos) << r.warnings.back();
  // Still the finest resolution that fits: one halving fewer would not have.
  EXPECT_GT(r.intervals.size(), 360'000u >> (halvings + 1));
}

// Issue 28: the named counter series were left whole, so a long run with many counters moving
// lost its RESULT ("exceeds ... even without a time series"). 20 host counters that all move at
// every one of 60,000 samples are about 36 MB encoded; the series is halved like the others.
TEST(ResultFit, NamedCounterSeriesAreDownsampledToo) {
  AgentResult r;
  r.hostname = "node";
  constexpr std::int64_t kSamples = 60'000;
  r.host_counters.reserve(kSamples);
  for (std::int64_t i = 0; i < kSamples; ++i) {
    CounterSample cs;
    cs.t_ns = i * 10'000'000;
    for (int k = 0; k < 20; ++k) {
      cs.values.emplace_back("tcp.counter_with_a_long_name_" + std::to_string(k),
                             static_cast<std::uint64_t>(i * (k + 1)));
    }
    r.host_counters.push_back(std::move(cs));
  }
  ASSERT_GT(to_json(r).dump().size(), proto::kMaxBody) << "the case must exceed the frame cap to test anything";
  const CounterSample first = r.host_counters.front(), last = r.host_counters.back();
  const int halvings = fit_result(r, proto::kMaxBody);
  EXPECT_GE(halvings, 1);
  EXPECT_NO_THROW((void)proto::encode_frame(proto::MsgType::result, to_json(r)));
  EXPECT_EQ(r.host_counters.front().t_ns, first.t_ns);
  EXPECT_EQ(r.host_counters.back().t_ns, last.t_ns);
  EXPECT_EQ(r.host_counters.back().values, last.values);
  EXPECT_LT(r.host_counters.size(), static_cast<std::size_t>(kSamples));
}

// 2,000 idle counters over 1,000 samples: a small RESULT on the wire (only the first sample
// carries values), 2 million values once a coordinator makes every sample whole. The agent halves
// the series until they fit kMaxCounterCells, which a coordinator enforces.
TEST(ResultFit, IdleCountersAreHalvedToTheExpandedLimit) {
  AgentResult r;
  for (std::int64_t i = 0; i < 1000; ++i) {
    CounterSample cs;
    cs.t_ns = i * 1'000'000'000;
    for (int k = 0; k < 2000; ++k) cs.values.emplace_back("nic.queue_" + std::to_string(k), 7);
    r.host_counters.push_back(std::move(cs));
  }
  ASSERT_LT(to_json(r).dump().size(), proto::kMaxBody);
  EXPECT_GE(fit_result(r, proto::kMaxBody), 1);
  EXPECT_LE(counter_cells(r.host_counters), kMaxCounterCells);
  EXPECT_NO_THROW((void)parse_agent_result(to_json(r)));
}

TEST(ResultFit, SmallResultIsUntouched) {
  AgentResult r;
  r.intervals = {{10'000'000, 1, 2}, {20'000'000, 3, 4}, {30'000'000, 5, 6}};
  EXPECT_EQ(fit_result(r, proto::kMaxBody), 0);
  EXPECT_EQ(r.intervals.size(), 3u);
  EXPECT_TRUE(r.warnings.empty());
}
