#include <fabperf/error.hpp>
#include <fabperf/units.hpp>
#include <gtest/gtest.h>

using namespace fabperf;

TEST(ParseSize, NsdperfStyleSuffixes) {
  EXPECT_EQ(parse_size("4M", "--buffsize"), 4194304u);
  EXPECT_EQ(parse_size("256K", "--buffsize"), 262144u);
  EXPECT_EQ(parse_size("4096", "--buffsize"), 4096u);
  EXPECT_EQ(parse_size("1GiB", "--buffsize"), 1073741824u);
  EXPECT_EQ(parse_size("0.5M", "--buffsize"), 524288u);
}
