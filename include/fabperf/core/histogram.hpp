// Latency histogram with log-spaced buckets: 20 per decade (each ~12% wide) from 1 ns to
// 1000 s, so microsecond resolution holds where nsdperf's 1 ms buckets see nothing. Exact
// count/min/max/sum/sum of squares ride along for mean and standard deviation.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

namespace fabperf {

class LatencyHistogram {
 public:
  static constexpr int kBucketsPerDecade = 20;
  static constexpr int kDecades = 12;                                // 1 ns .. 10^12 ns
  static constexpr int kBuckets = kBucketsPerDecade * kDecades + 1;  // last one: overflow

  void record(std::uint64_t ns) noexcept;
  void merge(const LatencyHistogram& other) noexcept;

  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  [[nodiscard]] std::uint64_t min_ns() const noexcept { return count_ ? min_ : 0; }
  [[nodiscard]] std::uint64_t max_ns() const noexcept { return max_; }
  [[nodiscard]] double mean_ns() const noexcept;
  [[nodiscard]] double stddev_ns() const noexcept;
  // p in [0, 100]. Interpolates geometrically inside the bucket, clamped to [min, max].
  [[nodiscard]] double percentile_ns(double p) const noexcept;

  static int bucket_of(std::uint64_t ns) noexcept;
  static double bucket_lower_ns(int index) noexcept;
  static double bucket_upper_ns(int index) noexcept;
  [[nodiscard]] std::uint64_t bucket_count(int index) const noexcept { return buckets_[index]; }

  friend bool operator==(const LatencyHistogram&, const LatencyHistogram&) = default;

 private:
  std::array<std::uint64_t, kBuckets> buckets_{};
  std::uint64_t count_{0};
  std::uint64_t min_{~std::uint64_t{0}};
  std::uint64_t max_{0};
  double sum_{0};
  double sum_sq_{0};

  friend nlohmann::json to_json(const LatencyHistogram& h);
  friend LatencyHistogram histogram_from_json(const nlohmann::json& j);
};

// Sparse encoding: {"count","min_ns","max_ns","sum_ns","sum_sq_ns2","buckets":[[index,count],...]}
nlohmann::json to_json(const LatencyHistogram& h);
LatencyHistogram histogram_from_json(const nlohmann::json& j);  // throws ProtocolError

}  // namespace fabperf
