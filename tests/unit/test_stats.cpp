#include <fabperf/core/stats.hpp>

#include <gtest/gtest.h>

#include <cmath>

using namespace fabperf::stats;

TEST(Stats, MeanMedianStddev) {
  EXPECT_DOUBLE_EQ(mean({1, 2, 3, 4}), 2.5);
  EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_NEAR(stddev({2, 4, 4, 4, 5, 5, 7, 9}), 2.138089935, 1e-9);
  EXPECT_EQ(mean({}), 0);
  EXPECT_EQ(stddev({3}), 0);
}

// Textbook sample (as in SciPy's mannwhitneyu documentation): ages of 5 men and 4 women.
TEST(Stats, MannWhitneyExactTextbook) {
  const auto r = mann_whitney({19, 22, 16, 29, 24}, {20, 11, 17, 12});
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u_a, 17);
  EXPECT_DOUBLE_EQ(r.u_b, 3);
  EXPECT_NEAR(r.p, 0.1111111111, 1e-9);  // 14 of the 126 splits are as extreme
  EXPECT_NEAR(r.rank_biserial, (3.0 - 17.0) / 20.0, 1e-12);
}

TEST(Stats, MannWhitneyCompleteSeparation) {
  // Every b above every a: 2 of C(10,5) = 252 splits are this extreme, p = 2/252.
  const auto r = mann_whitney({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10});
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u_a, 0);
  EXPECT_NEAR(r.p, 2.0 / 252.0, 1e-12);
  EXPECT_DOUBLE_EQ(r.rank_biserial, 1.0);
  // 3 vs 3 can never reach 0.05: 2/20 = 0.1 at best.
  EXPECT_NEAR(mann_whitney({1, 2, 3}, {4, 5, 6}).p, 0.1, 1e-12);
}

TEST(Stats, MannWhitneyExactWithTies) {
  // Identical samples: the observed rank sum is the expected one, every split is as extreme.
  EXPECT_NEAR(mann_whitney({5, 5, 5}, {5, 5, 5}).p, 1.0, 1e-12);
  // {1,2,2} vs {2,3,4}: midranks 1, 3, 3 | 3, 5, 6; rank sum of a = 7 (expected 10.5).
  // Splits of {1,3,3,3,5,6} into 3 with |sum - 10.5| >= 3.5: sums 7 (1+3+3: 3 ways) and
  // 14 (3+5+6: 3 ways) => 6 of 20.
  const auto r = mann_whitney({1, 2, 2}, {2, 3, 4});
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u_a, 1);
  EXPECT_NEAR(r.p, 6.0 / 20.0, 1e-12);
}

TEST(Stats, MannWhitneyNormalApproximation) {
  // 30 vs 30 is past the exact limit: the normal approximation with continuity correction.
  std::vector<double> a, b;
  for (int i = 0; i < 30; ++i) {
    a.push_back(i);
    b.push_back(i + 10.5);
  }
  const auto r = mann_whitney(a, b);
  EXPECT_FALSE(r.exact);
  // U_a: each a_i = i is above b_j = j + 10.5 when j <= i - 11: sum over i of max(0, i - 10) = 190.
  EXPECT_DOUBLE_EQ(r.u_a, 190);
  const double mu = 450, sigma = std::sqrt(30.0 * 30 * 61 / 12);
  const double z = (450 - 190 - 0.5) / sigma;
  EXPECT_NEAR(r.p, std::erfc(z / std::sqrt(2.0)), 1e-12);
  EXPECT_NEAR(std::abs(r.z), z, 1e-12);
  (void)mu;
  // Ties shrink the variance: 0/1 data, 30 vs 30, 10 ones in a and 20 in b.
  std::vector<double> x(30, 0), y(30, 0);
  for (int i = 0; i < 10; ++i) x[static_cast<std::size_t>(i)] = 1;
  for (int i = 0; i < 20; ++i) y[static_cast<std::size_t>(i)] = 1;
  const auto t = mann_whitney(x, y);
  EXPECT_FALSE(t.exact);
  // Groups: 30 zeros, 30 ones; var = n1 n2 / 12 ((N+1) - sum(t^3-t)/(N(N-1)))
  const double var = 900.0 / 12 * (61 - 2 * (27000.0 - 30) / (60.0 * 59));
  const double ua = 10 * 10 + 0.5 * (10 * 20 + 20 * 10);  // a's ones over b's zeros, ties half
  EXPECT_DOUBLE_EQ(t.u_a, ua);
  EXPECT_NEAR(t.p, std::erfc((std::abs(ua - 450) - 0.5) / std::sqrt(var) / std::sqrt(2.0)), 1e-12);
  EXPECT_EQ(mann_whitney({}, {1, 2}).p, 1);
}

TEST(Stats, BootstrapIsSeededAndBracketsTheRatio) {
  const std::vector<double> a{100, 102, 98, 101, 99}, b{110, 112, 108, 111, 109};
  const auto r1 = bootstrap_ratio(a, b);
  const auto r2 = bootstrap_ratio(a, b);
  EXPECT_DOUBLE_EQ(r1.lo, r2.lo);
  EXPECT_DOUBLE_EQ(r1.hi, r2.hi);
  EXPECT_NEAR(r1.ratio, 1.1, 1e-12);
  EXPECT_LT(r1.lo, 1.1);
  EXPECT_GT(r1.hi, 1.1);
  // Resample means lie between the extremes: the ratio cannot leave [108/102, 112/98].
  EXPECT_GE(r1.lo, 108.0 / 102);
  EXPECT_LE(r1.hi, 112.0 / 98);
  // Another seed: another interval, close to the first.
  const auto r3 = bootstrap_ratio(a, b, 0.95, 10000, 7);
  EXPECT_NEAR(r3.lo, r1.lo, 0.005);
  // One value per side: no interval, just the ratio.
  const auto r4 = bootstrap_ratio({100}, {118});
  EXPECT_DOUBLE_EQ(r4.lo, r4.hi);
}

TEST(Stats, VerdictSentences) {
  const auto f = decide({100, 102, 98, 101, 99, 100, 101, 99, 100, 100},
                        {118, 120, 117, 119, 118, 119, 117, 116, 119, 117}, "after");
  EXPECT_EQ(f.direction, Direction::faster);
  EXPECT_NEAR(f.change_pct, 18.0, 0.01);
  EXPECT_EQ(f.sentence.rfind("after is 18% ± ", 0), 0u) << f.sentence;
  EXPECT_NE(f.sentence.find("faster (p < 0.001, 10 vs 10 trials)"), std::string::npos) << f.sentence;

  const auto s = decide({100, 101, 99, 100, 100}, {90, 91, 89, 90, 90}, "B");
  EXPECT_EQ(s.direction, Direction::slower);
  EXPECT_NE(s.sentence.find("B is 10% ± "), std::string::npos) << s.sentence;
  EXPECT_NE(s.sentence.find("slower (p < 0.01, 5 vs 5 trials)"), std::string::npos) << s.sentence;

  // Overlapping samples: no difference, and the noise the trials could resolve.
  const auto n = decide({100, 104, 97, 101, 99}, {102, 98, 100, 103, 97}, "after");
  EXPECT_EQ(n.direction, Direction::no_difference);
  EXPECT_EQ(n.sentence.rfind("no difference this fabric's noise (±", 0), 0u) << n.sentence;

  // A clear but tiny difference is no difference that matters.
  const auto t = decide({100.0, 100.1, 100.0, 100.1, 100.0}, {100.5, 100.6, 100.5, 100.6, 100.5}, "after");
  EXPECT_EQ(t.direction, Direction::no_difference);
  EXPECT_EQ(t.sentence.rfind("no difference larger than 2.0%", 0), 0u) << t.sentence;

  const auto u = decide({100}, {118}, "after");
  EXPECT_EQ(u.direction, Direction::unreplicated);
  EXPECT_NE(u.sentence.find("after is 18% faster (unreplicated: 1 vs 1 trial"), std::string::npos) << u.sentence;

  // 3 vs 3 cannot reach p < 0.05 however far apart: the verdict must not claim a difference.
  const auto few = decide({1, 2, 3}, {40, 50, 60}, "after");
  EXPECT_EQ(few.direction, Direction::no_difference);
  EXPECT_EQ(few.sentence.rfind("too few trials to decide: 3 vs 3 trials cannot reach p < 0.05 (at best p = 0.1)", 0),
            0u)
      << few.sentence;
  EXPECT_EQ(format_p(0.0004), "p < 0.001");
  EXPECT_EQ(format_p(0.032), "p = 0.032");
}
