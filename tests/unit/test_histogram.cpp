#include <gtest/gtest.h>
#include <fabperf/core/error.hpp>
#include <fabperf/core/histogram.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

using namespace fabperf;
using nlohmann::json;

namespace {

using H = LatencyHistogram;
const double kWidth = std::pow(10.0, 1.0 / H::kBucketsPerDecade);  // ratio of a bucket's bounds, ~1.122

// Deterministic log-uniform samples in [10^lo_exp, 10^hi_exp) ns from a seeded engine (the raw
// engine output is specified by the standard; distributions are not, so none is used).
std::vector<std::uint64_t> log_uniform_samples(std::uint64_t seed, std::size_t n, double lo_exp, double hi_exp) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    v.push_back(static_cast<std::uint64_t>(std::pow(10.0, lo_exp + (hi_exp - lo_exp) * u)));
  }
  return v;
}

// Nearest-rank percentile of sorted samples, p given in thousandths of a percent (99.9 -> 99900),
// in exact integer arithmetic.
std::uint64_t exact_percentile(const std::vector<std::uint64_t>& sorted, std::uint64_t p_milli) {
  const std::uint64_t n = sorted.size();
  std::uint64_t rank = (p_milli * n + 99999) / 100000;  // ceil(p/100 * n)
  rank = std::max<std::uint64_t>(rank, 1);
  return sorted[rank - 1];
}

H histogram_of(const std::vector<std::uint64_t>& v) {
  H h;
  for (auto x : v) h.record(x);
  return h;
}

std::string error_of(const json& j) {
  try {
    (void)histogram_from_json(j);
  } catch (const ProtocolError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << j.dump();
  return "";
}

}  // namespace

// ---- bucket math ----------------------------------------------------------------------------

TEST(HistogramBuckets, Layout) {
  EXPECT_EQ(H::kBucketsPerDecade, 20);
  EXPECT_EQ(H::kDecades, 12);
  EXPECT_EQ(H::kBuckets, 241);
  EXPECT_NEAR(kWidth, 1.1220184543, 1e-9);
}

TEST(HistogramBuckets, PowersOfTenStartBuckets) {
  EXPECT_EQ(H::bucket_of(0), 0);
  EXPECT_EQ(H::bucket_of(1), 0);
  EXPECT_EQ(H::bucket_of(10), 20);
  EXPECT_EQ(H::bucket_of(100), 40);
  EXPECT_EQ(H::bucket_of(1000), 60);
  EXPECT_EQ(H::bucket_of(1'000'000), 120);
  EXPECT_EQ(H::bucket_of(1'000'000'000), 180);
  EXPECT_EQ(H::bucket_of(999), 59);
  EXPECT_EQ(H::bucket_of(999'999), 119);
  EXPECT_DOUBLE_EQ(H::bucket_lower_ns(0), 1.0);
  EXPECT_DOUBLE_EQ(H::bucket_lower_ns(60), 1000.0);
  EXPECT_DOUBLE_EQ(H::bucket_upper_ns(59), 1000.0);
  EXPECT_DOUBLE_EQ(H::bucket_lower_ns(120), 1e6);
}

TEST(HistogramBuckets, OverflowBucket) {
  EXPECT_EQ(H::bucket_of(999'999'999'999ull), H::kBuckets - 2);
  EXPECT_EQ(H::bucket_of(1'000'000'000'000ull), H::kBuckets - 1);
  EXPECT_EQ(H::bucket_of(std::numeric_limits<std::uint64_t>::max()), H::kBuckets - 1);
}

TEST(HistogramBuckets, EveryValueLiesInsideItsBucket) {
  int prev = 0;
  for (std::uint64_t v = 2; v < 1'000'000'000'000ull; v = v + v / 7 + 1) {
    const int b = H::bucket_of(v);
    ASSERT_GE(b, prev) << v;  // monotonic
    prev = b;
    const double x = static_cast<double>(v);
    EXPECT_LE(H::bucket_lower_ns(b), x * (1 + 1e-12)) << v;
    EXPECT_GT(H::bucket_upper_ns(b), x * (1 - 1e-12)) << v;
  }
  for (int i = 0; i < H::kBuckets - 1; ++i) {
    EXPECT_NEAR(H::bucket_upper_ns(i) / H::bucket_lower_ns(i), kWidth, 1e-9) << i;
    EXPECT_DOUBLE_EQ(H::bucket_upper_ns(i), H::bucket_lower_ns(i + 1)) << i;
  }
}

// ---- record / merge -------------------------------------------------------------------------

TEST(Histogram, RecordCountsMinMax) {
  H h;
  h.record(1000);
  h.record(50);
  h.record(1000);
  h.record(2'000'000);
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.min_ns(), 50u);
  EXPECT_EQ(h.max_ns(), 2'000'000u);
  EXPECT_EQ(h.bucket_count(H::bucket_of(1000)), 2u);
  EXPECT_EQ(h.bucket_count(H::bucket_of(50)), 1u);
  EXPECT_EQ(h.bucket_count(H::bucket_of(2'000'000)), 1u);
  std::uint64_t total = 0;
  for (int i = 0; i < H::kBuckets; ++i) total += h.bucket_count(i);
  EXPECT_EQ(total, 4u);
  EXPECT_DOUBLE_EQ(h.mean_ns(), (1000.0 + 50 + 1000 + 2'000'000) / 4);
}

TEST(Histogram, ZeroAndHugeValues) {
  H h;
  h.record(0);
  h.record(std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(h.count(), 2u);
  EXPECT_EQ(h.min_ns(), 0u);
  EXPECT_EQ(h.max_ns(), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(h.bucket_count(0), 1u);
  EXPECT_EQ(h.bucket_count(H::kBuckets - 1), 1u);
  // The lowest sample's estimate stays inside bucket 0 ([0, 10^0.05) ns).
  EXPECT_LE(h.percentile_ns(0), kWidth);
  EXPECT_GE(h.percentile_ns(100), 1e12);  // somewhere in the overflow bucket
}

TEST(Histogram, MergeEqualsRecordingEverything) {
  // Values small enough that every sum and sum of squares is exact in a double.
  const auto a = log_uniform_samples(1, 500, 1, 5);
  const auto b = log_uniform_samples(2, 700, 2, 4.5);
  H ha = histogram_of(a);
  const H hb = histogram_of(b);
  std::vector<std::uint64_t> all = a;
  all.insert(all.end(), b.begin(), b.end());
  ha.merge(hb);
  EXPECT_EQ(ha, histogram_of(all));
  EXPECT_EQ(ha.count(), 1200u);
  EXPECT_EQ(ha.min_ns(), *std::min_element(all.begin(), all.end()));
  EXPECT_EQ(ha.max_ns(), *std::max_element(all.begin(), all.end()));
}

TEST(Histogram, MergeWithEmpty) {
  const H full = histogram_of({10, 20, 30});
  H a = full;
  a.merge(H{});
  EXPECT_EQ(a, full);
  H e;
  e.merge(full);
  EXPECT_EQ(e, full);
  EXPECT_EQ(e.min_ns(), 10u);
  H ee;
  ee.merge(H{});
  EXPECT_EQ(ee, H{});
  EXPECT_EQ(ee.count(), 0u);
}

// ---- mean / stddev --------------------------------------------------------------------------

TEST(Histogram, MeanAndStddevMatchExact) {
  const auto v = log_uniform_samples(42, 10000, 3, 6);  // 1 us .. 1 ms
  const H h = histogram_of(v);
  long double sum = 0;
  for (auto x : v) sum += static_cast<long double>(x);
  const long double mean = sum / static_cast<long double>(v.size());
  long double ss = 0;
  for (auto x : v) ss += (static_cast<long double>(x) - mean) * (static_cast<long double>(x) - mean);
  const double sd = static_cast<double>(std::sqrt(ss / static_cast<long double>(v.size() - 1)));
  EXPECT_NEAR(h.mean_ns(), static_cast<double>(mean), 1e-9 * static_cast<double>(mean));
  EXPECT_NEAR(h.stddev_ns(), sd, 1e-6 * sd);
  EXPECT_GT(sd, 0);
}

TEST(Histogram, StddevSmallCases) {
  EXPECT_EQ(histogram_of({}).stddev_ns(), 0.0);
  EXPECT_EQ(histogram_of({500}).stddev_ns(), 0.0);
  EXPECT_DOUBLE_EQ(histogram_of({2, 4, 4, 4, 5, 5, 7, 9}).stddev_ns(), std::sqrt(32.0 / 7));
  EXPECT_DOUBLE_EQ(histogram_of({2, 4, 4, 4, 5, 5, 7, 9}).mean_ns(), 5.0);
  EXPECT_EQ(histogram_of({1000, 1000, 1000}).stddev_ns(), 0.0);
}

// ---- percentiles ----------------------------------------------------------------------------

TEST(Histogram, PercentilesWithinOneBucketOfExact) {
  const std::uint64_t ps[] = {0, 1000, 10000, 25000, 50000, 75000, 90000, 99000, 99900, 99990, 100000};
  struct Set {
    std::uint64_t seed;
    std::size_t n;
    double lo, hi;
  };
  for (const Set& s : {Set{7, 1000, 3, 6}, Set{8, 10000, 2, 9}, Set{9, 137, 4, 4.3}, Set{10, 100000, 3, 7},
                       Set{11, 1, 5, 6}, Set{12, 2, 1, 8}}) {
    auto v = log_uniform_samples(s.seed, s.n, s.lo, s.hi);
    const H h = histogram_of(v);
    std::sort(v.begin(), v.end());
    for (auto p : ps) {
      const double pct = static_cast<double>(p) / 1000.0;
      const double exact = static_cast<double>(exact_percentile(v, p));
      const double est = h.percentile_ns(pct);
      EXPECT_LE(est, exact * kWidth * (1 + 1e-12)) << "seed " << s.seed << " n " << s.n << " p" << pct;
      EXPECT_GE(est, exact / kWidth * (1 - 1e-12)) << "seed " << s.seed << " n " << s.n << " p" << pct;
      EXPECT_GE(est, static_cast<double>(v.front())) << "p" << pct;
      EXPECT_LE(est, static_cast<double>(v.back())) << "p" << pct;
    }
    // The largest sample's bucket ends at or above it, so p100 is clamped to the exact maximum.
    EXPECT_EQ(h.percentile_ns(100), static_cast<double>(v.back()));
  }
}

TEST(Histogram, PercentileRankIsExactForRoundPercentiles) {
  // p99.9 of 1000 samples is the 999th sample, not the 1000th: one slow outlier must not
  // become the p99.9 of 999 fast samples.
  for (std::size_t n : {1000u, 10000u, 100000u}) {
    H h;
    for (std::size_t i = 0; i < n - n / 1000; ++i) h.record(1000);
    for (std::size_t i = 0; i < n / 1000; ++i) h.record(1'000'000'000);
    EXPECT_LT(h.percentile_ns(99.9), 2000) << n;
    EXPECT_EQ(h.percentile_ns(100), 1e9) << n;
  }
  H h;
  for (int i = 0; i < 90; ++i) h.record(100);
  for (int i = 0; i < 10; ++i) h.record(100'000);
  EXPECT_LT(h.percentile_ns(90), 200);
  EXPECT_GT(h.percentile_ns(91), 50'000);
}

TEST(Histogram, PercentileClampedToMinMax) {
  H h;
  h.record(12345);
  for (double p : {0.0, 1.0, 50.0, 99.9, 100.0, -5.0, 250.0}) EXPECT_EQ(h.percentile_ns(p), 12345.0) << p;
  H two = histogram_of({1001, 1002});
  EXPECT_GE(two.percentile_ns(50), 1001.0);
  EXPECT_LE(two.percentile_ns(50), 1002.0);
  EXPECT_EQ(two.percentile_ns(100), 1002.0);
}

TEST(Histogram, PercentilesAreMonotonic) {
  const H h = histogram_of(log_uniform_samples(3, 5000, 2, 8));
  double prev = 0;
  for (int p = 0; p <= 1000; ++p) {
    const double v = h.percentile_ns(p / 10.0);
    EXPECT_GE(v, prev) << p / 10.0;
    prev = v;
  }
}

TEST(Histogram, Empty) {
  const H h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min_ns(), 0u);
  EXPECT_EQ(h.max_ns(), 0u);
  EXPECT_EQ(h.mean_ns(), 0.0);
  EXPECT_EQ(h.stddev_ns(), 0.0);
  EXPECT_EQ(h.percentile_ns(50), 0.0);
  EXPECT_EQ(h.percentile_ns(100), 0.0);
  for (int i = 0; i < H::kBuckets; ++i) EXPECT_EQ(h.bucket_count(i), 0u);
}

// ---- JSON -----------------------------------------------------------------------------------

TEST(HistogramJson, Encoding) {
  const H h = histogram_of({1000, 1000, 50});
  const json j = to_json(h);
  EXPECT_EQ(j.at("count"), 3);
  EXPECT_EQ(j.at("min_ns"), 50);
  EXPECT_EQ(j.at("max_ns"), 1000);
  EXPECT_EQ(j.at("sum_ns").get<double>(), 2050.0);
  EXPECT_EQ(j.at("sum_sq_ns2").get<double>(), 2'002'500.0);
  const json expect_buckets = json::array({json::array({H::bucket_of(50), 1}), json::array({H::bucket_of(1000), 2})});
  EXPECT_EQ(j.at("buckets"), expect_buckets);
}

TEST(HistogramJson, RoundTrip) {
  for (const H& h : {H{}, histogram_of({7}), histogram_of({0, std::numeric_limits<std::uint64_t>::max()}),
                     histogram_of(log_uniform_samples(5, 3000, 0, 12.5))}) {
    // In memory, and through text as it travels on the wire.
    EXPECT_EQ(histogram_from_json(to_json(h)), h);
    EXPECT_EQ(histogram_from_json(json::parse(to_json(h).dump())), h);
  }
}

TEST(HistogramJson, EmptyRoundTripKeepsMergeNeutral) {
  H e = histogram_from_json(json::parse(to_json(H{}).dump()));
  e.merge(histogram_of({500}));
  EXPECT_EQ(e.min_ns(), 500u);
}

namespace {
json good_json() {
  return json::parse(to_json(histogram_of({1000, 1000, 50})).dump());
}
}  // namespace

TEST(HistogramJson, RejectsBadTypes) {
  EXPECT_NE(error_of(json::array()).find("histogram: not an object"), std::string::npos);
  EXPECT_NE(error_of(json(3)).find("histogram"), std::string::npos);
  for (const char* k : {"count", "min_ns", "max_ns"}) {
    for (const json& bad : {json(-1), json(1.5), json("3"), json(nullptr), json::array()}) {
      json j = good_json();
      j[k] = bad;
      const auto msg = error_of(j);
      EXPECT_NE(msg.find(k), std::string::npos) << k << "=" << bad.dump() << ": " << msg;
    }
    json j = good_json();
    j.erase(k);
    EXPECT_NE(error_of(j).find(k), std::string::npos) << k;
  }
  for (const char* k : {"sum_ns", "sum_sq_ns2"}) {
    for (const json& bad : {json(-1.0), json(-1), json("3"), json(nullptr), json(std::nan("")),
                            json(std::numeric_limits<double>::infinity())}) {
      json j = good_json();
      j[k] = bad;
      const auto msg = error_of(j);
      EXPECT_NE(msg.find(k), std::string::npos) << k << "=" << bad.dump() << ": " << msg;
    }
  }
  for (const json& bad : {json(nullptr), json::object(), json("[]"), json(1)}) {
    json j = good_json();
    j["buckets"] = bad;
    EXPECT_NE(error_of(j).find("buckets"), std::string::npos) << bad.dump();
  }
  json j = good_json();
  j.erase("buckets");
  EXPECT_NE(error_of(j).find("buckets"), std::string::npos);
}

TEST(HistogramJson, RejectsBadBucketEntries) {
  for (const json& bad : {json(5), json::array({1}), json::array({1, 2, 3}), json::array({-1, 3}), json::array({1, -3}),
                          json::array({1.0, 3}), json::array({"1", 3}), json::object({{"i", 1}, {"c", 3}})}) {
    json j = good_json();
    j["count"] = 3u;
    j["buckets"] = json::array({bad});
    const auto msg = error_of(j);
    EXPECT_NE(msg.find("bucket entry"), std::string::npos) << bad.dump() << ": " << msg;
  }
}

TEST(HistogramJson, RejectsIndexOutOfRange) {
  json j = good_json();
  j["count"] = 1u;
  j["buckets"] = json::parse("[[241, 1]]");
  EXPECT_NE(error_of(j).find("index out of range"), std::string::npos);
  j["buckets"] = json::parse("[[18446744073709551615, 1]]");
  EXPECT_NE(error_of(j).find("index out of range"), std::string::npos);
  j["buckets"] = json::parse("[[240, 1]]");
  EXPECT_EQ(histogram_from_json(j).bucket_count(240), 1u);
}

TEST(HistogramJson, RejectsTooManyBuckets) {
  json j = good_json();
  json b = json::array();
  for (int i = 0; i <= H::kBuckets; ++i) b.push_back(json::array({0u, 0u}));
  j["count"] = 0u;
  j["buckets"] = b;
  EXPECT_NE(error_of(j).find("too long"), std::string::npos);
}

TEST(HistogramJson, RejectsCountsNotAddingUp) {
  json j = good_json();
  j["count"] = 4u;
  EXPECT_NE(error_of(j).find("do not add up"), std::string::npos);
  j["count"] = 2u;
  EXPECT_NE(error_of(j).find("do not add up"), std::string::npos);
  j["count"] = 0u;
  EXPECT_NE(error_of(j).find("do not add up"), std::string::npos);
  // Bucket counts that wrap around 2^64 must not pass for a small total.
  j["count"] = 1u;
  j["buckets"] = json::parse("[[0, 18446744073709551615], [1, 2]]");
  EXPECT_NE(error_of(j).find("do not add up"), std::string::npos);
  j["buckets"] = json::parse("[[5, 18446744073709551615], [5, 2]]");
  EXPECT_NE(error_of(j).find("do not add up"), std::string::npos);
}

// The audit's input: min above max would break std::clamp's precondition in the percentiles.
TEST(HistogramJson, MinAboveMaxIsRejected) {
  const json j = json::parse(R"({"count":1,"min_ns":1000,"max_ns":10,"sum_ns":1,"sum_sq_ns2":1,"buckets":[[60,1]]})");
  EXPECT_NE(error_of(j).find("min_ns 1000 is greater than max_ns 10"), std::string::npos);
}
