// CPU cost of one interval's counter sample on an agent (docs/counters.md, "What sampling
// costs"): the interface's sysfs statistics, its driver statistics (ethtool ioctls), its root
// qdisc (rtnetlink) and the host's MIB and softnet files. Run by hand, on the interface to
// measure (FABPERF_BENCH_IF, default lo), e.g. inside a namespace lab host:
//   ip netns exec fp-TAG-h1 env FABPERF_BENCH_IF=eth0 build/tests/fabperf_bench_counters
// The CPU column is the figure that matters: the agent's sampling thread spends it once per
// interval (default 1 s).
#include <fabperf/counters.hpp>
#include <fabperf/links.hpp>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

namespace {

std::string bench_if() {
  const char* e = std::getenv("FABPERF_BENCH_IF");
  return e && *e ? e : "lo";
}

void BM_InterfaceSysfs(benchmark::State& state) {
  const std::string ifname = bench_if();
  for (auto _ : state) benchmark::DoNotOptimize(fabperf::read_link_counters(ifname));
}
BENCHMARK(BM_InterfaceSysfs);

void BM_EthtoolStats(benchmark::State& state) {
  const std::string ifname = bench_if();
  for (auto _ : state) benchmark::DoNotOptimize(fabperf::read_ethtool_stats(ifname));
}
BENCHMARK(BM_EthtoolStats);

void BM_QdiscStats(benchmark::State& state) {
  const std::string ifname = bench_if();
  for (auto _ : state) benchmark::DoNotOptimize(fabperf::read_qdisc_counters(ifname));
}
BENCHMARK(BM_QdiscStats);

void BM_HostNetCounters(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(fabperf::read_host_net_counters());
}
BENCHMARK(BM_HostNetCounters);

// Everything one interval reads for a node with one link (run_loop.cpp: sample_links and
// sample_host_counters).
void BM_FullSampleOneLink(benchmark::State& state) {
  const std::string ifname = bench_if();
  for (auto _ : state) {
    benchmark::DoNotOptimize(fabperf::read_link_counters(ifname));
    benchmark::DoNotOptimize(fabperf::read_link_named_counters(ifname));
    benchmark::DoNotOptimize(fabperf::read_host_net_counters());
  }
}
BENCHMARK(BM_FullSampleOneLink);

}  // namespace

BENCHMARK_MAIN();
