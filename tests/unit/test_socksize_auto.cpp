// --socksize auto: the bandwidth-delay arithmetic.
#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/core/spec.hpp>

#include <gtest/gtest.h>

using fabperf::socksize_from_bdp;

TEST(SocksizeAuto, TwiceTheBandwidthDelayProductRoundedUpTo64K) {
  // 10 Gb/s x 1 ms = 1.25 MB in flight; twice that is 2.5 MB = 38.15 x 64 KiB -> 39 x 64 KiB.
  EXPECT_EQ(socksize_from_bdp(10'000, 1'000'000), 39u * 65536u);
  // 40 Gb/s x 200 us = 1 MB; 2 MB = 30.5 x 64 KiB -> 31 x 64 KiB.
  EXPECT_EQ(socksize_from_bdp(40'000, 200'000), 31u * 65536u);
  // 1 Gb/s x 1.048576 ms = 131072 B; twice that is exactly 4 x 64 KiB.
  EXPECT_EQ(socksize_from_bdp(1'000, 1'048'576), 4u * 65536u);
}

TEST(SocksizeAuto, ClampedToAMinimumAndToTheLimit) {
  EXPECT_EQ(socksize_from_bdp(1'000, 10'000), 256u << 10);  // 1.25 kB BDP: the floor
  EXPECT_EQ(socksize_from_bdp(400'000, 0), 256u << 10);
  EXPECT_EQ(socksize_from_bdp(100'000, 10'000'000), fabperf::limits::kMaxSocksize);  // 250 MB wanted
  EXPECT_EQ(socksize_from_bdp(400'000, 2'000'000), fabperf::limits::kMaxSocksize);   // exactly 200 MB
}

TEST(SocksizeAuto, UnknownSpeedLeavesItToTheOs) {
  EXPECT_EQ(socksize_from_bdp(-1, 1'000'000), 0u);
  EXPECT_EQ(socksize_from_bdp(0, 1'000'000), 0u);
}
