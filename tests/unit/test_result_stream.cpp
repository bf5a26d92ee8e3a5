// ResultStream: the result document written node by node as results arrive is the same JSON value
// as render_json(compute_report(run)), whatever the arrival order; a file cut short during the
// collection holds every node section written and `fabperf report` names it partial.
#include <gtest/gtest.h>
#include <fabperf/core/error.hpp>
#include <fabperf/report/plan_report.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/report/result_stream.hpp>

#include <unistd.h>
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

using namespace fabperf;
using nlohmann::json;

namespace {

std::string temp_file(const std::string& name) {
  return (testing::TempDir().empty() ? std::string("/tmp/") : testing::TempDir()) + "fabperf-rs-" +
         std::to_string(::getpid()) + "-" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

FlowResult flow(FlowRole role, std::uint32_t peer, std::uint64_t bytes, std::uint32_t i) {
  FlowResult f;
  f.role = role;
  f.op = FlowOp::rpc;
  f.peer_node = peer;
  f.local = "10.0.0." + std::to_string(i) + ":" + std::to_string(40000 + peer);
  f.remote = "10.0.0." + std::to_string(peer) + ":5000";
  f.tx_bytes_window = f.tx_delivered_window = role == FlowRole::client ? bytes : 0;
  f.rx_bytes_window = role == FlowRole::server ? bytes : 0;
  f.tx_bytes_total = f.tx_bytes_window + 17;
  f.rx_bytes_total = f.rx_bytes_window + 17;
  f.msgs_window = bytes / 1000;
  f.tcp.valid = true;
  f.tcp.rtt_us = 100 + i;
  f.tcp.snd_mss = 1448;
  return f;
}

// 2 servers, 4 clients (every client to every server, rpc with latency), one client lost,
// one failed connection, a warning and fractional CPU figures (sums of doubles must not depend
// on the arrival order).
RunRecord sample_run() {
  SpecParams sp;
  sp.mode = Mode::rpc;
  RunRecord run;
  run.spec = TestSpec::make(sp);
  run.test_id = "0123456789abcdef";
  run.started_at = "2026-11-30T05:00:00Z";
  for (std::uint32_t i = 0; i < 6; ++i) {
    NodeRecord n;
    n.index = i;
    n.name = "node" + std::to_string(i) + ":6668";
    n.address = "10.0.0." + std::to_string(i);
    n.hostname = "h" + std::to_string(i);
    n.is_server = i < 2;
    n.is_client = i >= 2;
    n.clock.uncertainty_ns = 1000 + 37 * i;
    if (i == 4) {
      n.status = NodeStatus::lost;
      n.error = "control connection closed";
      run.nodes.push_back(std::move(n));
      continue;
    }
    AgentResult a;
    a.node_index = i;
    a.window_s = 8.0 + 0.1 * i;
    a.cpu_busy_pct = 10.0 / 3.0 + 0.7 * i;
    a.process_cpu_s = 1.1 * (i + 1);
    for (std::uint32_t peer = n.is_server ? 2 : 0; peer < (n.is_server ? 6u : 2u); ++peer) {
      a.flows.push_back(
          flow(n.is_server ? FlowRole::server : FlowRole::client, peer, 1'000'003ull * (i + 1) * (peer + 3), i));
    }
    if (i == 3) a.flows.back().error = "rpc reply: peer stalled";
    if (n.is_client) {
      LatencyHistogram h;
      for (std::uint64_t k = 1; k < 200; ++k) h.record(1000 * k * (i + 1) + 7 * k * k);
      a.latency = h;
    }
    if (i == 5) a.warnings.push_back("socksize 4M: the kernel clamped SO_SNDBUF");
    n.result = std::move(a);
    run.nodes.push_back(std::move(n));
  }
  return run;
}

json expected_doc(const RunRecord& run) {
  return render_json(compute_report(run));
}

// The record as run_test returns it to a sink's owner: nodes without their results.
RunRecord without_results(RunRecord run) {
  for (auto& n : run.nodes) n.result.reset();
  return run;
}

json stream(const RunRecord& run, const std::vector<std::size_t>& arrival, const std::string& path,
            Report* report = nullptr, bool keep = false) {
  ResultStream rs(path, keep);
  RunRecord header = without_results(run);
  rs.started(header);
  for (std::size_t i : arrival) rs.node(run.nodes[i]);
  Report r = rs.finish(header);
  EXPECT_EQ(rs.write_error(), 0);
  if (report) *report = std::move(r);
  return json::parse(slurp(path));
}

void by_index(json& doc) {
  auto& nodes = doc.at("nodes");
  std::stable_sort(nodes.begin(), nodes.end(),
                   [](const json& a, const json& b) { return a.at("index") < b.at("index"); });
  auto& conns = doc.at("connections");
  std::stable_sort(conns.begin(), conns.end(),
                   [](const json& a, const json& b) { return a.at("node") < b.at("node"); });
}

}  // namespace

TEST(ResultStream, InIndexOrderTheFileIsTheInMemoryDocument) {
  RunRecord run = sample_run();
  run.socksize_basis = "socksize auto: link speed unknown";
  const std::string path = temp_file("ordered.json");
  Report report;
  const json got = stream(run, {0, 1, 2, 3, 4, 5}, path, &report, true);
  const json want = expected_doc(run);
  EXPECT_EQ(got.at("socksize_auto").at("basis"), run.socksize_basis);
  EXPECT_EQ(got, want);
  // Byte for byte once written the way render_json's callers write it.
  EXPECT_EQ(got.dump(2), want.dump(2));
  ASSERT_EQ(got.at("nodes").size(), 6u);
  EXPECT_FALSE(got.at("complete").get<bool>());
  EXPECT_EQ(got.at("connections").size(), 14u);  // 2 servers x 4 clients, 3 clients x 2 servers
  // The Report handed back for the text output is compute_report's, connections included.
  EXPECT_EQ(render_json(report), render_json(compute_report(run)));
  std::remove(path.c_str());
}

TEST(ResultStream, ArrivalOrderOnlyReordersNodesAndConnectionGroups) {
  const RunRecord run = sample_run();
  const std::string path = temp_file("arrival.json");
  Report report;
  json got = stream(run, {5, 2, 0, 4, 3, 1}, path, &report);
  EXPECT_EQ(got.at("nodes").at(0).at("index"), 5);  // as they arrived
  by_index(got);
  json want = expected_doc(run);
  by_index(want);
  EXPECT_EQ(got, want);
  // The report for the text is in index order and holds no connections (not asked to keep them).
  ASSERT_EQ(report.nodes.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(report.nodes[i].index, i);
  EXPECT_TRUE(report.connections.empty());
  Report full = compute_report(run);
  full.connections.clear();
  EXPECT_EQ(render_json(report), render_json(full));
  std::remove(path.c_str());
}

TEST(ResultStream, NoPathComputesTheSameReport) {
  const RunRecord run = sample_run();
  ResultStream rs("", true);
  const Report r = rs.finish(run);  // never started: run's nodes are streamed here
  EXPECT_EQ(rs.write_error(), 0);
  EXPECT_EQ(render_json(r), render_json(compute_report(run)));
}

TEST(ResultStream, ACutShortFileHoldsTheNodesWrittenAndReportNamesItPartial) {
  const RunRecord run = sample_run();
  const std::string path = temp_file("partial.json");
  {
    ResultStream rs(path, false);
    rs.started(without_results(run));
    rs.node(run.nodes[3]);
    rs.node(run.nodes[0]);
    // What a coordinator killed now leaves on disk: every node() was flushed.
    const std::string text = slurp(path);
    EXPECT_NE(text.find("\"schema\": \"fabperf.result\""), std::string::npos) << text.substr(0, 200);
    EXPECT_NE(text.find("\"test_id\": \"0123456789abcdef\""), std::string::npos);
    EXPECT_TRUE(json::parse(text, nullptr, false).is_discarded());
    try {
      (void)load_results(path);
      ADD_FAILURE() << "a partial file was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("a partial fabperf result"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("2 complete node sections"), std::string::npos) << e.what();
    }
    // The sections written are whole: closing the array by hand gives both nodes back.
    const json nodes = json::parse(text.substr(text.find("\"nodes\": [") + 9) + "]");
    ASSERT_EQ(nodes.size(), 2u);
    EXPECT_EQ(nodes[0].at("index"), 3);
    EXPECT_EQ(nodes[1].at("node"), "node0:6668");
  }
  std::remove(path.c_str());
}

TEST(ResultStream, AnUnwritablePathIsReportedAndTheReportStillComputed) {
  const RunRecord run = sample_run();
  ResultStream rs("/nonexistent-dir/x.json", false);
  rs.started(without_results(run));
  for (const auto& n : run.nodes) rs.node(n);
  const Report r = rs.finish(without_results(run));
  EXPECT_EQ(rs.write_error(), ENOENT);
  EXPECT_EQ(r.nodes.size(), 6u);
  EXPECT_EQ(r.pairs.size(), 8u);
}
