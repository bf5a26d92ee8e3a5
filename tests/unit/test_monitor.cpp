// fabperf monitor's pure parts with a fake clock and fake probes: the config and its one-line
// errors, the rotation under the duty cap, back-off, baselines and drift, the exposition, the
// HTTP answers, the state file, the loop (--once exit codes, a down agent), and flat memory over
// 10,000 probe results.
#include <fabperf/core/error.hpp>
#include <fabperf/monitor/monitor.hpp>
#include <fabperf/report/plan_report.hpp>
#include <fabperf/report/report.hpp>

#include <gtest/gtest.h>

#include "common/sanitizers.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

using namespace fabperf;
using namespace fabperf::monitor;
using nlohmann::json;

namespace {

std::string hosts_toml(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i)
    s += "[[hosts]]\nname = \"h" + std::to_string(i) + "\"\naddress = \"198.18.0." + std::to_string(i) + "\"\n";
  return s;
}

MonitorConfig config(int n, const std::string& monitor_extra = "", const std::string& tail = "") {
  return parse_config("[monitor]\nstate-dir = \"/tmp/x\"\n" + monitor_extra + "\n" + hosts_toml(n) + tail, "m.toml");
}

std::string config_error_of(const std::string& text) {
  try {
    (void)parse_config(text, "m.toml");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kMon = "[monitor]\nstate-dir = \"/tmp/x\"\n";

}  // namespace

TEST(MonitorConfig, ParsesMonitorKeysAndSettingsTables) {
  const auto c = parse_config(R"([monitor]
listen = "127.0.0.1:0"
state-dir = "/var/lib/fm"
max-duty = "2.5%"
latency-interval = "30s"
drift-percent = 15
baseline-probes = 3
max-backoff = 60
link-names = ["ib0", "ib1"]
[[hosts]]
name = "a"
address = "10.0.0.1"
links = ["10.0.0.1", "10.1.0.1"]
[[hosts]]
name = "b"
address = "10.0.0.2:7000"
links = ["10.0.0.2", "10.1.0.2"]
[probe]
time = 3
threads = 2
buffsize = "256K"
[latency]
buffsize = "8K"
)",
                              "m.toml");
  EXPECT_EQ(c.listen_host, "127.0.0.1");
  EXPECT_EQ(c.listen_port, 0);
  EXPECT_DOUBLE_EQ(c.max_duty, 0.025);
  EXPECT_EQ(c.latency_interval, std::chrono::seconds(30));
  EXPECT_DOUBLE_EQ(c.drift_pct, 15);
  EXPECT_EQ(c.baseline_probes, 3u);
  EXPECT_EQ(c.max_backoff, std::chrono::seconds(60));
  EXPECT_EQ(c.link_names, (std::vector<std::string>{"ib0", "ib1"}));
  ASSERT_EQ(c.hosts.size(), 2u);
  EXPECT_EQ(c.hosts[1].hp.port, 7000);
  EXPECT_EQ(c.probe.time(), std::chrono::seconds(3));
  EXPECT_EQ(c.probe.threads(), 2u);
  EXPECT_EQ(c.probe.mode(), Mode::stream);  // the monitor's default for probes
  EXPECT_EQ(c.latency.buffsize(), 8u * 1024);
  EXPECT_EQ(c.latency.mode(), Mode::rpc);
  EXPECT_EQ(c.latency.threads(), 1u);
}

TEST(MonitorConfig, DefaultLinkNames) {
  EXPECT_EQ(config(2).link_names, (std::vector<std::string>{"default"}));
  const auto c = parse_config(kMon +
                                  "[[hosts]]\nname=\"a\"\naddress=\"x@1.1.1.1+2.2.2.2\"\n[[hosts]]\nname="
                                  "\"b\"\naddress=\"y@1.1.1.2+2.2.2.3\"\n",
                              "m.toml");
  EXPECT_EQ(c.link_names, (std::vector<std::string>{"link0", "link1"}));
}

TEST(MonitorConfig, OneLineErrorsNameTheField) {
  EXPECT_EQ(config_error_of(kMon + "colour = 1\n" + hosts_toml(2)),
            "m.toml:3: field 'colour': unknown field of [monitor] (listen, listen-public, state-dir, max-duty, "
            "latency-interval, "
            "drift-percent, baseline-probes, acceptance, link-names, max-backoff, connect-timeout)");
  EXPECT_EQ(config_error_of(kMon + hosts_toml(2) + "[probe]\nthreadz = 2\n"),
            "m.toml:10: field 'threadz': unknown setting (the names of 'fabperf run' options, e.g. time, buffsize, "
            "threads, mode)");
  EXPECT_EQ(config_error_of(kMon + hosts_toml(2) + "[probe]\nthreads = 0\n"),
            "m.toml:10: field 'threads': value 0: out of range (1..4096)");
  EXPECT_EQ(
      config_error_of(kMon + "listen = \"0.0.0.0:9668\"\n" + hosts_toml(2)),
      "m.toml:3: field 'listen': 0.0.0.0 is not a loopback address: metrics would be readable from the network; set "
      "listen-public = true to allow it");
  EXPECT_EQ(config_error_of(kMon + "listen = \"0.0.0.0:9668\"\nlisten-public = true\n" + hosts_toml(2)), "(no error)");
  EXPECT_EQ(config_error_of(kMon + "max-duty = \"150%\"\n" + hosts_toml(2)),
            "m.toml:3: field 'max-duty': 150% is out of range (above 0, at most 100)");
  EXPECT_EQ(config_error_of(kMon + "max-duty = \"lots\"\n" + hosts_toml(2)),
            "m.toml:3: field 'max-duty': 'lots': expected a percentage such as \"1%\"");
  EXPECT_EQ(config_error_of(kMon + "drift-percent = 0\n" + hosts_toml(2)),
            "m.toml:3: field 'drift-percent': 0 is out of range (above 0, below 100)");
  EXPECT_EQ(config_error_of(kMon + "link-names = [\"a\", \"b\"]\n" + hosts_toml(2)),
            "m.toml:3: field 'link-names': 2 names for 1 link plane(s): give one per link address of a host");
  EXPECT_EQ(config_error_of("[monitor]\nlisten = \"127.0.0.1:1\"\n" + hosts_toml(2)),
            "m.toml:1: field 'state-dir': missing: the folder that keeps the baselines across restarts");
  EXPECT_EQ(config_error_of(kMon + hosts_toml(1)), "m.toml:3: field 'hosts': expected two or more [[hosts]] tables");
  EXPECT_EQ(
      config_error_of(kMon + hosts_toml(2) + "[latency]\ntransport = \"rdma\"\n"),
      "m.toml:9: field 'transport': the [latency] and [probe] transports differ: the `transport` label would mix them");
  EXPECT_EQ(config_error_of(kMon + hosts_toml(2) + "[probe]\nqdepth = 4\n"),
            "m.toml:9: --qdepth: RDMA (--transport rdma) only (this test's transport is tcp)");
  EXPECT_EQ(config_error_of("[monitor\n"), "m.toml:1:9: Error while parsing table header: expected ']', saw '\\n'");
  EXPECT_EQ(config_error_of(kMon + hosts_toml(2) + "[extra]\n"),
            "m.toml:9: field 'extra': unknown top-level field (monitor, hosts, probe, latency)");
}

TEST(MonitorSchedule, RotationCoversEveryOrderedPairOnEveryLinkOnce) {
  monitor::Schedule s(4, 2, 1.0, 1e9);
  EXPECT_EQ(s.bandwidth_targets().size(), 24u);
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> seen;
  double t = 0;
  // The first thing is a latency round: every pair of every link once, each step disjoint.
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> lat;
  for (std::size_t i = 0; i < s.latency_jobs().size(); ++i) {
    const auto n = s.next(t);
    ASSERT_EQ(n.job.kind, ProbeKind::latency);
    std::set<std::uint32_t> nodes;
    for (const auto& [c, v] : n.job.pairs) {
      EXPECT_TRUE(nodes.insert(c).second && nodes.insert(v).second) << "a node twice in one latency step";
      lat.insert({c, v, n.job.link});
    }
    s.done(n.job, t, t + 1);
    t += 1;
  }
  EXPECT_EQ(lat.size(), 24u);
  EXPECT_EQ(s.latency_rounds(), 1u);
  while (s.rotations() == 0) {
    const auto n = s.next(t);
    ASSERT_EQ(n.job.kind, ProbeKind::bandwidth);
    ASSERT_EQ(n.job.pairs.size(), 1u);
    EXPECT_TRUE(seen.insert({n.job.pairs[0].first, n.job.pairs[0].second, n.job.link}).second);
    t = std::max(t, n.at_s);
    s.done(n.job, t, t + 1);
    t += 1;
  }
  EXPECT_EQ(seen.size(), 24u);
}

TEST(MonitorSchedule, DutyCapHoldsOnEveryHostLink) {
  // 1 s probes (plus a varying set-up time) at max-duty 10%: no host link may be busy more than
  // 10% of any stretch between its probe starts.
  const double duty = 0.1;
  monitor::Schedule s(5, 2, duty, 1e9);
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::pair<double, double>>> busy;
  double t = 0;
  int k = 0;
  while (s.rotations() < 3) {
    const auto n = s.next(t);
    t = std::max(t, n.at_s);
    const double d = 1.0 + 0.1 * (k++ % 4);
    if (n.job.kind == ProbeKind::bandwidth) {
      for (const auto h : {n.job.pairs[0].first, n.job.pairs[0].second}) busy[{h, n.job.link}].push_back({t, t + d});
    }
    s.done(n.job, t, t + d);
    t += d;
  }
  for (const auto& [hl, spans] : busy) {
    ASSERT_GE(spans.size(), 2u);
    for (std::size_t i = 1; i < spans.size(); ++i) {
      const double dur = spans[i - 1].second - spans[i - 1].first;
      EXPECT_GE(spans[i].first - spans[i - 1].first, dur / duty - 1e-9) << "host " << hl.first << " link " << hl.second;
    }
    const double total = spans.back().second - spans.front().first;
    double on = 0;
    for (const auto& [a, b] : spans) on += b - a;
    // Over the whole run the last probe's own rest is not yet served: allow that one probe.
    EXPECT_LE(on - (spans.back().second - spans.back().first), duty * total + 1e-9);
  }
}

TEST(MonitorSchedule, LatencyRoundsComeBackEveryInterval) {
  monitor::Schedule s(2, 1, 1.0, 10.0);
  double t = 0;
  std::vector<double> lat_starts;
  while (t < 35) {
    const auto n = s.next(t);
    t = std::max(t, n.at_s);
    if (n.job == s.latency_jobs().front()) lat_starts.push_back(t);  // a round's first step
    s.done(n.job, t, t + 1);
    t += 1;
  }
  ASSERT_GE(lat_starts.size(), 4u);
  EXPECT_DOUBLE_EQ(lat_starts[0], 0);
  for (std::size_t i = 1; i < lat_starts.size(); ++i) EXPECT_NEAR(lat_starts[i] - lat_starts[i - 1], 10.0, 1.0 + 1e-9);
}

TEST(MonitorBackoff, DoublesUpToTheCapAndResets) {
  Backoff b(2, 1.0, 8.0);
  std::vector<double> waits;
  for (int i = 0; i < 6; ++i) {
    b.failed(0, 100);
    waits.push_back(b.retry_at(0) - 100);
  }
  EXPECT_EQ(waits, (std::vector<double>{1, 2, 4, 8, 8, 8}));
  EXPECT_TRUE(b.blocked(0, 107.9));
  EXPECT_FALSE(b.blocked(0, 108));
  EXPECT_FALSE(b.blocked(1, 100));
  b.succeeded(0);
  EXPECT_FALSE(b.blocked(0, 100));
  EXPECT_EQ(b.failures(0), 0u);
}

TEST(MonitorDrift, ThresholdIsPercentBelowBaseline) {
  const auto d = evaluate_drift(70, 100, 20);
  EXPECT_TRUE(d.alert);
  EXPECT_DOUBLE_EQ(d.threshold, 80);
  EXPECT_DOUBLE_EQ(d.below_pct, 30);
  EXPECT_FALSE(evaluate_drift(80, 100, 20).alert);
  EXPECT_FALSE(evaluate_drift(120, 100, 20).alert);
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
}

namespace {

JobResult bw(std::uint32_t c, std::uint32_t s, double bps, double wall = 1000) {
  JobResult r;
  r.job = {ProbeKind::bandwidth, 0, {{c, s}}};
  r.wall_s = wall;
  PairSample p;
  p.client = c;
  p.server = s;
  p.ok = true;
  p.bytes_per_s = bps;
  p.p50_s = 0.0002;
  p.p99_s = 0.0009;
  p.retransmits = 2;
  r.pairs.push_back(p);
  r.links.push_back({c, "eth0", 400000000, 9000, 1, {}});
  r.links.push_back({s, "eth0", 400000000, 9000, 0, {{"eth0", "ens1", 0.25, 0.75}}});
  return r;
}

}  // namespace

TEST(MonitorState, BaselineFromFirstProbesThenDriftRaisesAndClears) {
  const auto cfg = config(3, "baseline-probes = 3\ndrift-percent = 20");
  MonitorState st(cfg);
  bool changed = false;
  EXPECT_TRUE(st.apply(bw(0, 1, 100e6), changed).empty());
  EXPECT_TRUE(changed);
  (void)st.apply(bw(0, 1, 120e6), changed);
  const auto lines = st.apply(bw(0, 1, 110e6), changed);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "baseline: h1->h2 default tcp set to 110.000 MB/s (median of 3 probes)");
  EXPECT_DOUBLE_EQ(*st.pair(0, 1, 0).baseline.bytes_per_s, 110e6);
  changed = false;
  EXPECT_TRUE(st.apply(bw(0, 1, 90e6), changed).empty());  // 18% below: no alert
  EXPECT_FALSE(changed);
  EXPECT_FALSE(st.pair(0, 1, 0).drift_alert);
  auto l2 = st.apply(bw(0, 1, 55e6), changed);
  ASSERT_EQ(l2.size(), 1u);
  EXPECT_EQ(l2[0],
            "drift: h1->h2 default tcp at 55.000 MB/s is 50.0% below its baseline 110.000 MB/s (alert above 20%)");
  EXPECT_TRUE(st.pair(0, 1, 0).drift_alert);
  EXPECT_EQ(st.active_alerts(), 1u);
  EXPECT_TRUE(st.apply(bw(0, 1, 50e6), changed).empty());  // still raised: no second line
  auto l3 = st.apply(bw(0, 1, 100e6), changed);
  ASSERT_EQ(l3.size(), 1u);
  EXPECT_EQ(l3[0], "drift cleared: h1->h2 default tcp back at 100.000 MB/s (baseline 110.000 MB/s)");
  EXPECT_EQ(st.active_alerts(), 0u);
  EXPECT_EQ(st.pair(0, 1, 0).probes_total[0], 7u);
  EXPECT_EQ(st.pair(0, 1, 0).retransmits_total, 14u);
  EXPECT_EQ(st.host_link(0, 0).nic_errors_total, 7u);
}

TEST(MonitorState, FailuresAreCountedAndKeepTheLastValues) {
  const auto cfg = config(2);
  MonitorState st(cfg);
  bool changed = false;
  (void)st.apply(bw(0, 1, 100e6, 50), changed);
  (void)st.apply(
      failed_job(cfg, {ProbeKind::bandwidth, 0, {{0, 1}}}, "connect 198.18.0.2:6668: Connection refused", 60), changed);
  const auto& p = st.pair(0, 1, 0);
  EXPECT_EQ(p.probes_total[0], 2u);
  EXPECT_EQ(p.failures_total[0], 1u);
  EXPECT_DOUBLE_EQ(*p.last_probe_s[0], 50);
  EXPECT_DOUBLE_EQ(*p.bytes_per_s, 100e6);
  const auto f =
      failed_job(cfg, {ProbeKind::bandwidth, 0, {{0, 1}}}, "connect 198.18.0.2:6668: Connection refused", 60);
  EXPECT_EQ(f.unreachable, (std::vector<std::uint32_t>{1}));
}

TEST(MonitorMetrics, ExpositionHasHelpTypeBaseUnitsAndLabels) {
  const auto cfg = config(2, "baseline-probes = 1");
  MonitorState st(cfg);
  bool changed = false;
  (void)st.apply(bw(0, 1, 123.5e6, 1700000000), changed);
  JobResult lat;
  lat.job = {ProbeKind::latency, 0, {{1, 0}}};
  lat.wall_s = 1700000001;
  PairSample p;
  p.client = 1;
  p.server = 0;
  p.ok = true;
  p.p50_s = 0.00005;
  p.p99_s = 0.0001;
  lat.pairs.push_back(p);
  (void)st.apply(lat, changed);
  st.set_agent_up(1, false);
  const std::string m = render_metrics(st);
  const std::string pl = R"({client="h1",server="h2",link="default",transport="tcp",direction="client-to-server"})";
  for (
      const std::string& line : std::vector<std::string>{
          "# HELP fabperf_throughput_bytes_per_second Payload throughput of the last bandwidth probe of the pair on "
          "the link.",
          "# TYPE fabperf_throughput_bytes_per_second gauge",
          "fabperf_throughput_bytes_per_second" + pl + " 123500000",
          "fabperf_baseline_bytes_per_second" + pl + " 123500000",
          "fabperf_drift_alert" + pl + " 0",
          "fabperf_latency_under_load_p99_seconds" + pl + " 0.0009",
          "# TYPE fabperf_retransmits_total counter",
          "fabperf_retransmits_total" + pl + " 2",
          R"(fabperf_probes_total{client="h1",server="h2",link="default",transport="tcp",kind="bandwidth"} 1)",
          R"(fabperf_probes_total{client="h2",server="h1",link="default",transport="tcp",kind="latency"} 1)",
          R"(fabperf_probe_failures_total{client="h2",server="h1",link="default",transport="tcp",kind="bandwidth"} 0)",
          R"(fabperf_last_probe_timestamp_seconds{client="h1",server="h2",link="default",transport="tcp",kind="bandwidth"} 1700000000)",
          R"(fabperf_latency_p50_seconds{client="h2",server="h1",link="default",transport="tcp"} 5e-05)",
          R"(fabperf_link_speed_bytes_per_second{host="h1",link="default",interface="eth0"} 50000000)",
          R"(fabperf_link_mtu_bytes{host="h2",link="default",interface="eth0"} 9000)",
          R"(fabperf_nic_errors_total{host="h1",link="default",interface="eth0"} 1)",
          R"(fabperf_bond_member_share_ratio{host="h2",link="default",bond="eth0",member="ens1",direction="rx"} 0.75)",
          R"(fabperf_agent_up{host="h2"} 0)",
          "fabperf_monitor_rotations_total 0",
      }) {
    EXPECT_NE(m.find(line + "\n"), std::string::npos) << line << "\n--- in ---\n" << m;
  }
  // No throughput for a pair never probed, and every family's TYPE exactly once.
  EXPECT_EQ(m.find("fabperf_throughput_bytes_per_second{client=\"h2\""), std::string::npos);
  EXPECT_EQ(m.find("# TYPE fabperf_probes_total"), m.rfind("# TYPE fabperf_probes_total"));
  EXPECT_LE(std::count(m.begin(), m.end(), '\n'), static_cast<long>(max_series(cfg, 1) + 2 * 17));
}

TEST(MonitorMetrics, LabelValuesAreEscaped) {
  const auto cfg = config(2);
  MonitorState st(cfg);
  bool changed = false;
  auto r = bw(0, 1, 1e6);
  r.links[0].interface = "we\"ird\\if\n";
  (void)st.apply(r, changed);
  EXPECT_NE(render_metrics(st).find(R"(interface="we\"ird\\if\n")"), std::string::npos);
}

TEST(MonitorMetrics, SeriesBound) {
  // 64 hosts, 2 link planes, bonds of 2 members: the number docs/monitor.md states.
  std::string t = kMon + "link-names = [\"a\", \"b\"]\n";
  for (int i = 1; i <= 64; ++i)
    t += "[[hosts]]\nname = \"h" + std::to_string(i) + "\"\naddress = \"n" + std::to_string(i) + "@10.0.0." +
         std::to_string(i) + "+10.1.0." + std::to_string(i) + "\"\n";
  EXPECT_EQ(max_series(parse_config(t, "m.toml"), 2), 113857u);
}

TEST(MonitorHttp, OnlyGetMetrics) {
  const auto render = [] { return std::string("x 1\n"); };
  const auto ok = handle_http("GET", "/metrics", render);
  EXPECT_EQ(ok.status, 200u);
  EXPECT_EQ(ok.content_type, kExpositionContentType);
  EXPECT_EQ(ok.body, "x 1\n");
  EXPECT_EQ(handle_http("GET", "/metrics?x=1", render).status, 200u);
  EXPECT_EQ(handle_http("GET", "/", render).status, 404u);
  EXPECT_EQ(handle_http("GET", "/metricsx", render).status, 404u);
  const auto post = handle_http("POST", "/metrics", render);
  EXPECT_EQ(post.status, 405u);
  EXPECT_EQ(post.allow, "GET");
  EXPECT_EQ(post.body, "method POST not allowed: only GET /metrics\n");
}

TEST(MonitorStateFile, BaselinesRoundTripAndBadFilesAreNamed) {
  const auto cfg = config(3, "baseline-probes = 2");
  MonitorState a(cfg);
  bool changed = false;
  (void)a.apply(bw(0, 1, 100e6), changed);
  (void)a.apply(bw(0, 1, 110e6), changed);
  (void)a.apply(bw(2, 0, 50e6), changed);  // one sample so far
  const json j = a.baselines_json();
  MonitorState b(cfg);
  EXPECT_EQ(b.load_baselines(j, "s.json"), 0u);
  EXPECT_DOUBLE_EQ(*b.pair(0, 1, 0).baseline.bytes_per_s, 105e6);
  EXPECT_EQ(b.pair(2, 0, 0).baseline.samples, (std::vector<double>{50e6}));
  EXPECT_EQ(b.baselines_json(), j);
  // A host that left the config: its baselines are dropped, and counted.
  const auto fewer = config(2, "baseline-probes = 2");
  MonitorState c(fewer);
  EXPECT_EQ(c.load_baselines(j, "s.json"), 1u);
  const auto err = [&](const json& bad) {
    try {
      MonitorState d(cfg);
      d.load_baselines(bad, "/var/lib/x/baselines.json");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(err(json::array()),
            "state file /var/lib/x/baselines.json: not a fabperf.monitor-baselines file (move it away, or start with "
            "--reset-baselines to measure new baselines)");
  json v2 = j;
  v2["version"] = 2;
  EXPECT_EQ(err(v2),
            "state file /var/lib/x/baselines.json: unknown version (this fabperf reads version 1) (move it away, or "
            "start with --reset-baselines to measure new baselines)");
  json broken = j;
  broken["baselines"][0].erase("client");
  EXPECT_NE(err(broken).find("state file /var/lib/x/baselines.json: a baseline entry is malformed"), std::string::npos);
}

TEST(MonitorStateFile, AtomicWriteReplacesAndLeavesNoTemporary) {
  const auto dir = std::filesystem::temp_directory_path() / ("fabperf-mon-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string f = (dir / "baselines.json").string();
  write_file_atomic(f, "one\n");
  write_file_atomic(f, "two\n");
  std::ifstream in(f);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(s, "two\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  EXPECT_EQ(std::filesystem::status(f).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  EXPECT_THROW(write_file_atomic((dir / "no" / "x.json").string(), "x"), SystemError);
  // Issue 28: a link planted where the temporary file used to go ("PATH.tmp") redirected the
  // write to any file the monitor (often root) could write. The target stays untouched now.
  const std::string victim = (dir / "victim").string();
  std::ofstream(victim) << "precious\n";
  std::filesystem::create_symlink(victim, f + ".tmp");
  write_file_atomic(f, "three\n");
  std::ifstream vin(victim);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(vin)), std::istreambuf_iterator<char>()), "precious\n");
  std::ifstream fin(f);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(fin)), std::istreambuf_iterator<char>()), "three\n");
  std::filesystem::remove_all(dir);
}

TEST(MonitorAcceptance, SeedsBaselinesFromARunResult) {
  const auto cfg = config(3, "", "[probe]\ntime = 2\nthreads = 4\n");
  json settings = to_json(cfg.probe);
  json result = {
      {"schema", kResultSchema},
      {"schema_version", kResultSchemaVersion},
      {"aggregate", json::object()},
      {"settings", settings},
      {"nodes", {{{"index", 0}, {"node", "198.18.0.1:6668"}}, {{"index", 1}, {"node", "198.18.0.2:6668"}}}},
      {"pairs",
       {{{"client", 0}, {"server", 1}, {"mb_per_s", 48.5}}, {{"client", 1}, {"server", 0}, {"mb_per_s", 47.0}}}}};
  MonitorState st(cfg);
  EXPECT_EQ(st.seed_from_acceptance(result.dump(), "acc.json"), 2u);
  EXPECT_DOUBLE_EQ(*st.pair(0, 1, 0).baseline.bytes_per_s, 48.5e6);
  EXPECT_EQ(st.pair(0, 1, 0).baseline.source, "acceptance acc.json");
  EXPECT_FALSE(st.pair(0, 2, 0).baseline.bytes_per_s);
  // Plan results (JSON Lines): the median over the steps.
  std::string lines = json{{"type", "plan"},
                           {"schema", kPlanResultsSchema},
                           {"version", kPlanResultsVersion},
                           {"fabperf_version", "x"},
                           {"started_at", "t"},
                           {"plan_file", "p.toml"},
                           {"steps_total", 3},
                           {"plan", json::object()}}
                          .dump() +
                      "\n";
  int index = 0;
  for (double v : {10.0, 30.0, 20.0}) {
    json r = result;
    r["pairs"] = {{{"client", 0}, {"server", 1}, {"mb_per_s", v}}};
    lines += json{{"type", "step"},    {"index", index},     {"id", "t/" + std::to_string(index++)},
                  {"test", "t"},       {"pattern", "pairs"}, {"clients", {"a"}},
                  {"servers", {"b"}},  {"status", "done"},   {"started_at", "t"},
                  {"duration_s", 2.0}, {"result", r}}
                 .dump() +
             "\n";
  }
  MonitorState st2(cfg);
  EXPECT_EQ(st2.seed_from_acceptance(lines, "r.jsonl"), 1u);
  EXPECT_DOUBLE_EQ(*st2.pair(0, 1, 0).baseline.bytes_per_s, 20e6);
  // Other settings: not comparable, refused by name.
  json other = result;
  other["settings"]["threads"] = 8;
  MonitorState st3(cfg);
  try {
    st3.seed_from_acceptance(other.dump(), "acc.json");
    FAIL() << "accepted a result with other settings";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "acceptance file acc.json: setting 'threads' is 8 there but 4 in the [probe] table: its figures are not "
              "comparable");
  }
  EXPECT_THROW(st3.seed_from_acceptance("garbage\n", "g.json"), UsageError);
}

namespace {

class FakeClock : public MonitorClock {
 public:
  double t{0};
  double stop_at{std::numeric_limits<double>::infinity()};  // the monitor is stopped then
  int sleeps{0}, max_sleeps{1'000'000};                     // a loop that never lets time pass
  double now() override { return t; }
  double wall() override { return 1700000000 + t; }
  bool sleep_until(double until) override {
    t = std::max(t, until);
    return ++sleeps < max_sleeps && t < stop_at;
  }
};

// Probes take 1 s of the fake clock; throughput per pair from `rate`; hosts in `down` refuse.
class FakeProber : public Prober {
 public:
  FakeProber(const MonitorConfig& cfg, FakeClock& clock) : cfg_(cfg), clock_(clock) {}
  std::function<double(std::uint32_t, std::uint32_t)> rate = [](std::uint32_t, std::uint32_t) { return 100e6; };
  std::set<std::uint32_t> down;
  std::vector<Job> jobs;
  JobResult run(const Job& job) override {
    jobs.push_back(job);
    clock_.t += 1;
    for (const auto& [c, s] : job.pairs) {
      for (const auto h : {c, s}) {
        if (down.count(h))
          return failed_job(cfg_, job, "connect " + cfg_.hosts[h].hp.str() + ": Connection refused", clock_.wall());
      }
    }
    JobResult r;
    r.job = job;
    r.wall_s = clock_.wall();
    for (const auto& [c, s] : job.pairs) {
      PairSample p;
      p.client = c;
      p.server = s;
      p.ok = true;
      if (job.kind == ProbeKind::bandwidth) p.bytes_per_s = rate(c, s);
      p.p50_s = 1e-4;
      p.p99_s = 2e-4;
      r.pairs.push_back(p);
    }
    return r;
  }

 private:
  const MonitorConfig& cfg_;
  FakeClock& clock_;
};

}  // namespace

TEST(MonitorLoop, OnceRunsOneLatencyRoundAndOneRotationWithKpiExitCodes) {
  const auto cfg = config(4, "baseline-probes = 1\nmax-duty = \"50%\"");
  FakeClock clock;
  FakeProber prober(cfg, clock);
  MonitorState st(cfg);
  std::mutex mu;
  RunOptions o;
  o.once = true;
  int baseline_writes = 0;
  o.on_baselines = [&](const json&) { ++baseline_writes; };
  EXPECT_EQ(run_monitor(cfg, prober, clock, st, mu, o), 0);
  std::size_t bwn = 0, latn = 0;
  for (const auto& j : prober.jobs) (j.kind == ProbeKind::bandwidth ? bwn : latn)++;
  EXPECT_EQ(bwn, 12u);
  EXPECT_EQ(latn, 6u);  // 4 hosts: 12 ordered pairs in 6 steps of 2 disjoint pairs
  EXPECT_EQ(baseline_writes, 12);
  EXPECT_EQ(st.rotations(), 1u);
  // The next rotation: h3 -> h1 at half its baseline raises the alert: exit 1.
  prober.rate = [](std::uint32_t c, std::uint32_t s) { return c == 2 && s == 0 ? 50e6 : 100e6; };
  std::vector<std::string> log;
  o.on_log = [&](const std::string& l) { log.push_back(l); };
  EXPECT_EQ(run_monitor(cfg, prober, clock, st, mu, o), 1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0],
            "drift: h3->h1 default tcp at 50.000 MB/s is 50.0% below its baseline 100.000 MB/s (alert above 20%)");
}

TEST(MonitorLoop, DownAgentCountsFailuresBacksOffAndTheRestCarriesOn) {
  const auto cfg = config(3, "max-duty = \"100%\"\nmax-backoff = 4");
  FakeClock clock;
  FakeProber prober(cfg, clock);
  prober.down = {2};
  MonitorState st(cfg);
  std::mutex mu;
  RunOptions o;
  o.once = true;
  std::vector<std::string> log;
  o.on_log = [&](const std::string& l) { log.push_back(l); };
  EXPECT_EQ(run_monitor(cfg, prober, clock, st, mu, o), 3);
  // Every pair with h3 failed (tried, or skipped while backed off); every other pair has a value.
  for (std::uint32_t c = 0; c < 3; ++c) {
    for (std::uint32_t s = 0; s < 3; ++s) {
      if (c == s) continue;
      const auto& p = st.pair(c, s, 0);
      const bool involves = c == 2 || s == 2;
      EXPECT_EQ(p.failures_total[0], involves ? 1u : 0u) << c << "->" << s;
      EXPECT_EQ(p.bytes_per_s.has_value(), !involves) << c << "->" << s;
    }
  }
  EXPECT_FALSE(st.agent_up(2));
  EXPECT_TRUE(st.agent_up(0));
  EXPECT_NE(std::find_if(log.begin(), log.end(),
                         [](const std::string& l) {
                           return l.find("agent h3 (198.18.0.3:6668) unreachable (1 in a row)") == 0;
                         }),
            log.end());
  // It comes back: the next rotation succeeds once the back-off has passed, and says so.
  prober.down.clear();
  clock.t += 10;
  log.clear();
  EXPECT_EQ(run_monitor(cfg, prober, clock, st, mu, o), 0);
  EXPECT_TRUE(st.agent_up(2));
  EXPECT_NE(std::find(log.begin(), log.end(), "agent h3 (198.18.0.3:6668) answers again"), log.end());
}

// Issue 28: with one of two agents down every job waits for it, and the loop spun (378,707 log
// lines and a 121 MB probe log in 6 s). Over a simulated minute it must try the agent at its
// back-off times, log once per attempt or change, and write no probe result for a job not run.
TEST(MonitorLoop, AnAgentDownNeitherSpinsNorFloodsTheLog) {
  const auto cfg = config(2, "max-duty = \"100%\"\nmax-backoff = 8");
  FakeClock clock;
  clock.stop_at = 60;
  clock.max_sleeps = 10'000;
  FakeProber prober(cfg, clock);
  prober.down = {1};
  MonitorState st(cfg);
  std::mutex mu;
  RunOptions o;
  std::vector<std::string> log;
  std::size_t results = 0;
  o.on_log = [&](const std::string& l) { log.push_back(l); };
  o.on_result = [&](const json&) { ++results; };
  EXPECT_EQ(run_monitor(cfg, prober, clock, st, mu, o), 3);
  EXPECT_GE(clock.t, 60.0) << "stopped by the loop guard after " << clock.sleeps << " sleeps: the loop spun";
  EXPECT_LT(clock.sleeps, 1000);
  // Attempts at the back-off times (1, 2, 4, 8, 8, ... s): about ten in a minute, not thousands.
  EXPECT_LE(prober.jobs.size(), 20u);
  EXPECT_EQ(results, prober.jobs.size());
  EXPECT_LE(log.size(), 2 * prober.jobs.size()) << log.size() << " lines for " << prober.jobs.size() << " attempts";
  EXPECT_FALSE(st.agent_up(1));
}

namespace {

// Memory the process holds, in KiB. Under ASan freed blocks wait in a quarantine of up to 256 MiB,
// so resident memory grows with any churn at all; there the runtime's count of live heap bytes is
// what "flat" means.
long rss_kib() {
#ifdef FABPERF_TEST_ASAN
  return static_cast<long>(__sanitizer_get_current_allocated_bytes() / 1024);
#else
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
#endif
}

}  // namespace

TEST(MonitorMemory, TenThousandProbesKeepRssFlat) {
  // 6 hosts, 2 links; every tenth result also renders the exposition, as a scrape would.
  std::string t = kMon + "baseline-probes = 3\n";
  for (int i = 1; i <= 6; ++i)
    t += "[[hosts]]\nname = \"h" + std::to_string(i) + "\"\naddress = \"n" + std::to_string(i) + "@10.0.0." +
         std::to_string(i) + "+10.1.0." + std::to_string(i) + "\"\n";
  const auto cfg = parse_config(t, "m.toml");
  MonitorState st(cfg);
  monitor::Schedule sched(cfg.hosts.size(), cfg.link_names.size(), 1.0, 30);
  double now = 0;
  long after_warmup = 0;
  std::size_t size_after_warmup = 0, size_at_end = 0;
  for (int i = 0; i < 10000; ++i) {
    const auto n = sched.next(now);
    now = std::max(now, n.at_s);
    JobResult r;
    r.job = n.job;
    r.wall_s = 1700000000 + now;
    for (const auto& [c, s] : n.job.pairs) {
      PairSample p;
      p.client = c;
      p.server = s;
      p.ok = i % 97 != 0;
      if (!p.ok) p.error = "connect refused";
      if (n.job.kind == ProbeKind::bandwidth) p.bytes_per_s = 100e6 * (i % 10 == 0 ? 0.5 : 1.0);
      p.p50_s = 1e-4;
      p.p99_s = 3e-4;
      p.retransmits = static_cast<std::uint64_t>(i % 5);
      r.pairs.push_back(p);
      for (const auto h : {c, s})
        r.links.push_back(
            {h, "bond0", 10000000000, 9000, 1, {{"bond0", "ens1f0", 0.5, 0.5}, {"bond0", "ens1f1", 0.5, 0.5}}});
    }
    bool changed = false;
    (void)st.apply(r, changed);
    const std::string m = i % 10 == 9 ? render_metrics(st) : std::string();
    sched.done(n.job, now, now + 1);
    now += 1;
    if (i == 999) {
      after_warmup = rss_kib();
      size_after_warmup = m.size();
    }
    if (i == 9999) size_at_end = m.size();
  }
  const long growth = rss_kib() - after_warmup;
  std::printf("RSS after 1,000 probes %ld KiB, growth over the next 9,000: %ld KiB; exposition %zu -> %zu bytes\n",
              after_warmup, growth, size_after_warmup, size_at_end);
  EXPECT_LT(growth, 1024) << "RSS grew by more than 1 MiB over 9,000 probes";
  // The exposition's size is bounded by the series count, not by the number of probes.
  EXPECT_LE(size_at_end, size_after_warmup + size_after_warmup / 10);
}

TEST(MonitorProbe, BandwidthIsWhatTheReceiverCounted) {
  // A client-to-server probe: the client wrote 2.4 MB into its socket in the 0.4 s window, the
  // server read 1.5 MB. The probe's figure is the report's pair figure, which compute_report
  // takes from the receiver: 3.75 MB/s (the monitor has no count of its own).
  std::string t = kMon;
  for (int i = 1; i <= 2; ++i) {
    t += "[[hosts]]\nname = \"h" + std::to_string(i) + "\"\naddress = \"10.0.0." + std::to_string(i) + "\"\n";
  }
  const auto cfg = parse_config(t, "m.toml");
  Job job;
  job.kind = ProbeKind::bandwidth;
  job.pairs = {{0, 1}};
  RunRecord run;
  for (std::uint32_t i = 0; i < 2; ++i) {
    NodeRecord n;
    n.index = i;
    n.name = cfg.hosts[i].hp.str();
    n.is_client = i == 0;
    n.is_server = i == 1;
    AgentResult a;
    a.node_index = i;
    a.window_s = 0.4;
    FlowResult f;
    f.role = i == 0 ? FlowRole::client : FlowRole::server;
    f.peer_node = 1 - i;
    if (i == 0) f.tx_bytes_window = f.tx_bytes_total = 2'400'000;
    if (i == 1) f.rx_bytes_window = f.rx_bytes_total = 1'500'000;
    a.flows = {f};
    n.result = a;
    run.nodes.push_back(n);
  }
  const auto r = job_result_from_report(cfg, job, compute_report(run), 1.0);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_TRUE(r.pairs[0].ok) << r.pairs[0].error;
  ASSERT_TRUE(r.pairs[0].bytes_per_s.has_value());
  EXPECT_DOUBLE_EQ(*r.pairs[0].bytes_per_s, 3.75e6);
}

namespace {

// A blocking loopback client of the /metrics listener with a 3 s receive deadline.
// A connection from a chosen loopback source address, sending nothing.
int connect_metrics_from(std::uint16_t port, const char* source) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &a.sin_addr);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}
// A client of 127.0.0.1 whose reads give up after 3 s.
int connect_metrics(std::uint16_t port) {
  const int fd = connect_metrics_from(port, "127.0.0.1");
  timeval tv{3, 0};
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Connections among fds the server still holds open (no EOF, no reset).
int still_open(const std::vector<int>& fds) {
  int n = 0;
  for (const int fd : fds) {
    char byte = 0;
    if (::recv(fd, &byte, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN) ++n;
  }
  return n;
}

// Sends one keep-alive GET and returns what came back before the deadline or a close.
std::string get_metrics(int fd) {
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) return "";
  std::string got;
  char buf[4096];
  while (got.find("fabperf_test_up 1") == std::string::npos) {
    const ssize_t k = ::recv(fd, buf, sizeof buf, 0);
    if (k <= 0) break;
    got.append(buf, static_cast<std::size_t>(k));
  }
  return got;
}

}  // namespace

// Issue 28: 32 clients that keep their connections open (kept alive after a scrape, or silent)
// locked Prometheus out of /metrics for as long as they liked. At the cap a new connection takes
// the place of the one waiting longest; the scraper gets its answer.
TEST(MetricsHttp, IdleConnectionsCannotLockTheScraperOut) {
  MetricsServer srv("127.0.0.1", 0, [] { return std::string("fabperf_test_up 1\n"); });
  std::vector<int> held;
  for (int i = 0; i < 32; ++i) {
    const int fd = connect_metrics(srv.port());
    ASSERT_GE(fd, 0);
    // Half scrape once and keep the connection, half never send a byte.
    if (i % 2 == 0) {
      EXPECT_NE(get_metrics(fd).find("200 OK"), std::string::npos) << i;
    }
    held.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // all 32 accepted and waiting
  for (int round = 0; round < 3; ++round) {
    const int fd = connect_metrics(srv.port());
    ASSERT_GE(fd, 0);
    const std::string got = get_metrics(fd);
    EXPECT_NE(got.find("200 OK"), std::string::npos) << "round " << round << ": " << got;
    EXPECT_NE(got.find("fabperf_test_up 1"), std::string::npos) << got;
    held.push_back(fd);  // the scraper keeps its connection too, as Prometheus does
  }
  for (const int fd : held) ::close(fd);
}

// One source address holds at most 8 connections: 20 silent ones from 127.0.0.2 leave 8 open,
// 8 from 127.0.0.3 are not pushed out by them, and a scraper from a third address gets through.
TEST(MetricsHttp, OneSourceHoldsAtMostEightConnections) {
  MetricsServer srv("127.0.0.1", 0, [] { return std::string("fabperf_test_up 1\n"); });
  std::vector<int> noisy, quiet;
  for (int i = 0; i < 8; ++i) quiet.push_back(connect_metrics_from(srv.port(), "127.0.0.3"));
  for (int i = 0; i < 20; ++i) noisy.push_back(connect_metrics_from(srv.port(), "127.0.0.2"));
  ASSERT_EQ(std::count(noisy.begin(), noisy.end(), -1) + std::count(quiet.begin(), quiet.end(), -1), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(still_open(noisy), 8);
  EXPECT_EQ(still_open(quiet), 8);
  const int scraper = connect_metrics_from(srv.port(), "127.0.0.4");
  ASSERT_GE(scraper, 0);
  EXPECT_NE(get_metrics(scraper).find("200 OK"), std::string::npos);
  for (const int fd : noisy) ::close(fd);
  for (const int fd : quiet) ::close(fd);
  ::close(scraper);
}
