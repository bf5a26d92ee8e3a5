// Statistics for deciding between two sets of trials (before/after, A/B): means, a bootstrap
// confidence interval of the ratio of means, the Mann-Whitney U test and its effect size, and
// the verdict sentence built from them. Pure and deterministic: the bootstrap is seeded, so the
// same samples always give the same interval (docs/statistics.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fabperf::stats {

double mean(const std::vector<double>& v);    // 0 for an empty set
double median(std::vector<double> v);         // 0 for an empty set
double stddev(const std::vector<double>& v);  // sample (n-1); 0 below two values

// Two-sided Mann-Whitney U test of "a and b come from one distribution".
struct MannWhitney {
  double u_a{0};      // pairs (x in a, y in b) with x > y, ties counted 1/2
  double u_b{0};      // n_a * n_b - u_a
  double p{1};        // two-sided p-value
  bool exact{false};  // true: the permutation distribution of the rank sum was enumerated
  double z{0};        // the normal approximation's z (with tie and continuity correction); 0 when exact
  // Effect size: the rank-biserial correlation (= Cliff's delta), (u_b - u_a) / (n_a n_b), in
  // -1..1: +1 when every b is larger than every a. Its sign is b's direction relative to a.
  double rank_biserial{0};
};
// Exact (every split of the pooled midranks enumerated) when C(n_a + n_b, n_a) is at most
// kExactLimit, ties included; otherwise the normal approximation with the tie-corrected variance
// and a continuity correction. Either sample empty: p = 1.
inline constexpr std::uint64_t kExactLimit = 200000;
MannWhitney mann_whitney(const std::vector<double>& a, const std::vector<double>& b);
// The smallest two-sided p the exact test of n_a vs n_b values can reach: 2 / C(n_a + n_b, n_a).
double min_p(std::size_t n_a, std::size_t n_b);

// Percentile bootstrap interval of mean(b) / mean(a): both samples resampled with replacement,
// `resamples` times, from a fixed seed (splitmix64, so every platform draws the same numbers).
struct RatioInterval {
  double ratio{0};  // mean(b) / mean(a) of the samples themselves
  double lo{0}, hi{0};
};
inline constexpr std::uint64_t kBootstrapSeed = 0x5eed'fab0'9e3f'0001ULL;
RatioInterval bootstrap_ratio(const std::vector<double>& a, const std::vector<double>& b, double confidence = 0.95,
                              int resamples = 10000, std::uint64_t seed = kBootstrapSeed);

enum class Direction { faster, slower, no_difference, unreplicated };
std::string_view to_string(Direction d);

struct VerdictOptions {
  double alpha{0.05};
  // A difference smaller than this (percent) is reported as no difference even when it is
  // statistically clear: shaped or very stable links make 0.3% "significant", and it does not
  // matter to anyone deciding on a fabric.
  double min_effect_pct{2.0};
};

// Everything decided about one quantity (a link's MB/s, a bond member's, the aggregate).
struct Decision {
  std::size_t n_a{0}, n_b{0};
  double mean_a{0}, mean_b{0};
  double cv_a_pct{0}, cv_b_pct{0};    // run-to-run coefficient of variation of each side
  double change_pct{0};               // 100 (mean_b / mean_a - 1)
  double ci_lo_pct{0}, ci_hi_pct{0};  // the bootstrap 95% interval of that change
  double pm_pct{0};                   // half the interval's width: the "±" of the verdict
  MannWhitney test;
  Direction direction{Direction::unreplicated};
  std::string sentence;  // "after is 18% ± 3% faster (p < 0.01, 10 vs 10 trials)"
};
// `b_name` names the second side in the sentence ("after", "B"). With fewer than two trials on
// either side the direction is `unreplicated` and the sentence says so.
Decision decide(const std::vector<double>& a, const std::vector<double>& b, const std::string& b_name,
                const VerdictOptions& o = {});

// "p < 0.001", "p < 0.01", "p = 0.032"
std::string format_p(double p);

}  // namespace fabperf::stats
