// The /proc and /sys reads of the run loop (ARP neighbours, a thread's CPU time, a NUMA node's
// CPUs), on a captured tree: tests/data/hostproc is the root prefix.
#include <fabperf/sysinfo/sysstat.hpp>

#include <gtest/gtest.h>

using namespace fabperf;

namespace {
const std::string kRoot = std::string(FABPERF_TEST_DATA) + "/hostproc";
}

TEST(HostProc, ArpTableOfOneDevice) {
  const auto arp = read_arp_table("bond0", kRoot);
  ASSERT_EQ(arp.size(), 2u);
  EXPECT_EQ(arp.at("198.18.10.2"), "aa:bb:cc:00:00:02");
  EXPECT_EQ(arp.at("198.18.11.2"), "aa:bb:cc:00:01:02");
  EXPECT_EQ(read_arp_table("eth0", kRoot).at("10.0.0.1"), "52:54:00:12:34:56");
  EXPECT_TRUE(read_arp_table("eth9", kRoot).empty());
  EXPECT_TRUE(read_arp_table("bond0", "/nonexistent").empty());
}

TEST(HostProc, ThreadCpuTicksAfterANameWithSpacesAndParentheses) {
  // utime 250 + stime 75 ticks, the name "send-0 (x) y".
  const double s = read_thread_cpu_s(4242, kRoot);
  EXPECT_GT(s, 0.0);
  EXPECT_EQ(parse_task_stat_ticks("1 (a) R 1 1 1 0 -1 0 0 0 0 0 250 75 0"), 325);
  EXPECT_EQ(parse_task_stat_ticks("garbage"), -1);
  EXPECT_EQ(parse_task_stat_ticks("1 (a) R 1 1"), -1);  // cut short
  EXPECT_EQ(parse_task_stat_ticks("1 (a) R 1 1 1 0 -1 0 0 0 0 0 x 75 0"), -1);
  EXPECT_EQ(read_thread_cpu_s(1, kRoot), -1);  // gone
}

TEST(HostProc, NumaNodeCpus) {
  const auto cpus = read_numa_cpus(1, kRoot);
  ASSERT_EQ(cpus.size(), 16u);
  EXPECT_EQ(cpus.front(), 8);
  EXPECT_EQ(cpus.back(), 31);
  EXPECT_TRUE(read_numa_cpus(0, kRoot).empty());  // not in the tree
  EXPECT_TRUE(read_numa_cpus(-1, kRoot).empty());
}
