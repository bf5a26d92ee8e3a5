#include <fabperf/core/error.hpp>
#include <fabperf/core/fields.hpp>
#include <fabperf/core/histogram.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <nlohmann/json.hpp>

namespace fabperf {

int LatencyHistogram::bucket_of(std::uint64_t ns) noexcept {
  if (ns <= 1) return 0;
  const int i = static_cast<int>(std::floor(std::log10(static_cast<double>(ns)) * kBucketsPerDecade));
  return std::clamp(i, 0, kBuckets - 1);
}

double LatencyHistogram::bucket_lower_ns(int index) noexcept {
  return std::pow(10.0, static_cast<double>(index) / kBucketsPerDecade);
}
double LatencyHistogram::bucket_upper_ns(int index) noexcept {
  return bucket_lower_ns(index + 1);
}

void LatencyHistogram::record(std::uint64_t ns) noexcept {
  ++buckets_[static_cast<std::size_t>(bucket_of(ns))];
  ++count_;
  min_ = std::min(min_, ns);
  max_ = std::max(max_, ns);
  const auto d = static_cast<double>(ns);
  sum_ += d;
  sum_sq_ += d * d;
}

void LatencyHistogram::merge(const LatencyHistogram& o) noexcept {
  for (std::size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
  sum_ += o.sum_;
  sum_sq_ += o.sum_sq_;
}

double LatencyHistogram::mean_ns() const noexcept {
  return count_ ? sum_ / static_cast<double>(count_) : 0.0;
}

double LatencyHistogram::stddev_ns() const noexcept {
  if (count_ < 2) return 0.0;
  const double n = static_cast<double>(count_);
  const double var = (sum_sq_ - sum_ * sum_ / n) / (n - 1);
  return var > 0 ? std::sqrt(var) : 0.0;
}

double LatencyHistogram::percentile_ns(double p) const noexcept {
  if (count_ == 0) return 0.0;
  p = std::clamp(p, 0.0, 100.0);
  // Rank of the wanted sample (1-based), nearest-rank definition.
  // p/100*count is inexact in binary (99.9/100*1000 = 999.0000000000001): a product within
  // rounding error of a whole number is that number, or ceil() would skip to the next sample.
  double exact = p / 100.0 * static_cast<double>(count_);
  if (std::abs(exact - std::round(exact)) <= 1e-9 * std::max(1.0, exact)) exact = std::round(exact);
  const double rank = std::max(1.0, std::ceil(exact));
  double cum = 0;
  for (int i = 0; i < kBuckets; ++i) {
    const auto c = static_cast<double>(buckets_[static_cast<std::size_t>(i)]);
    if (c == 0) continue;
    if (cum + c >= rank) {
      const double frac = (rank - cum) / c;
      const double lo = bucket_lower_ns(i);
      const double hi = bucket_upper_ns(i);
      const double v = lo * std::pow(hi / lo, frac);
      return std::clamp(v, static_cast<double>(min_ns()), static_cast<double>(max_));
    }
    cum += c;
  }
  return static_cast<double>(max_);
}

nlohmann::json to_json(const LatencyHistogram& h) {
  nlohmann::json b = nlohmann::json::array();
  for (int i = 0; i < LatencyHistogram::kBuckets; ++i) {
    // The index goes out unsigned: histogram_from_json accepts only unsigned integers.
    if (h.buckets_[static_cast<std::size_t>(i)])
      b.push_back({static_cast<std::uint64_t>(i), h.buckets_[static_cast<std::size_t>(i)]});
  }
  return {{"count", h.count_}, {"min_ns", h.min_ns()},    {"max_ns", h.max_},
          {"sum_ns", h.sum_},  {"sum_sq_ns2", h.sum_sq_}, {"buckets", std::move(b)}};
}

LatencyHistogram histogram_from_json(const nlohmann::json& j) {
  auto fail = [](const std::string& why) { return ProtocolError("histogram: " + why); };
  if (!j.is_object()) throw fail("not an object");
  const Fields f(j, "histogram");
  LatencyHistogram h;
  h.count_ = f.u64("count", 0, UINT64_MAX);
  const auto mn = f.u64("min_ns", 0, UINT64_MAX);
  h.max_ = f.u64("max_ns", 0, UINT64_MAX);
  // Percentiles clamp into [min, max]: an inverted pair breaks std::clamp's precondition.
  if (h.count_ != 0 && mn > h.max_) throw fail(fmt::format("min_ns {} is greater than max_ns {}", mn, h.max_));
  h.min_ = h.count_ ? mn : ~std::uint64_t{0};
  h.sum_ = f.num("sum_ns", 0, DBL_MAX);
  h.sum_sq_ = f.num("sum_sq_ns2", 0, DBL_MAX);
  const auto it = j.find("buckets");
  if (it == j.end() || !it->is_array() || it->size() > static_cast<std::size_t>(LatencyHistogram::kBuckets)) {
    throw fail("'buckets' missing, not an array or too long");
  }
  std::uint64_t total = 0;
  for (const auto& e : *it) {
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_unsigned() || !e[1].is_number_unsigned()) {
      throw fail("bucket entry is not [index, count]");
    }
    const auto idx = e[0].get<std::uint64_t>();
    if (idx >= static_cast<std::uint64_t>(LatencyHistogram::kBuckets)) throw fail("bucket index out of range");
    const auto c = e[1].get<std::uint64_t>();
    // Checked before adding, so counts that wrap around 2^64 cannot fake a matching total.
    if (c > h.count_ - total) throw fail("bucket counts do not add up to 'count'");
    h.buckets_[idx] += c;
    total += c;
  }
  if (total != h.count_) throw fail("bucket counts do not add up to 'count'");
  return h;
}

}  // namespace fabperf
