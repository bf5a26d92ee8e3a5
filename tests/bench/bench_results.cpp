// Peak memory of writing one run's result, the two ways: `inmemory` (compute_report, render_json,
// dump, write: what `fabperf run --json` did before) and `stream` (ResultStream node by node, as
// the coordinator does now). A synthetic all-to-all of N servers x N clients, P connections per
// pair plus a probe, with the fields a real RESULT carries. Prints the peak RSS of this process.
//   fabperf_bench_results inmemory|stream N P FILE
#include <fabperf/report/report.hpp>
#include <fabperf/report/result_stream.hpp>

#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

using namespace fabperf;

namespace {

NodeRecord make_node(std::uint32_t i, std::uint32_t n, std::uint32_t parallel) {
  NodeRecord r;
  r.index = i;
  r.name = "10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":6668";
  r.address = r.name.substr(0, r.name.find(':'));
  r.hostname = "node" + std::to_string(i);
  r.is_server = i < n;
  r.is_client = i >= n;
  AgentResult a;
  a.node_index = i;
  a.window_s = 8.0;
  a.cpu_busy_pct = 42.5;
  a.process_cpu_s = 3.2;
  const std::uint32_t peers_from = r.is_server ? n : 0;
  for (std::uint32_t peer = peers_from; peer < peers_from + n; ++peer) {
    for (std::uint32_t c = 0; c <= parallel; ++c) {
      FlowResult f;
      f.role = r.is_server ? FlowRole::server : FlowRole::client;
      f.op = c == parallel ? FlowOp::probe : FlowOp::write;
      f.peer_node = peer;
      f.local = r.address + ":" + std::to_string(40000 + peer * 16 + c);
      f.remote = "10.1.0." + std::to_string(peer % 250) + ":" + std::to_string(50000 + c);
      f.tx_bytes_window = 123456789ull * (c + 1);
      f.tx_bytes_total = f.tx_bytes_window + 4096;
      f.msgs_window = 1000 + c;
      f.tcp.valid = true;
      f.tcp.rtt_us = 57;
      f.tcp.snd_mss = 8948;
      f.tcp.snd_cwnd = 10;
      a.flows.push_back(std::move(f));
    }
  }
  r.result = std::move(a);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s inmemory|stream N PARALLEL FILE\n", argv[0]);
    return 2;
  }
  const std::string how = argv[1];
  const auto n = static_cast<std::uint32_t>(std::atoi(argv[2]));
  const auto parallel = static_cast<std::uint32_t>(std::atoi(argv[3]));
  const std::string path = argv[4];
  RunRecord header;
  header.test_id = "0123456789abcdef";
  header.started_at = "2026-11-30T06:00:00Z";
  if (how == "inmemory") {
    RunRecord run = header;
    for (std::uint32_t i = 0; i < 2 * n; ++i) run.nodes.push_back(make_node(i, n, parallel));
    const Report r = compute_report(run);
    std::ofstream(path) << render_json(r).dump(2) << "\n";
  } else {
    for (std::uint32_t i = 0; i < 2 * n; ++i) {
      NodeRecord nr = make_node(i, n, parallel);
      nr.result.reset();
      header.nodes.push_back(std::move(nr));
    }
    ResultStream rs(path, false);
    rs.started(header);
    for (std::uint32_t i = 0; i < 2 * n; ++i) rs.node(make_node(i, n, parallel));  // as RESULTs arrive
    (void)rs.finish(header);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("%s: %u x %u all-to-all, %u+1 connections per pair: peak RSS %.1f MB\n", how.c_str(), n, n, parallel,
              static_cast<double>(ru.ru_maxrss) / 1024.0);
  return 0;
}
