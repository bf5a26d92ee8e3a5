// Micro-benchmarks for the control path: encoding and decoding a large RESULT frame, and
// computing a report for a large run. Not a test: run by hand (fabperf_bench_control).
#include <benchmark/benchmark.h>

#include <fabperf/proto/agent_result.hpp>
#include <fabperf/proto/proto.hpp>
#include <fabperf/report/report.hpp>

#include <cstdint>
#include <string>
#include <vector>

using namespace fabperf;

namespace {

FlowResult make_flow(std::uint32_t id, FlowRole role, std::uint32_t peer) {
  FlowResult f;
  f.id = id;
  f.role = role;
  f.op = FlowOp::write;
  f.peer_node = peer;
  f.local = "10.1.2.3:" + std::to_string(40000 + id % 20000);
  f.remote = "10.1.9.8:6001";
  f.tx_bytes_total = 9'000'000'000ull + id;
  f.rx_bytes_total = 1'000'000ull + id;
  f.tx_bytes_window = 8'000'000'000ull + id;
  f.rx_bytes_window = 900'000ull + id;
  f.msgs_window = 1900 + id;
  f.retrans_window = id % 7;
  f.tcp = {true, id % 11, 120 + id % 50, 30, 8948, 8948, 9000, 640};
  return f;
}

AgentResult make_result(std::uint32_t node, std::size_t flows, FlowRole role, std::uint32_t first_peer,
                        std::uint32_t peers) {
  AgentResult r;
  r.node_index = node;
  r.hostname = "node" + std::to_string(node);
  r.window_s = 8.0;
  r.cpu_busy_pct = 23.5;
  r.retrans_segs = 17;
  r.process_cpu_s = 2.25;
  for (std::size_t i = 0; i < flows; ++i) {
    r.flows.push_back(
        make_flow(static_cast<std::uint32_t>(i), role, first_peer + static_cast<std::uint32_t>(i % peers)));
  }
  if (role == FlowRole::client) {
    r.latency = LatencyHistogram{};
    for (std::uint64_t v = 1000; v < 10'000'000; v = v * 11 / 10) r.latency->record(v);
  }
  for (std::int64_t t = 1; t <= 8; ++t) r.intervals.push_back({t * 1'000'000'000, 1'000'000'000, 10'000});
  return r;
}

void BM_EncodeResultFrame(benchmark::State& state) {
  const AgentResult r = make_result(1, 1000, FlowRole::client, 0, 1000);
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto frame = proto::encode_frame(proto::MsgType::result, to_json(r));
    bytes = frame.size();
    benchmark::DoNotOptimize(frame.data());
  }
  state.counters["frame_bytes"] = static_cast<double>(bytes);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_EncodeResultFrame);

void BM_DecodeResultFrame(benchmark::State& state) {
  const auto frame =
      proto::encode_frame(proto::MsgType::result, to_json(make_result(1, 1000, FlowRole::client, 0, 1000)));
  const std::span<const std::uint8_t> bytes(frame);
  for (auto _ : state) {
    const auto h = proto::decode_header(bytes.first<proto::kHeaderSize>());
    const auto body = proto::parse_body(h.type, bytes.subspan(proto::kHeaderSize));
    AgentResult r = parse_agent_result(body);
    benchmark::DoNotOptimize(r.flows.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(frame.size()));
}
BENCHMARK(BM_DecodeResultFrame);

// A body that is one large array of small objects (what a hostile RESULT can be) of 1, 4 and 16
// MiB: parsing must take time in proportion to the size (issue 28: 600 KB once took 6.3 s).
void BM_ParseBodyArrayOfObjects(benchmark::State& state) {
  const auto target = static_cast<std::size_t>(state.range(0)) << 20;
  std::string text = "{\"a\":[";
  while (text.size() < target) text += "{\"k\":1},";
  text.back() = ']';
  text += "}";
  const std::span<const std::uint8_t> body(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  for (auto _ : state) {
    auto j = proto::parse_body(proto::MsgType::result, body);
    benchmark::DoNotOptimize(j);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_ParseBodyArrayOfObjects)->Arg(1)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond);

// 1000 nodes: 500 servers, 500 clients; every client talks to 4 servers with parallel 2.
void BM_ComputeReport1000Nodes(benchmark::State& state) {
  constexpr std::uint32_t kServers = 500, kClients = 500, kPeers = 4, kParallel = 2;
  RunRecord run;
  SpecParams p;
  p.parallel = kParallel;
  run.spec = TestSpec::make(p);
  run.test_id = "bench";
  for (std::uint32_t i = 0; i < kServers + kClients; ++i) {
    NodeRecord n;
    n.index = i;
    n.name = "node" + std::to_string(i) + ":6668";
    n.is_server = i < kServers;
    n.is_client = !n.is_server;
    if (n.is_client) {
      const std::uint32_t first = (i - kServers) % (kServers - kPeers);
      n.result = make_result(i, kPeers * kParallel, FlowRole::client, first, kPeers);
    } else {
      n.result = make_result(i, kPeers * kParallel, FlowRole::server, kServers + i % kClients, 1);
    }
    run.nodes.push_back(std::move(n));
  }
  for (auto _ : state) {
    Report r = compute_report(run);
    benchmark::DoNotOptimize(r.aggregate.mb_per_s);
  }
}
BENCHMARK(BM_ComputeReport1000Nodes)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
