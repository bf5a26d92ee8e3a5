// CPU cost of one interval's counter sample on an agent (docs/counters.md, "What sampling
// costs"): the interface's sysfs statistics, its driver statistics (ethtool ioctls), its root
// qdisc (rtnetlink) and the host's MIB and softnet files. Run by hand, on the interface to
// measure (FABPERF_BENCH_IF, default lo), e.g. inside a namespace lab host:
//   ip netns exec fp-TAG-h1 env FABPERF_BENCH_IF=eth0 build/tests/fabperf_bench_counters
// The CPU column is the figure that matters: the agent's sampling thread spends it once per
// interval (default 1 s). BM_DipDiagnosis is the coordinator's side: the dip diagnosis of one
// result whose link dips every other interval (issue 28: its cost must grow linearly).
#include <fabperf/report/diagnosis.hpp>
#include <fabperf/sysinfo/counters.hpp>
#include <fabperf/sysinfo/links.hpp>

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

// A link sampled state.range(0) times, every other interval at a tenth of the rate (a dip), with
// 20 named link counters and 50 host counters per sample.
void BM_DipDiagnosis(benchmark::State& state) {
  using namespace fabperf;
  const auto n = static_cast<int>(state.range(0));
  AgentResult r;
  LinkResult l;
  l.info.name = "eth0";
  std::uint64_t tx = 0;
  for (int i = 0; i <= n; ++i) {
    tx += i % 2 ? 10'000'000 : 100'000'000;
    LinkSample s;
    s.t_ns = std::int64_t{i} * 1'000'000'000;
    s.counters.present = true;
    s.counters.tx_bytes = tx;
    l.samples.push_back(s);
    CounterValues link, host;
    for (int k = 0; k < 20; ++k) link.emplace_back("drv.counter_" + std::to_string(k), std::uint64_t(i * k));
    for (int k = 0; k < 50; ++k) host.emplace_back("Tcp.Counter" + std::to_string(k), std::uint64_t(i * (k % 3)));
    l.stats.push_back({s.t_ns, std::move(link)});
    r.host_counters.push_back({s.t_ns, std::move(host)});
  }
  r.links.push_back(std::move(l));
  for (auto _ : state) benchmark::DoNotOptimize(counter_report(r));
  state.SetComplexityN(n);
}
BENCHMARK(BM_DipDiagnosis)->RangeMultiplier(4)->Range(1024, 16384)->Unit(benchmark::kMillisecond)->Complexity();

}  // namespace

BENCHMARK_MAIN();
