#include <gtest/gtest.h>
#include <fabperf/core/build_config.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/spec.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/report/result_doc.hpp>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "common/unit_helpers.hpp"

using namespace fabperf;
using namespace fabperf::testutil;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

NodeRecord node(std::uint32_t index, bool server, bool client) {
  NodeRecord n;
  n.index = index;
  n.name = (server ? "srv" : "cli") + std::to_string(index) + ":6668";
  n.address = "10.0.0." + std::to_string(index + 1);
  n.hostname = "host" + std::to_string(index);
  n.is_server = server;
  n.is_client = client;
  n.clock.offset_ns = 1000 * static_cast<std::int64_t>(index);
  n.clock.uncertainty_ns = 500 * static_cast<std::int64_t>(index + 1);
  return n;
}

AgentResult result(std::uint32_t index, double window_s, double cpu) {
  AgentResult a;
  a.node_index = index;
  a.hostname = "host" + std::to_string(index);
  a.window_s = window_s;
  a.cpu_busy_pct = cpu;
  a.retrans_segs = 0;
  return a;
}

// A client flow (client sends: write) or the matching server flow (server receives).
FlowResult cflow(std::uint32_t peer, std::uint64_t tx, std::uint64_t msgs = 0) {
  FlowResult f;
  f.role = FlowRole::client;
  f.op = FlowOp::write;
  f.peer_node = peer;
  f.local = "c";
  f.remote = "s" + std::to_string(peer);
  f.tx_bytes_total = tx + 1000;
  f.tx_bytes_window = tx;
  f.tx_delivered_window = tx;  // all of it acknowledged, unless a test says otherwise
  f.msgs_window = msgs;
  return f;
}
FlowResult sflow(std::uint32_t peer, std::uint64_t rx, std::uint64_t msgs = 0) {
  FlowResult f;
  f.role = FlowRole::server;
  f.op = FlowOp::write;
  f.peer_node = peer;
  f.local = "s";
  f.remote = "c" + std::to_string(peer);
  f.rx_bytes_total = rx + 1000;
  f.rx_bytes_window = rx;
  f.msgs_window = msgs;
  return f;
}

const PairReport* find_pair(const Report& r, std::uint32_t c, std::uint32_t s) {
  for (const auto& p : r.pairs) {
    if (p.client == c && p.server == s) return &p;
  }
  return nullptr;
}

// 2 servers (0, 1), 2 clients (2, 3); default spec (rpc write, 10 s, window 8 s).
RunRecord two_by_two() {
  RunRecord run;
  run.test_id = "abcdef0123456789";
  run.started_at = "2024-01-02T03:04:05Z";
  auto s0 = node(0, true, false);
  auto s1 = node(1, true, false);
  auto c2 = node(2, false, true);
  auto c3 = node(3, false, true);
  s0.result = result(0, 8.0, 30);
  s0.result->flows = {sflow(2, 7'900'000'000, 1900), sflow(3, 4'000'000'000, 950)};
  s1.result = result(1, 8.0, 50);
  s1.result->flows = {sflow(2, 3'900'000'000, 920)};
  c2.result = result(2, 8.0, 10);
  c2.result->flows = {cflow(0, 8'000'000'000, 1907), cflow(1, 4'000'000'000, 953)};
  c3.result = result(3, 10.0, 20);  // this client's clock measured a longer window
  c3.result->flows = {cflow(0, 5'000'000'000, 1192)};
  run.nodes = {s0, s1, c2, c3};
  return run;
}

Report manual_report() {
  Report r;
  r.spec = TestSpec::make({});
  r.clients = 2;
  r.servers = 2;
  r.aggregate.mb_per_s = 2354.4;
  r.aggregate.msg_per_s = 561.2;
  r.cli_cpu_pct = 3.2;
  r.srv_cpu_pct = 4.6;
  return r;
}

}  // namespace

// ---- compute_report -------------------------------------------------------------------------

TEST(ComputeReport, AggregateIsSumOfPairsEachAsItsReceiverReadIt) {
  const Report r = compute_report(two_by_two());
  EXPECT_EQ(r.fabperf_version, FABPERF_VERSION);
  EXPECT_EQ(r.test_id, "abcdef0123456789");
  EXPECT_EQ(r.started_at, "2024-01-02T03:04:05Z");
  EXPECT_EQ(r.servers, 2);
  EXPECT_EQ(r.clients, 2);
  EXPECT_TRUE(r.complete);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_DOUBLE_EQ(r.window_s, 8.0);
  ASSERT_EQ(r.pairs.size(), 3u);

  const auto* p20 = find_pair(r, 2, 0);
  const auto* p21 = find_pair(r, 2, 1);
  const auto* p30 = find_pair(r, 3, 0);
  ASSERT_TRUE(p20 && p21 && p30);
  // write: the servers receive; the clients wrote more than arrived inside the window.
  EXPECT_EQ(p20->measured_by, "receivers");
  EXPECT_EQ(p20->tput.bytes, 7'900'000'000u);
  EXPECT_DOUBLE_EQ(p20->tput.mb_per_s, 987.5);
  EXPECT_DOUBLE_EQ(p20->tput.gbit_per_s, 7.9);
  EXPECT_EQ(p20->tput.msgs, 1907u);  // completed RPCs, as the client counted them
  EXPECT_DOUBLE_EQ(p20->tput.msg_per_s, 1907 / 8.0);
  EXPECT_EQ(p20->sender_bytes, 8'000'000'000u);  // what the client wrote, kept beside it
  EXPECT_EQ(p20->connections, 1u);
  EXPECT_DOUBLE_EQ(p21->tput.mb_per_s, 487.5);
  // The receiver (server 0) measured 8 s; client 3's longer 10 s window does not dilute it.
  EXPECT_DOUBLE_EQ(p30->tput.mb_per_s, 500.0);
  EXPECT_DOUBLE_EQ(p30->tput.msg_per_s, 119.2);

  EXPECT_DOUBLE_EQ(r.aggregate.mb_per_s, 1975.0);
  EXPECT_DOUBLE_EQ(r.aggregate.gbit_per_s, 15.8);
  EXPECT_EQ(r.aggregate.bytes, 15'800'000'000u);
  EXPECT_EQ(r.aggregate.msgs, 1907u + 953u + 1192u);
  EXPECT_DOUBLE_EQ(r.aggregate.msg_per_s, 1907 / 8.0 + 953 / 8.0 + 1192 / 10.0);
}

// The reproduction of issue 27: over a 1 s window a client wrote 15.6 MB into socket buffers
// while 12.4 MB crossed a 100 Mbit/s link. Every figure is what arrived: the pair from the
// server's reads, the client's tx and its link's payload from what the server acknowledged.
TEST(ComputeReport, AFigureIsWhatArrivedNotWhatWasWritten) {
  RunRecord run;
  SpecParams p;
  p.mode = Mode::stream;
  run.spec = TestSpec::make(p);
  auto s = node(0, true, false);
  auto c = node(1, false, true);
  s.result = result(0, 1.0, 1);
  s.result->flows = {sflow(1, 12'400'000)};
  c.result = result(1, 1.0, 1);
  auto f = cflow(0, 15'600'000);
  f.tx_delivered_window = 12'410'000;
  f.iface = "veth0";
  c.result->flows = {f};
  LinkResult l;
  l.info.name = "veth0";
  l.info.mtu = 9000;
  LinkSample a, b;
  a.counters.present = b.counters.present = true;
  b.t_ns = 1'000'000'000;
  b.counters.tx_bytes = 12'500'000;
  l.samples = {a, b};
  c.result->links = {l};
  run.nodes = {s, c};
  const Report r = compute_report(run);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_DOUBLE_EQ(r.pairs[0].tput.mb_per_s, 12.4);
  EXPECT_EQ(r.pairs[0].sender_bytes, 15'600'000u);
  EXPECT_DOUBLE_EQ(r.aggregate.mb_per_s, 12.4);
  EXPECT_DOUBLE_EQ(r.nodes[1].tx_mb_per_s, 12.41);
  ASSERT_EQ(r.nodes[1].links.size(), 1u);
  const LinkReport& lr = r.nodes[1].links[0];
  EXPECT_DOUBLE_EQ(lr.payload_tx_mb_per_s, 12.41);
  EXPECT_EQ(lr.wire_audit.verdict, "ok");
  EXPECT_EQ(lr.wire_audit.wire_tx_bytes, 12'500'000u);
  EXPECT_NEAR(lr.wire_audit.tx_ratio.value_or(-1), 0.9928, 1e-4);
  EXPECT_TRUE(r.findings.empty()) << r.findings[0];

  // A flow's round trip widens the resolution by one round trip at the wire's rate (data in flight
  // at an edge), the largest the sender's estimator allows, srtt + 4 rttvar: 30 + 4 x 5 = 50 ms at
  // 12.5 MB/s = 625,000 bytes.
  c.result->flows[0].tcp.valid = true;
  c.result->flows[0].tcp.rtt_us = 30'000;
  c.result->flows[0].tcp.rttvar_us = 5'000;
  run.nodes = {s, c};
  EXPECT_EQ(compute_report(run).nodes[1].links[0].wire_audit.resolution_bytes, 190'536u + 625'000u);
  c.result->flows[0].tcp = {};

  // What the sender wrote, had it been reported as the link's payload, fails the audit by name.
  c.result->flows[0].tx_delivered_window = 15'600'000;
  run.nodes = {s, c};
  const Report bad = compute_report(run);
  EXPECT_EQ(bad.nodes[1].links[0].wire_audit.verdict, "payload above wire");
  ASSERT_EQ(bad.findings.size(), 1u);
  EXPECT_TRUE(contains(bad.findings[0], "wire audit failed on cli1:6668 veth0")) << bad.findings[0];
}

// A receiver starved of CPU at the window's open reads, inside the window, bytes that crossed the
// wire before it: its reads exceed the interface's count. What arrived (reads plus what its
// receive queue gained, here -3 MB) is what the audit sets against the wire (seen under load:
// rx 2.5% above the wire over 0.5 s, flagged though nothing was wrong).
TEST(ComputeReport, TheFigureAndTheWireAuditCountWhatArrivedNotWhatWasRead) {
  RunRecord run;
  SpecParams p;
  p.mode = Mode::stream;
  run.spec = TestSpec::make(p);
  auto s = node(0, true, false);
  auto c = node(1, false, true);
  s.result = result(0, 1.0, 1);
  auto f = sflow(1, 15'400'000);
  f.iface = "veth1";
  f.rx_queued_delta = -3'000'000;
  s.result->flows = {f};
  c.result = result(1, 1.0, 1);
  c.result->flows = {cflow(0, 15'400'000)};
  LinkResult l;
  l.info.name = "veth1";
  l.info.mtu = 9000;
  LinkSample a, b;
  a.counters.present = b.counters.present = true;
  b.t_ns = 1'000'000'000;
  b.counters.rx_bytes = 12'500'000;
  l.samples = {a, b};
  s.result->links = {l};
  run.nodes = {s, c};
  const Report r = compute_report(run);
  const WireAudit& ok = r.nodes[0].links[0].wire_audit;
  EXPECT_EQ(ok.verdict, "ok");
  EXPECT_EQ(ok.payload_rx_bytes, 12'400'000u);
  // The figure is what arrived too, never the reads above the wire.
  EXPECT_NEAR(r.aggregate.mb_per_s, 12.4, 1e-9);
  EXPECT_EQ(r.pairs[0].tput.bytes, 12'400'000u);
  run.nodes[0].result->flows[0].rx_queued_delta = 0;  // the reads alone: flagged
  EXPECT_EQ(compute_report(run).nodes[0].links[0].wire_audit.verdict, "payload above wire");
}

// A pair that moved nothing inside the window is named, not left to read as a dead link.
TEST(ComputeReport, APairWithNothingInTheWindowIsAFinding) {
  auto run = two_by_two();
  run.nodes[3].result->flows[0].tx_delivered_window = 0;
  run.nodes[0].result->flows[1].rx_bytes_window = 0;  // server 0's reads from client 3
  const Report r = compute_report(run);
  EXPECT_DOUBLE_EQ(find_pair(r, 3, 0)->tput.mb_per_s, 0.0);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_TRUE(contains(r.findings[0], "pair cli3:6668 -> srv0:6668: no byte arrived inside the 10.00 s window"))
      << r.findings[0];
}

// The default spec's 10 s test has a 1 s warm-up and a 1 s cool-down around its 8 s window.
TEST(ComputeReport, ANodeThatKeptTheScheduleLateIsNamedAndPastHalfTheWindowItsFiguresHaveNoBasis) {
  auto run = two_by_two();
  run.nodes[1].result->start_late_ns = 1'000'000'000;  // flows out by the window's open
  run.nodes[1].result->close_late_ns = 1'000'000'000;  // the close read before the peers stop
  Report r = compute_report(run);
  EXPECT_TRUE(r.complete);
  EXPECT_TRUE(r.findings.empty()) << r.findings[0];
  EXPECT_DOUBLE_EQ(r.nodes[1].late_ms, 1000.0);

  run.nodes[2].result->start_late_ns = 1'400'000'000;  // 0.4 s of the 8 s window without its flows
  r = compute_report(run);
  EXPECT_TRUE(r.complete);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_TRUE(contains(r.findings[0], "node cli2:6668 kept the test's schedule 1400 ms late")) << r.findings[0];
  EXPECT_TRUE(contains(r.findings[0], ": 5% of the window is not covered by the flows")) << r.findings[0];
  EXPECT_TRUE(r.nodes[2].error.empty());

  run.nodes[2].result->close_late_ns = 4'000'000'000;  // and 3 s read after the peers stopped: 43%
  r = compute_report(run);
  EXPECT_TRUE(r.complete);
  run.nodes[2].result->close_late_ns = 4'700'000'000;  // and 3.7 s: 51%
  r = compute_report(run);
  EXPECT_TRUE(r.complete);  // a finding, not a failed run
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_TRUE(contains(r.findings[0], "4700 ms late")) << r.findings[0];
  EXPECT_TRUE(contains(r.findings[0],
                       "51% of the window is not covered by the flows, so this test's figures "
                       "have no basis: run it again"))
      << r.findings[0];
}

TEST(ComputeReport, NodesAndConnections) {
  const Report r = compute_report(two_by_two());
  ASSERT_EQ(r.nodes.size(), 4u);
  EXPECT_EQ(r.nodes[0].role, "server");
  EXPECT_EQ(r.nodes[2].role, "client");
  EXPECT_EQ(r.nodes[2].name, "cli2:6668");
  EXPECT_EQ(r.nodes[2].hostname, "host2");
  EXPECT_DOUBLE_EQ(r.nodes[2].tx_mb_per_s, 1500.0);  // 12e9 B over 8 s
  EXPECT_DOUBLE_EQ(r.nodes[2].rx_mb_per_s, 0.0);
  EXPECT_DOUBLE_EQ(r.nodes[0].rx_mb_per_s, (7.9e9 + 4e9) / 8 / 1e6);
  EXPECT_DOUBLE_EQ(r.nodes[3].window_s, 10.0);
  EXPECT_DOUBLE_EQ(r.nodes[3].clock_offset_us, 3.0);
  EXPECT_DOUBLE_EQ(r.nodes[3].clock_uncertainty_us, 2.0);
  EXPECT_DOUBLE_EQ(r.max_clock_uncertainty_us, 2.0);
  ASSERT_EQ(r.connections.size(), 6u);
  const auto& c = r.connections[3];  // client 2's first flow
  EXPECT_EQ(c.node, 2u);
  EXPECT_EQ(c.peer, 0u);
  EXPECT_EQ(c.role, FlowRole::client);
  EXPECT_EQ(c.tx_bytes_window, 8'000'000'000u);
  EXPECT_EQ(c.tx_bytes_total, 8'000'001'000u);
  EXPECT_DOUBLE_EQ(c.mb_per_s, 1000.0);
}

TEST(ComputeReport, ServerAndClientOnOneNode) {
  RunRecord run;
  auto n = node(0, true, true);
  n.result = result(0, 8.0, 40);
  run.nodes = {n};
  const Report r = compute_report(run);
  EXPECT_EQ(r.nodes[0].role, "server+client");
  EXPECT_EQ(r.servers, 1);
  EXPECT_EQ(r.clients, 1);
  EXPECT_DOUBLE_EQ(r.cli_cpu_pct, 40.0);
  EXPECT_DOUBLE_EQ(r.srv_cpu_pct, 40.0);
}

TEST(ComputeReport, LostClientFallsBackToServerCounts) {
  auto run = two_by_two();
  run.nodes[3].status = NodeStatus::lost;
  run.nodes[3].error = "connection reset";
  run.nodes[3].result.reset();
  const Report r = compute_report(run);
  const auto* p30 = find_pair(r, 3, 0);
  ASSERT_NE(p30, nullptr);
  EXPECT_EQ(p30->measured_by, "server");
  EXPECT_EQ(p30->tput.bytes, 4'000'000'000u);
  EXPECT_DOUBLE_EQ(p30->tput.mb_per_s, 500.0);  // the server's 8 s window
  EXPECT_EQ(p30->tput.msgs, 950u);
  EXPECT_EQ(p30->connections, 1u);
  EXPECT_EQ(find_pair(r, 2, 0)->measured_by, "receivers");
  EXPECT_DOUBLE_EQ(r.aggregate.mb_per_s, 987.5 + 487.5 + 500.0);

  EXPECT_FALSE(r.complete);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_TRUE(contains(r.findings[0], "node cli3:6668 lost: connection reset")) << r.findings[0];
  EXPECT_EQ(r.nodes[3].status, NodeStatus::lost);
  EXPECT_EQ(r.nodes[3].error, "connection reset");
  // CPU averages only cover the nodes that reported.
  EXPECT_DOUBLE_EQ(r.cli_cpu_pct, 10.0);
}

TEST(ComputeReport, LostServerMakesReportIncomplete) {
  auto run = two_by_two();
  run.nodes[1].status = NodeStatus::stalled;
  run.nodes[1].error = "no heartbeat for 5 s";
  run.nodes[1].result.reset();
  const Report r = compute_report(run);
  EXPECT_FALSE(r.complete);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_TRUE(contains(r.findings[0], "srv1:6668 stalled: no heartbeat for 5 s")) << r.findings[0];
  // The client still reported its side of the pair.
  EXPECT_EQ(find_pair(r, 2, 1)->measured_by, "client");
  EXPECT_DOUBLE_EQ(r.srv_cpu_pct, 30.0);
}

TEST(ComputeReport, CpuAverages) {
  const Report r = compute_report(two_by_two());
  EXPECT_DOUBLE_EQ(r.cli_cpu_pct, 15.0);  // (10 + 20) / 2
  EXPECT_DOUBLE_EQ(r.srv_cpu_pct, 40.0);  // (30 + 50) / 2
  EXPECT_DOUBLE_EQ(r.nodes[1].cpu_busy_pct, 50.0);
}

TEST(ComputeReport, StreamModeMessagesAreBytesOverBuffsize) {
  RunRecord run;
  SpecParams p;
  p.mode = Mode::stream;
  p.buffsize = 1 << 20;
  run.spec = TestSpec::make(p);
  auto s = node(0, true, false);
  auto c = node(1, false, true);
  s.result = result(0, 8.0, 1);
  s.result->flows = {sflow(1, 8000ull << 20, 77)};
  c.result = result(1, 8.0, 1);
  c.result->flows = {cflow(0, (8000ull << 20) + 12345, 99)};  // msgs_window is ignored in stream mode
  run.nodes = {s, c};
  const Report r = compute_report(run);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_EQ(r.pairs[0].tput.msgs, 8000u);
  EXPECT_DOUBLE_EQ(r.pairs[0].tput.msg_per_s, 1000.0);
  EXPECT_EQ(r.aggregate.msgs, 8000u);
  // Lost client in stream mode: server bytes / buffsize.
  run.nodes[1].status = NodeStatus::lost;
  run.nodes[1].result.reset();
  const Report r2 = compute_report(run);
  EXPECT_EQ(r2.pairs[0].measured_by, "server");
  EXPECT_EQ(r2.pairs[0].tput.msgs, 8000u);
}

TEST(ComputeReport, PairTcpFigures) {
  RunRecord run;
  SpecParams p;
  p.parallel = 3;
  run.spec = TestSpec::make(p);
  auto s = node(0, true, false);
  auto c = node(1, false, true);
  s.result = result(0, 8.0, 1);
  c.result = result(1, 8.0, 1);
  for (std::uint32_t i = 0; i < 3; ++i) {
    auto f = cflow(0, 1'000'000'000);
    f.retrans_window = i + 1;
    f.tcp.valid = i != 2;
    f.tcp.rtt_us = 100 + 50 * i;
    f.tcp.snd_mss = 9000 - 1000 * i;
    c.result->flows.push_back(f);
  }
  run.nodes = {s, c};
  const Report r = compute_report(run);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_EQ(r.pairs[0].connections, 3u);
  EXPECT_EQ(r.pairs[0].retrans, 6u);
  EXPECT_EQ(r.pairs[0].rtt_us, 150u);    // largest among valid samples
  EXPECT_EQ(r.pairs[0].snd_mss, 8000u);  // smallest among valid samples
  EXPECT_DOUBLE_EQ(r.pairs[0].tput.mb_per_s, 375.0);
}

TEST(ComputeReport, LatencyMergedAcrossClients) {
  auto run = two_by_two();
  LatencyHistogram a, b;
  a.record(1000);
  a.record(2000);
  b.record(3000);
  run.nodes[2].result->latency = a;
  run.nodes[3].result->latency = b;
  const Report r = compute_report(run);
  ASSERT_TRUE(r.latency.has_value());
  ASSERT_TRUE(r.histogram != nullptr);
  EXPECT_EQ(r.latency->count, 3u);
  EXPECT_DOUBLE_EQ(r.latency->min_us, 1.0);
  EXPECT_DOUBLE_EQ(r.latency->max_us, 3.0);
  EXPECT_DOUBLE_EQ(r.latency->mean_us, 2.0);
  EXPECT_DOUBLE_EQ(r.latency->stddev_us, 1.0);
  EXPECT_EQ(r.histogram->count(), 3u);
  LatencyHistogram both = a;
  both.merge(b);
  EXPECT_EQ(*r.histogram, both);
  ASSERT_TRUE(r.nodes[2].latency.has_value());
  EXPECT_EQ(r.nodes[2].latency->count, 2u);
  EXPECT_DOUBLE_EQ(r.nodes[2].latency->max_us, 2.0);
  EXPECT_FALSE(r.nodes[0].latency.has_value());
  EXPECT_FALSE(compute_report(two_by_two()).latency.has_value());
}

TEST(ComputeReport, IntervalsBecomeRatesPerInterval) {
  auto run = two_by_two();
  run.nodes[2].result->intervals = {
      {1'000'000'000, 1'000'000'000, 2'000'000},  // 1 s: 1000 MB/s tx, 2 MB/s rx
      {2'000'000'000, 500'000'000, 0},            // 1 s: 500 MB/s
      {2'500'000'000, 100'000'000, 1'000'000},    // 0.5 s: 200 MB/s tx, 2 MB/s rx
  };
  const Report r = compute_report(run);
  const auto& iv = r.nodes[2].intervals;
  ASSERT_EQ(iv.size(), 3u);
  EXPECT_DOUBLE_EQ(iv[0].t_s, 1.0);
  EXPECT_DOUBLE_EQ(iv[0].tx_mb_per_s, 1000.0);
  EXPECT_DOUBLE_EQ(iv[0].rx_mb_per_s, 2.0);
  EXPECT_DOUBLE_EQ(iv[1].t_s, 2.0);
  EXPECT_DOUBLE_EQ(iv[1].tx_mb_per_s, 500.0);
  EXPECT_DOUBLE_EQ(iv[1].rx_mb_per_s, 0.0);
  EXPECT_DOUBLE_EQ(iv[2].t_s, 2.5);
  EXPECT_DOUBLE_EQ(iv[2].tx_mb_per_s, 200.0);
  EXPECT_DOUBLE_EQ(iv[2].rx_mb_per_s, 2.0);
  EXPECT_TRUE(r.nodes[3].intervals.empty());
}

TEST(ComputeReport, AbortedFlowErrorsWarningsInterrupted) {
  auto run = two_by_two();
  run.interrupted = true;
  run.nodes[2].result->aborted = true;
  run.nodes[2].result->abort_reason = "ABORT from coordinator";
  run.nodes[3].result->flows[0].error = "Connection reset by peer";
  run.nodes[0].setup_warnings = {"socksize clamped"};
  run.nodes[0].result->warnings = {"socksize clamped", "cpu frequency scaling on"};  // first one is a duplicate
  const Report r = compute_report(run);
  EXPECT_FALSE(r.complete);
  EXPECT_TRUE(r.interrupted);
  EXPECT_TRUE(r.nodes[2].aborted);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_TRUE(contains(r.findings[0], "interrupted")) << r.findings[0];
  auto has = [&](const std::string& s) {
    return std::any_of(r.findings.begin(), r.findings.end(), [&](const std::string& f) { return contains(f, s); });
  };
  EXPECT_TRUE(has("node cli2:6668 stopped early: ABORT from coordinator"));
  EXPECT_TRUE(has("connection c -> s0 on cli3:6668: Connection reset by peer"));
  EXPECT_TRUE(has("node srv0:6668: socksize clamped"));
  EXPECT_TRUE(has("node srv0:6668: cpu frequency scaling on"));
  EXPECT_EQ(r.nodes[0].warnings, (std::vector<std::string>{"socksize clamped", "cpu frequency scaling on"}));
  EXPECT_EQ(r.findings.size(), 5u);
}

TEST(ComputeReport, ZeroAgentWindowFallsBackToNominal) {
  auto run = two_by_two();
  run.nodes[0].result->window_s = 0;  // the receiver of pair 2 -> 0
  const Report r = compute_report(run);
  EXPECT_DOUBLE_EQ(r.nodes[0].window_s, 8.0);
  EXPECT_DOUBLE_EQ(find_pair(r, 2, 0)->tput.mb_per_s, 987.5);
}

TEST(ComputeReport, EmptyRun) {
  const Report r = compute_report(RunRecord{});
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.aggregate.mb_per_s, 0.0);
  EXPECT_TRUE(r.pairs.empty());
  EXPECT_EQ(r.cli_cpu_pct, 0.0);
}

// ---- summary line ---------------------------------------------------------------------------

TEST(SummaryLine, NsdperfFormat) {
  EXPECT_EQ(render_summary_line(manual_report()),
            "2-2 write 2354 MB/sec (561 msg/sec), cli 3% srv 5%, time 10, buff 4194304");
}

TEST(SummaryLine, NonDefaultsAppended) {
  Report r = manual_report();
  SpecParams p;
  p.socksize = 1 << 20;
  r.spec = TestSpec::make(p);
  EXPECT_EQ(render_summary_line(r),
            "2-2 write 2354 MB/sec (561 msg/sec), cli 3% srv 5%, time 10, buff 4194304, sock 1048576");
  p.threads = 16;
  r.spec = TestSpec::make(p);
  EXPECT_TRUE(render_summary_line(r).ends_with(", sock 1048576, th 16"));
  p.parallel = 4;
  r.spec = TestSpec::make(p);
  EXPECT_TRUE(render_summary_line(r).ends_with(", sock 1048576, th 16, parallel 4"));
  p.socksize.reset();
  p.threads.reset();
  r.spec = TestSpec::make(p);
  EXPECT_EQ(render_summary_line(r),
            "2-2 write 2354 MB/sec (561 msg/sec), cli 3% srv 5%, time 10, buff 4194304, parallel 4");
}

TEST(SummaryLine, TestTimeAndBuffsize) {
  Report r = manual_report();
  r.clients = 1;
  r.servers = 3;
  SpecParams p;
  p.test = TestKind::rw;
  p.time = 2500ms;
  p.buffsize = 256 * 1024;
  r.spec = TestSpec::make(p);
  EXPECT_EQ(render_summary_line(r), "1-3 rw 2354 MB/sec (561 msg/sec), cli 3% srv 5%, time 2.5, buff 262144");
}

TEST(SummaryLine, FromComputedReport) {
  EXPECT_EQ(render_summary_line(compute_report(two_by_two())),
            "2-2 write 1975 MB/sec (477 msg/sec), cli 15% srv 40%, time 10, buff 4194304");
}

// ---- JSON -----------------------------------------------------------------------------------

TEST(RenderJson, SchemaAndShape) {
  auto run = two_by_two();
  run.nodes[2].result->latency = LatencyHistogram{};
  run.nodes[2].result->latency->record(1500);
  run.nodes[3].result->retrans_segs = -1;
  const Report r = compute_report(run);
  const json j = render_json(r);
  EXPECT_EQ(j.at("schema"), "fabperf.result");
  EXPECT_EQ(j.at("schema_version"), kResultSchemaVersion);
  EXPECT_EQ(j.at("fabperf_version"), FABPERF_VERSION);
  EXPECT_EQ(j.at("test_id"), "abcdef0123456789");
  EXPECT_EQ(j.at("settings"), to_json(r.spec));
  EXPECT_EQ(j.at("complete"), true);
  EXPECT_EQ(j.at("clients"), 2);
  EXPECT_EQ(j.at("servers"), 2);
  EXPECT_DOUBLE_EQ(j.at("aggregate").at("mb_per_s").get<double>(), 1975.0);
  EXPECT_DOUBLE_EQ(j.at("aggregate").at("gbit_per_s").get<double>(), 15.8);
  EXPECT_EQ(j.at("aggregate").at("bytes"), 15'800'000'000ull);
  EXPECT_DOUBLE_EQ(j.at("aggregate").at("window_s").get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(j.at("cli_cpu_pct").get<double>(), 15.0);
  ASSERT_TRUE(j.at("nodes").is_array());
  ASSERT_TRUE(j.at("pairs").is_array());
  ASSERT_TRUE(j.at("connections").is_array());
  EXPECT_EQ(j.at("nodes").size(), 4u);
  EXPECT_EQ(j.at("pairs").size(), 3u);
  EXPECT_EQ(j.at("connections").size(), 6u);
  EXPECT_EQ(j.at("nodes")[2].at("node"), "cli2:6668");
  EXPECT_EQ(j.at("nodes")[2].at("status"), "ok");
  EXPECT_EQ(j.at("nodes")[2].at("latency").at("count"), 1);
  EXPECT_TRUE(j.at("nodes")[0].at("latency").is_null());
  EXPECT_TRUE(j.at("nodes")[3].at("retrans_segs").is_null());
  EXPECT_EQ(j.at("nodes")[2].at("retrans_segs"), 0);
  EXPECT_EQ(j.at("pairs")[0].at("measured_by"), "receivers");
  EXPECT_TRUE(j.at("pairs")[0].contains("mb_per_s"));
  EXPECT_TRUE(j.at("pairs")[0].contains("sender_bytes"));
  EXPECT_EQ(j.at("connections")[0].at("role"), "server");
  EXPECT_TRUE(j.at("connections")[0].at("tcp").is_null());
  EXPECT_EQ(j.at("latency").at("count"), 1);
  EXPECT_EQ(j.at("latency").at("buckets").size(), 1u);
  EXPECT_EQ(j.at("summary"), render_summary_line(r));
  EXPECT_TRUE(j.at("findings").is_array());
  // Serializable as text.
  EXPECT_EQ(json::parse(j.dump()), j);
}

TEST(RenderJson, IncompleteRun) {
  auto run = two_by_two();
  run.nodes[3].status = NodeStatus::lost;
  run.nodes[3].result.reset();
  const json j = render_json(compute_report(run));
  EXPECT_EQ(j.at("complete"), false);
  EXPECT_EQ(j.at("nodes")[3].at("status"), "lost");
  EXPECT_EQ(j.at("findings").size(), 1u);
  EXPECT_TRUE(j.at("latency").is_null());
}

// ---- text -----------------------------------------------------------------------------------

TEST(RenderText, TablesAndSummary) {
  auto run = two_by_two();
  run.nodes[2].result->latency = LatencyHistogram{};
  run.nodes[2].result->latency->record(1500);
  run.nodes[2].result->intervals = {{1'000'000'000, 1'000'000'000, 0}, {2'000'000'000, 500'000'000, 0}};
  const Report r = compute_report(run);
  const std::string t = render_text(r, false);
  EXPECT_TRUE(t.starts_with("fabperf " FABPERF_VERSION ": test write (rpc mode, tcp), 2 client(s) -> 2 server(s)\n"))
      << t;
  EXPECT_TRUE(contains(t, "time 10 s, measured 1..9 s; buffsize 4M, socksize OS default, threads 4, parallel 1")) << t;
  EXPECT_TRUE(contains(t, "\nNodes\n")) << t;
  EXPECT_TRUE(contains(t, "\nPairs (client -> server)\n")) << t;
  EXPECT_TRUE(contains(t, "Block latency")) << t;
  EXPECT_TRUE(contains(t, "Over time")) << t;
  EXPECT_FALSE(contains(t, "Connections\n")) << t;
  EXPECT_FALSE(contains(t, "Findings")) << t;
  EXPECT_TRUE(contains(t, "MB/s")) << t;
  EXPECT_TRUE(contains(t, "cli2:6668")) << t;
  EXPECT_TRUE(contains(t, "987.5")) << t;  // pair 2 -> 0
  EXPECT_TRUE(contains(t, "aggregate 1975.0 MB/s (15.80 Gbit/s, 477 msg/s)\n")) << t;
  EXPECT_TRUE(t.ends_with(render_summary_line(r) + "\n")) << t;
}

// Every agent lost: no pair, no node figures. The coordinator crashed here (a table with no rows
// read its column flags from an empty vector); the report must still say what happened.
TEST(RenderText, EveryAgentLostStillRenders) {
  auto run = two_by_two();
  for (auto& n : run.nodes) {
    n.status = NodeStatus::stalled;
    n.error = "no RESULT within 15 s of the test's end";
    n.result.reset();
  }
  const Report r = compute_report(run);
  EXPECT_TRUE(r.pairs.empty());
  for (bool verbose : {false, true}) {
    const std::string t = render_text(r, verbose);
    EXPECT_TRUE(contains(t, "\nPairs (client -> server)\n")) << t;
    EXPECT_TRUE(contains(t, "srv0:6668 stalled: no RESULT within 15 s")) << t;
  }
}

TEST(RenderText, VerboseAddsConnections) {
  const Report r = compute_report(two_by_two());
  const std::string t = render_text(r, true);
  EXPECT_TRUE(contains(t, "\nConnections\n")) << t;
  EXPECT_TRUE(contains(t, "remote")) << t;
  EXPECT_TRUE(t.ends_with(render_summary_line(r) + "\n")) << t;
  EXPECT_GT(t.size(), render_text(r, false).size());
}

TEST(RenderText, IncompleteRunShowsFindings) {
  auto run = two_by_two();
  run.nodes[3].status = NodeStatus::lost;
  run.nodes[3].error = "connection reset";
  run.nodes[3].result.reset();
  const Report r = compute_report(run);
  const std::string t = render_text(r, false);
  EXPECT_TRUE(contains(t, "\nFindings\n  ! node cli3:6668 lost: connection reset")) << t;
  EXPECT_TRUE(contains(t, "(by server)")) << t;
  EXPECT_TRUE(contains(t, "[INCOMPLETE: see findings]")) << t;
  EXPECT_TRUE(contains(t, "lost")) << t;
  EXPECT_TRUE(t.ends_with(render_summary_line(r) + "\n")) << t;
}

// ---- read_result_doc: render_json's document read back ----------------------------------

TEST(ResultDoc, ARenderedReportReadsBackStrictlyFigureForFigure) {
  const Report r = compute_report(two_by_two());
  const json j = render_json(r);
  const ResultDoc d = read_result_doc(j, ReadMode::strict);
  EXPECT_EQ(d.schema_version, kResultSchemaVersion);
  EXPECT_EQ(d.test, j["settings"]["test"].get<std::string>());
  EXPECT_TRUE(d.complete);
  EXPECT_FALSE(d.interrupted);
  EXPECT_EQ(d.clients, 2u);
  EXPECT_EQ(d.servers, 2u);
  EXPECT_GT(d.aggregate.mb_per_s, 0);
  EXPECT_DOUBLE_EQ(d.aggregate.mb_per_s, r.aggregate.mb_per_s);
  EXPECT_DOUBLE_EQ(d.window_s, j["aggregate"]["window_s"].get<double>());
  ASSERT_EQ(d.nodes.size(), r.nodes.size());
  for (std::size_t i = 0; i < d.nodes.size(); ++i) {
    EXPECT_EQ(d.nodes[i].index, r.nodes[i].index);
    EXPECT_EQ(d.nodes[i].name, r.nodes[i].name);
    EXPECT_EQ(d.nodes[i].role, r.nodes[i].role);
    EXPECT_DOUBLE_EQ(d.nodes[i].tx_mb_per_s, r.nodes[i].tx_mb_per_s);
    EXPECT_DOUBLE_EQ(d.nodes[i].rx_mb_per_s, r.nodes[i].rx_mb_per_s);
    EXPECT_EQ(d.nodes[i].retrans_segs, 0);
  }
  ASSERT_EQ(d.pairs.size(), r.pairs.size());
  for (std::size_t i = 0; i < d.pairs.size(); ++i) {
    EXPECT_EQ(d.pairs[i].client, r.pairs[i].client);
    EXPECT_EQ(d.pairs[i].server, r.pairs[i].server);
    EXPECT_DOUBLE_EQ(d.pairs[i].tput.mb_per_s, r.pairs[i].tput.mb_per_s);
  }
}

TEST(ResultDoc, AMissingFieldIsRefusedStrictlyAndReadAsUnmeasuredLeniently) {
  json j = render_json(compute_report(two_by_two()));
  j["nodes"][1].erase("tx_mb_per_s");
  try {
    (void)read_result_doc(j, ReadMode::strict);
    FAIL() << "a strict read accepted a node without tx_mb_per_s";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "step result: field 'nodes[1].tx_mb_per_s' missing");
  }
  EXPECT_EQ(read_result_doc(j, ReadMode::lenient).nodes[1].tx_mb_per_s, 0.0);
  // A wrong type is refused in either mode, named after what is read.
  j["aggregate"]["mb_per_s"] = "fast";
  EXPECT_THROW(
      {
        try {
          (void)read_result_doc(j, ReadMode::lenient, "compare: a.json");
        } catch (const UsageError& e) {
          EXPECT_STREQ(e.what(), "compare: a.json: field 'aggregate.mb_per_s' must be a number");
          throw;
        }
      },
      UsageError);
}
