#include <gtest/gtest.h>
#include <fabperf/core/error.hpp>
#include <fabperf/proto/agent_result.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "common/unit_helpers.hpp"

using namespace fabperf;
using namespace fabperf::testutil;
using nlohmann::json;

namespace {

std::string error_of(const json& j) {
  try {
    (void)parse_agent_result(j);
  } catch (const ProtocolError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ProtocolError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "accepted";
  return "";
}

FlowResult flow(std::uint32_t id, FlowRole role, FlowOp op, std::uint32_t peer) {
  FlowResult f;
  f.id = id;
  f.role = role;
  f.op = op;
  f.peer_node = peer;
  f.local = "10.0.0.1:" + std::to_string(50000 + id);
  f.remote = "10.0.0.2:6001";
  f.tx_bytes_total = 10'000'000'000ull + id;
  f.rx_bytes_total = 20'000 + id;
  f.tx_bytes_window = 8'000'000'000ull;
  f.tx_delivered_window = 7'999'000'000ull;
  f.rx_queued_delta = -2'500'000;
  f.rx_bytes_window = 16'000;
  f.msgs_window = 1907;
  f.retrans_window = 4;
  return f;
}

AgentResult full_result() {
  AgentResult r;
  r.node_index = 7;
  r.hostname = "node7.cluster";
  r.aborted = true;
  r.abort_reason = "coordinator lost";
  r.window_s = 7.9993;
  r.cpu_busy_pct = 42.25;
  r.retrans_segs = 12;
  r.process_cpu_s = 3.5;
  r.start_late_ns = 12'000'000;
  r.close_late_ns = 3'000'000;
  auto f1 = flow(1, FlowRole::client, FlowOp::write, 2);
  f1.tcp = {true, 99, 120, 30, 8948, 8948, 9000, 640};
  auto f2 = flow(2, FlowRole::server, FlowOp::read, 3);
  f2.error = "connection reset by peer";
  auto f3 = flow(3, FlowRole::client, FlowOp::rpc, 4);
  f3.tcp = {true, 0, 1, 0, 1448, 1448, 1500, 10};
  r.flows = {f1, f2, f3};
  r.latency = LatencyHistogram{};
  for (std::uint64_t v : {1200u, 1300u, 45'000u, 2'000'000u}) r.latency->record(v);
  r.intervals = {{1'000'000'000, 1'000'000'000, 2'000}, {2'000'000'000, 900'000'000, 1'800}, {2'500'000'000, 0, 0}};
  r.warnings = {"socksize clamped by net.core.wmem_max", "clock stepped"};
  return r;
}

void expect_same(const AgentResult& a, const AgentResult& b) {
  EXPECT_EQ(a.node_index, b.node_index);
  EXPECT_EQ(a.hostname, b.hostname);
  EXPECT_EQ(a.aborted, b.aborted);
  EXPECT_EQ(a.abort_reason, b.abort_reason);
  EXPECT_EQ(a.window_s, b.window_s);
  EXPECT_EQ(a.cpu_busy_pct, b.cpu_busy_pct);
  EXPECT_EQ(a.retrans_segs, b.retrans_segs);
  EXPECT_EQ(a.process_cpu_s, b.process_cpu_s);
  EXPECT_EQ(a.start_late_ns, b.start_late_ns);
  EXPECT_EQ(a.close_late_ns, b.close_late_ns);
  ASSERT_EQ(a.flows.size(), b.flows.size());
  for (std::size_t i = 0; i < a.flows.size(); ++i) {
    const auto& x = a.flows[i];
    const auto& y = b.flows[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.role, y.role);
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.peer_node, y.peer_node);
    EXPECT_EQ(x.local, y.local);
    EXPECT_EQ(x.remote, y.remote);
    EXPECT_EQ(x.tx_bytes_total, y.tx_bytes_total);
    EXPECT_EQ(x.rx_bytes_total, y.rx_bytes_total);
    EXPECT_EQ(x.tx_bytes_window, y.tx_bytes_window);
    EXPECT_EQ(x.tx_delivered_window, y.tx_delivered_window);
    EXPECT_EQ(x.rx_queued_delta, y.rx_queued_delta);
    EXPECT_EQ(x.rx_bytes_window, y.rx_bytes_window);
    EXPECT_EQ(x.msgs_window, y.msgs_window);
    EXPECT_EQ(x.retrans_window, y.retrans_window);
    EXPECT_EQ(x.tcp.valid, y.tcp.valid);
    EXPECT_EQ(x.tcp.total_retrans, y.tcp.total_retrans);
    EXPECT_EQ(x.tcp.rtt_us, y.tcp.rtt_us);
    EXPECT_EQ(x.tcp.rttvar_us, y.tcp.rttvar_us);
    EXPECT_EQ(x.tcp.snd_mss, y.tcp.snd_mss);
    EXPECT_EQ(x.tcp.rcv_mss, y.tcp.rcv_mss);
    EXPECT_EQ(x.tcp.pmtu, y.tcp.pmtu);
    EXPECT_EQ(x.tcp.snd_cwnd, y.tcp.snd_cwnd);
    EXPECT_EQ(x.error, y.error);
  }
  ASSERT_EQ(a.latency.has_value(), b.latency.has_value());
  if (a.latency) {
    EXPECT_EQ(*a.latency, *b.latency);
  }
  ASSERT_EQ(a.intervals.size(), b.intervals.size());
  for (std::size_t i = 0; i < a.intervals.size(); ++i) {
    EXPECT_EQ(a.intervals[i].t_ns, b.intervals[i].t_ns);
    EXPECT_EQ(a.intervals[i].tx_bytes, b.intervals[i].tx_bytes);
    EXPECT_EQ(a.intervals[i].rx_bytes, b.intervals[i].rx_bytes);
  }
  EXPECT_EQ(a.warnings, b.warnings);
}

json good() {
  return json::parse(to_json(full_result()).dump());
}

}  // namespace

TEST(AgentResultJson, EnumNames) {
  EXPECT_EQ(to_string(FlowRole::client), "client");
  EXPECT_EQ(to_string(FlowRole::server), "server");
  EXPECT_EQ(to_string(FlowOp::write), "write");
  EXPECT_EQ(to_string(FlowOp::read), "read");
  EXPECT_EQ(to_string(FlowOp::rpc), "rpc");
}

TEST(AgentResultJson, RoundTripFull) {
  const auto r = full_result();
  expect_same(parse_agent_result(json::parse(to_json(r).dump())), r);
  expect_same(parse_agent_result(to_json(r)), r);  // in memory, without text in between
  EXPECT_EQ(to_json(parse_agent_result(good())), to_json(r));
}

TEST(AgentResultJson, RoundTripMinimal) {
  AgentResult r;
  r.retrans_segs = -1;  // unknown
  const auto back = parse_agent_result(json::parse(to_json(r).dump()));
  expect_same(back, r);
  EXPECT_FALSE(back.latency.has_value());
  EXPECT_TRUE(back.flows.empty());
}

TEST(AgentResultJson, Encoding) {
  const json j = to_json(full_result());
  EXPECT_EQ(j.at("flows").size(), 3u);
  EXPECT_EQ(j.at("flows")[0].at("role"), "client");
  EXPECT_EQ(j.at("flows")[1].at("op"), "read");
  EXPECT_TRUE(j.at("flows")[1].at("tcp").is_null());  // no TCP_INFO sample
  EXPECT_EQ(j.at("flows")[0].at("tcp").at("snd_mss"), 8948);
  EXPECT_EQ(j.at("intervals")[0], json::array({1'000'000'000, 1'000'000'000, 2'000}));
  EXPECT_EQ(j.at("latency").at("count"), 4);
  EXPECT_TRUE(to_json(AgentResult{}).at("latency").is_null());
}

TEST(AgentResultJson, RejectsWindowBytesAboveTotal) {
  json j = good();
  j["flows"][0]["tx_bytes_window"] = j["flows"][0]["tx_bytes_total"].get<std::uint64_t>() + 1;
  auto msg = error_of(j);
  EXPECT_TRUE(contains(msg, "RESULT.flows[].tx_bytes_window")) << msg;
  EXPECT_TRUE(contains(msg, "out of range")) << msg;
  j = good();
  j["flows"][2]["rx_bytes_window"] = 20'004;  // total is 20'003
  msg = error_of(j);
  EXPECT_TRUE(contains(msg, "RESULT.flows[].rx_bytes_window: 20004 out of range [0, 20003]")) << msg;
  j["flows"][2]["rx_bytes_window"] = 20'003;
  EXPECT_EQ(parse_agent_result(j).flows[2].rx_bytes_window, 20'003u);
}

// An agent from before the delivered count sends none: its figure is what it wrote, the only one
// it has; a wrong type is refused by name.
TEST(AgentResultJson, DeliveredCountOptionalForOlderAgents) {
  json j = good();
  EXPECT_EQ(parse_agent_result(j).flows[0].tx_delivered_window, 7'999'000'000u);
  j["flows"][0].erase("tx_delivered_window");
  EXPECT_EQ(parse_agent_result(j).flows[0].tx_delivered_window, 8'000'000'000u);
  j["flows"][0].erase("rx_queued_delta");  // older agents: no queue change known
  EXPECT_EQ(parse_agent_result(j).flows[0].rx_queued_delta, 0);
  j["flows"][0]["tx_delivered_window"] = "lots";
  EXPECT_TRUE(contains(error_of(j), "RESULT.flows[].tx_delivered_window")) << error_of(j);
}

// Issue 28: 8,000 counter names in the first sample and 3,000 empty ones (149 KB on the wire) grew
// the coordinator to 964 MB, every sample made whole. Refused, naming the limit, before that.
TEST(AgentResultJson, NamedCountersThatWouldExpandBeyondTheLimitAreRefused) {
  json j = good();
  json values = json::object();
  for (int k = 0; k < 8000; ++k) values["c" + std::to_string(k)] = 1u;
  json samples = json::array({{{"t_ns", 0}, {"values", values}}});
  for (int i = 1; i <= 3000; ++i) samples.push_back({{"t_ns", i}, {"values", json::object()}});
  j["host_counters"] = samples;
  const auto msg = error_of(j);
  EXPECT_TRUE(contains(msg, "RESULT.host_counters: named counters expand to more than 1048576 values")) << msg;
}

TEST(AgentResultJson, RejectsUnknownRoleAndOp) {
  json j = good();
  j["flows"][1]["role"] = "observer";
  auto msg = error_of(j);
  EXPECT_TRUE(contains(msg, "RESULT.flows[].role: unknown role 'observer'")) << msg;
  j = good();
  j["flows"][0]["role"] = "Client";
  EXPECT_TRUE(contains(error_of(j), "unknown role 'Client'"));
  j = good();
  j["flows"][0]["op"] = "erase";
  msg = error_of(j);
  EXPECT_TRUE(contains(msg, "RESULT.flows[].op: unknown op 'erase'")) << msg;
  j = good();
  j["flows"][0]["op"] = 1;
  EXPECT_TRUE(contains(error_of(j), "RESULT.flows[].op: expected a string"));
}

TEST(AgentResultJson, RejectsMissingFields) {
  for (const char* k : {"node_index", "hostname", "aborted", "abort_reason", "window_s", "cpu_busy_pct", "retrans_segs",
                        "process_cpu_s", "flows", "latency", "intervals", "warnings"}) {
    json j = good();
    j.erase(k);
    const auto msg = error_of(j);
    EXPECT_TRUE(contains(msg, std::string("RESULT.") + k + ": missing field")) << k << ": " << msg;
  }
  for (const char* k : {"id", "role", "op", "peer_node", "local", "remote", "tx_bytes_total", "rx_bytes_total",
                        "tx_bytes_window", "rx_bytes_window", "msgs_window", "retrans_window", "tcp", "error"}) {
    json j = good();
    j["flows"][0].erase(k);
    const auto msg = error_of(j);
    EXPECT_TRUE(contains(msg, std::string("RESULT.flows[].") + k + ": missing field")) << k << ": " << msg;
  }
  for (const char* k : {"total_retrans", "rtt_us", "rttvar_us", "snd_mss", "rcv_mss", "pmtu", "snd_cwnd"}) {
    json j = good();
    j["flows"][0]["tcp"].erase(k);
    const auto msg = error_of(j);
    EXPECT_TRUE(contains(msg, std::string("RESULT.flows[].tcp.") + k + ": missing field")) << k << ": " << msg;
  }
}

TEST(AgentResultJson, RejectsOutOfRangeAndWrongTypes) {
  struct Case {
    json::json_pointer at;
    json value;
    const char* expect;
  };
  const Case cases[] = {
      {json::json_pointer("/node_index"), 100001, "RESULT.node_index"},
      {json::json_pointer("/hostname"), std::string(257, 'h'), "RESULT.hostname"},
      {json::json_pointer("/aborted"), 1, "RESULT.aborted: expected a boolean"},
      {json::json_pointer("/window_s"), -0.5, "RESULT.window_s"},
      {json::json_pointer("/window_s"), "8", "RESULT.window_s: expected a number"},
      {json::json_pointer("/cpu_busy_pct"), 100.5, "RESULT.cpu_busy_pct"},
      {json::json_pointer("/retrans_segs"), -2, "RESULT.retrans_segs"},
      {json::json_pointer("/process_cpu_s"), -1, "RESULT.process_cpu_s"},
      {json::json_pointer("/start_late_ns"), -1, "RESULT.start_late_ns"},
      {json::json_pointer("/flows"), json::object(), "RESULT.flows: expected an array"},
      {json::json_pointer("/flows/0"), "flow", "RESULT.flows[]: not a JSON object"},
      {json::json_pointer("/flows/0/tx_bytes_total"), (1ull << 62) + 1, "RESULT.flows[].tx_bytes_total"},
      {json::json_pointer("/flows/0/peer_node"), -1, "RESULT.flows[].peer_node"},
      {json::json_pointer("/flows/0/local"), std::string(129, 'l'), "RESULT.flows[].local"},
      {json::json_pointer("/flows/0/tcp"), "none", "RESULT.flows[].tcp: not a JSON object"},
      {json::json_pointer("/flows/0/tcp/rtt_us"), 4294967296ull, "RESULT.flows[].tcp.rtt_us"},
      {json::json_pointer("/flows/0/error"), nullptr, "RESULT.flows[].error: expected a string"},
      {json::json_pointer("/intervals/0"), json::array({1, 2}),
       "RESULT.intervals[]: expected [t_ns, tx_bytes, rx_bytes]"},
      {json::json_pointer("/intervals/0"), json::array({1, -2, 3}), "RESULT.intervals[]"},
      {json::json_pointer("/intervals/0"), json::array({1.5, 2, 3}), "RESULT.intervals[]"},
      {json::json_pointer("/intervals/1"), json::object({{"t_ns", 1}}), "RESULT.intervals[]"},
      {json::json_pointer("/intervals"), "[]", "RESULT.intervals: expected an array"},
      {json::json_pointer("/warnings/0"), 3, "RESULT.warnings: entries must be strings"},
      {json::json_pointer("/latency"), "none", "RESULT.latency"},
      {json::json_pointer("/latency/count"), 5u, "RESULT.latency"},
      {json::json_pointer("/latency/buckets/0/0"), 999u, "RESULT.latency"},
  };
  for (const auto& c : cases) {
    json j = good();
    j[c.at] = c.value;
    const auto msg = error_of(j);
    EXPECT_TRUE(contains(msg, c.expect)) << c.at.to_string() << "=" << c.value.dump() << ": " << msg;
  }
  EXPECT_TRUE(contains(error_of(json::array()), "RESULT: not a JSON object"));
}

TEST(AgentResultJson, AcceptsBoundaryValues) {
  json j = good();
  j["cpu_busy_pct"] = 100;
  j["retrans_segs"] = -1;
  j["window_s"] = 0;
  j["latency"] = nullptr;
  j["flows"][0]["tcp"] = nullptr;
  const auto r = parse_agent_result(j);
  EXPECT_EQ(r.cpu_busy_pct, 100.0);
  EXPECT_EQ(r.retrans_segs, -1);
  EXPECT_EQ(r.window_s, 0.0);
  EXPECT_FALSE(r.latency.has_value());
  EXPECT_FALSE(r.flows[0].tcp.valid);
}

TEST(AgentResultWire, NewerFieldsRoundTrip) {
  AgentResult r;
  r.node_index = 3;
  r.hostname = "h3";
  FlowResult f;
  f.op = FlowOp::probe;
  f.iface = "eth1";
  f.verify_errors = 7;
  f.local = "198.18.1.1:4000";
  f.remote = "198.18.1.2:5000";
  r.flows.push_back(f);
  LatencyHistogram d;
  d.record(25'000);
  d.record(900'000);
  r.delay = d;
  r.threads = {{"send-0", 1.25}, {"probe-0", 0.01}};
  LinkResult l;
  l.info.name = "eth1";
  l.info.kind = "veth";
  l.info.mtu = 9000;
  l.info.speed_mbps = 10000;
  LinkSample s0{0, {true, 1, 2, 3, 4, 5, 6, 7, 8}};
  LinkSample s1{1'000'000'000, {true, 11, 12, 13, 14, 15, 16, 17, 18}};
  l.samples = {s0, s1};
  l.vanished = true;
  r.links.push_back(l);
  r.socket_limits.rmem_max = 4194304;
  r.socket_limits.tcp_wmem[2] = 6291456;
  const AgentResult b = parse_agent_result(nlohmann::json::parse(to_json(r).dump()));
  ASSERT_EQ(b.flows.size(), 1u);
  EXPECT_EQ(b.flows[0].op, FlowOp::probe);
  EXPECT_EQ(b.flows[0].iface, "eth1");
  EXPECT_EQ(b.flows[0].verify_errors, 7u);
  ASSERT_TRUE(b.delay.has_value());
  EXPECT_EQ(*b.delay, d);
  ASSERT_EQ(b.threads.size(), 2u);
  EXPECT_EQ(b.threads[0].label, "send-0");
  EXPECT_DOUBLE_EQ(b.threads[0].cpu_s, 1.25);
  ASSERT_EQ(b.links.size(), 1u);
  EXPECT_EQ(b.links[0].info.name, "eth1");
  EXPECT_EQ(b.links[0].info.speed_mbps, 10000);
  EXPECT_TRUE(b.links[0].vanished);
  ASSERT_EQ(b.links[0].samples.size(), 2u);
  EXPECT_EQ(b.links[0].samples[1].counters.rx_dropped, 18u);
  EXPECT_EQ(b.links[0].samples[1].t_ns, 1'000'000'000);
  EXPECT_EQ(b.socket_limits.rmem_max, 4194304u);
  EXPECT_EQ(b.socket_limits.tcp_wmem[2], 6291456u);
}
