// Pure statistics for trial sets (include/fabperf/core/stats.hpp).
#include <fabperf/core/stats.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <numeric>

namespace fabperf::stats {

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (const double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

namespace {

// C(n, k) as a double, stopping early once it passes `cap` (then only compared against it).
double choose_capped(std::size_t n, std::size_t k, double cap) {
  k = std::min(k, n - k);
  double c = 1;
  for (std::size_t i = 1; i <= k; ++i) {
    c = c * static_cast<double>(n - k + i) / static_cast<double>(i);
    if (c > cap) return c;
  }
  return c;
}

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double quantile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(std::floor(pos));
  if (i + 1 >= v.size()) return v.back();
  const double f = pos - static_cast<double>(i);
  return v[i] * (1 - f) + v[i + 1] * f;
}

}  // namespace

MannWhitney mann_whitney(const std::vector<double>& a, const std::vector<double>& b) {
  MannWhitney r;
  const std::size_t na = a.size(), nb = b.size(), n = na + nb;
  if (na == 0 || nb == 0) return r;
  // Pooled midranks, doubled so that every rank is an integer.
  std::vector<std::pair<double, int>> pooled;
  pooled.reserve(n);
  for (const double x : a) pooled.emplace_back(x, 0);
  for (const double x : b) pooled.emplace_back(x, 1);
  std::sort(pooled.begin(), pooled.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<long> rank2(n);
  double tie_term = 0;  // sum of t^3 - t over tie groups
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && pooled[j].first == pooled[i].first) ++j;
    const long mid2 = static_cast<long>(i + 1 + j);  // 2 x the mean of ranks i+1..j
    for (std::size_t k = i; k < j; ++k) rank2[k] = mid2;
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  long ra2 = 0;  // 2 x the rank sum of a
  for (std::size_t i = 0; i < n; ++i) {
    if (pooled[i].second == 0) ra2 += rank2[i];
  }
  const double nad = static_cast<double>(na), nbd = static_cast<double>(nb), nd = static_cast<double>(n);
  r.u_a = static_cast<double>(ra2) / 2.0 - nad * (nad + 1) / 2.0;
  r.u_b = nad * nbd - r.u_a;
  r.rank_biserial = (r.u_b - r.u_a) / (nad * nbd);
  const double mu = nad * nbd / 2.0;

  if (choose_capped(n, na, static_cast<double>(kExactLimit)) <= static_cast<double>(kExactLimit)) {
    // The exact permutation distribution of a's (doubled) rank sum: count, for every size k and
    // sum s, the subsets of the pooled ranks with that size and sum.
    const long max_sum = std::accumulate(rank2.begin(), rank2.end(), 0L);
    std::vector<std::vector<double>> ways(na + 1, std::vector<double>(static_cast<std::size_t>(max_sum) + 1, 0.0));
    ways[0][0] = 1;
    for (std::size_t i = 0; i < n; ++i) {
      const auto w = static_cast<std::size_t>(rank2[i]);
      for (std::size_t k = std::min(na, i + 1); k >= 1; --k) {
        for (std::size_t s = static_cast<std::size_t>(max_sum); s >= w; --s) ways[k][s] += ways[k - 1][s - w];
      }
    }
    const double expected2 = nad * (nd + 1);  // 2 x E[rank sum of a]
    const double observed = std::abs(static_cast<double>(ra2) - expected2);
    double total = 0, extreme = 0;
    for (std::size_t s = 0; s < ways[na].size(); ++s) {
      total += ways[na][s];
      if (std::abs(static_cast<double>(s) - expected2) >= observed - 1e-9) extreme += ways[na][s];
    }
    r.exact = true;
    r.p = std::min(1.0, extreme / total);
    return r;
  }
  const double var = nad * nbd / 12.0 * ((nd + 1) - tie_term / (nd * (nd - 1)));
  if (var <= 0) {
    r.p = 1;  // every value tied: nothing tells the samples apart
    return r;
  }
  const double dev = std::max(0.0, std::abs(r.u_a - mu) - 0.5);
  r.z = dev / std::sqrt(var) * (r.u_a >= mu ? 1 : -1);
  r.p = std::min(1.0, std::erfc(std::abs(r.z) / std::sqrt(2.0)));
  return r;
}

double min_p(std::size_t n_a, std::size_t n_b) {
  return std::min(1.0, 2.0 / choose_capped(n_a + n_b, n_a, HUGE_VAL));
}

RatioInterval bootstrap_ratio(const std::vector<double>& a, const std::vector<double>& b, double confidence,
                              int resamples, std::uint64_t seed) {
  RatioInterval r;
  const double ma = mean(a), mb = mean(b);
  if (a.empty() || b.empty() || ma <= 0) return r;
  r.ratio = mb / ma;
  r.lo = r.hi = r.ratio;
  if (a.size() < 2 && b.size() < 2) return r;
  std::uint64_t state = seed;
  std::vector<double> ratios;
  ratios.reserve(static_cast<std::size_t>(std::max(resamples, 1)));
  const auto resample_mean = [&](const std::vector<double>& v) {
    double s = 0;
    for (std::size_t i = 0; i < v.size(); ++i) s += v[splitmix64(state) % v.size()];
    return s / static_cast<double>(v.size());
  };
  for (int i = 0; i < resamples; ++i) {
    const double ra = resample_mean(a);
    const double rb = resample_mean(b);
    if (ra > 0) ratios.push_back(rb / ra);
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1 - confidence) / 2;
  r.lo = quantile_sorted(ratios, tail);
  r.hi = quantile_sorted(ratios, 1 - tail);
  return r;
}

std::string_view to_string(Direction d) {
  static constexpr std::string_view kNames[] = {"faster", "slower", "no difference", "unreplicated"};
  return kNames[static_cast<int>(d)];
}

std::string format_p(double p) {
  if (p < 0.001) return "p < 0.001";
  if (p < 0.01) return "p < 0.01";
  return fmt::format("p = {:.2g}", p);
}

namespace {
std::string pct_text(double v) {
  // Whole percent from 10% up (as rounded to one decimal, so 9.96 reads "10%", not "10.0%").
  const double a = std::round(std::abs(v) * 10) / 10;
  return a >= 10 ? fmt::format("{:.0f}%", a) : fmt::format("{:.1f}%", a);
}
}  // namespace

Decision decide(const std::vector<double>& a, const std::vector<double>& b, const std::string& b_name,
                const VerdictOptions& o) {
  Decision d;
  d.n_a = a.size();
  d.n_b = b.size();
  d.mean_a = mean(a);
  d.mean_b = mean(b);
  d.cv_a_pct = d.mean_a > 0 ? 100 * stddev(a) / d.mean_a : 0;
  d.cv_b_pct = d.mean_b > 0 ? 100 * stddev(b) / d.mean_b : 0;
  d.change_pct = d.mean_a > 0 ? 100 * (d.mean_b / d.mean_a - 1) : 0;
  const auto ci = bootstrap_ratio(a, b);
  d.ci_lo_pct = 100 * (ci.lo - 1);
  d.ci_hi_pct = 100 * (ci.hi - 1);
  d.pm_pct = (d.ci_hi_pct - d.ci_lo_pct) / 2;
  d.test = mann_whitney(a, b);
  const std::string trials = fmt::format("{} vs {} trial{}", d.n_a, d.n_b, d.n_b == 1 ? "" : "s");
  const char* way = d.change_pct >= 0 ? "faster" : "slower";
  if (d.n_a < 2 || d.n_b < 2) {
    d.direction = Direction::unreplicated;
    d.sentence = fmt::format(
        "{} is {} {} (unreplicated: {}; a single run cannot tell a change from run-to-run noise: "
        "--repeat 5 on each side can)",
        b_name, pct_text(d.change_pct), way, trials);
    return d;
  }
  // The exact test's floor: below the level asked for, no data could decide, and the sentence
  // must say so, not "no difference".
  const double floor_p = min_p(d.n_a, d.n_b);
  if (floor_p >= o.alpha) {
    d.direction = Direction::no_difference;
    d.sentence = fmt::format(
        "too few trials to decide: {} cannot reach p < {:.2g} (at best p = {:.2g}); {} {:+.1f}% ± {} "
        "(--repeat 5 or more on each side)",
        trials, o.alpha, floor_p, b_name, d.change_pct, pct_text(d.pm_pct));
    return d;
  }
  const bool excludes_zero = d.ci_lo_pct > 0 || d.ci_hi_pct < 0;
  const bool significant = d.test.p < o.alpha && excludes_zero;
  const bool large = significant && std::abs(d.change_pct) >= o.min_effect_pct;
  d.direction = !large ? Direction::no_difference : d.change_pct > 0 ? Direction::faster : Direction::slower;
  if (large) {
    d.sentence = fmt::format("{} is {} ± {} {} ({}, {})", b_name, pct_text(d.change_pct), pct_text(d.pm_pct), way,
                             format_p(d.test.p), trials);
  } else if (significant) {
    d.sentence = fmt::format("no difference larger than {} ({} {:+.1f}% ± {}, {}, {})", pct_text(o.min_effect_pct),
                             b_name, d.change_pct, pct_text(d.pm_pct), format_p(d.test.p), trials);
  } else {
    d.sentence = fmt::format("no difference this fabric's noise (±{}) can show ({} {:+.1f}%, {}, {})",
                             pct_text(d.pm_pct), b_name, d.change_pct, format_p(d.test.p), trials);
  }
  return d;
}

}  // namespace fabperf::stats
