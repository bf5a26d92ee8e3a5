#include <fabperf/core/build_config.hpp>
#include <fabperf/core/stats.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/sysinfo/links.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <map>

namespace fabperf {

std::string_view to_string(NodeStatus s) {
  static constexpr std::array<std::string_view, 4> kNames{"ok", "lost", "stalled", "failed"};  // in the enum's order
  return kNames.at(static_cast<std::size_t>(s));
}

CounterWindow counter_window(const LinkResult& l) {
  CounterWindow w;
  for (const auto& s : l.samples) {
    if (s.counters.present) w.ok.push_back(&s);
  }
  if (w.ok.size() < 2) return w;
  w.window_s = static_cast<double>(w.ok.back()->t_ns - w.ok.front()->t_ns) / 1e9;
  w.tx_bytes = w.ok.back()->counters.tx_bytes - w.ok.front()->counters.tx_bytes;
  w.rx_bytes = w.ok.back()->counters.rx_bytes - w.ok.front()->counters.rx_bytes;
  for (std::size_t i = 1; i < w.ok.size(); ++i) {
    const LinkSample& a = *w.ok[i - 1];
    const LinkSample& b = *w.ok[i];
    const double dt = static_cast<double>(b.t_ns - a.t_ns) / 1e9;
    w.intervals.push_back({static_cast<double>(b.t_ns) / 1e9, mb_per_s(b.counters.tx_bytes - a.counters.tx_bytes, dt),
                           mb_per_s(b.counters.rx_bytes - a.counters.rx_bytes, dt)});
  }
  return w;
}

namespace {

// A flow's bytes that arrived inside the window: its reads plus what its receive queue gained.
std::uint64_t arrived(const FlowResult& f) {
  return static_cast<std::uint64_t>(
      std::max<std::int64_t>(0, static_cast<std::int64_t>(f.rx_bytes_window) + f.rx_queued_delta));
}

// The histogram's figures and its non-empty buckets.
ResultLatency summarize(const LatencyHistogram& h) {
  ResultLatency l{{h.count(), h.mean_ns() / 1e3, h.stddev_ns() / 1e3, static_cast<double>(h.min_ns()) / 1e3,
                   h.percentile_ns(50) / 1e3, h.percentile_ns(90) / 1e3, h.percentile_ns(99) / 1e3,
                   h.percentile_ns(99.9) / 1e3, static_cast<double>(h.max_ns()) / 1e3},
                  {}};
  for (int i = 0; i < LatencyHistogram::kBuckets; ++i) {
    if (h.bucket_count(i)) {
      l.buckets.push_back(
          {LatencyHistogram::bucket_lower_ns(i) / 1e3, LatencyHistogram::bucket_upper_ns(i) / 1e3, h.bucket_count(i)});
    }
  }
  return l;
}

TrialReport trial_report(const TrialResult& t) {
  TrialReport r{t.what, t.chosen, t.reason, {}, {}};
  std::string arms;
  for (const auto& a : t.arms) {
    TrialArmReport ar{a.name, a.seconds > 0 ? static_cast<double>(a.bytes) / a.seconds / 1e6 : 0.0,
                      a.bytes > 0 ? a.cpu_s / (static_cast<double>(a.bytes) / 1e9) : 0.0};
    arms += fmt::format("{}{} {:.0f} MB/s ({:.2f} CPU-s/GB)", arms.empty() ? "" : ", ", ar.name, ar.mb_per_s,
                        ar.cpu_s_per_gb);
    r.arms.push_back(std::move(ar));
  }
  r.summary = arms.empty() ? fmt::format("{} {}: {}", t.what, t.chosen, t.reason)
                           : fmt::format("{} {}: tried in the warm-up, {}: {}", t.what, t.chosen, arms, t.reason);
  return r;
}

constexpr const char* kPayloadAboveWire = "payload above wire";

// The payload on a link against its interface counters over the same window. Both are rates
// over their own window (the flows' snapshot and the counters' reads are microseconds to
// milliseconds apart); the resolution is what those edges, whole-segment counting and the
// bytes between interface and socket can move either way (docs/methodology.md).
WireAudit wire_audit(const LinkResult& l, const CounterWindow& cw, std::uint64_t ptx, std::uint64_t prx,
                     std::uint64_t flows, std::uint32_t max_rtt_us, double window_s) {
  WireAudit au;
  au.payload_tx_bytes = ptx;
  au.payload_rx_bytes = prx;
  const auto& ok = cw.ok;
  if (l.vanished) {
    au.verdict = "vanished";
  } else if (ok.size() < 2 || window_s <= 0 || cw.window_s <= 0) {
    au.verdict = "no counters";
  }
  if (!au.verdict.empty()) return au;
  au.wire_tx_bytes = cw.tx_bytes;
  au.wire_rx_bytes = cw.rx_bytes;
  // Rates over each one's window, compared as bytes over the flows' window.
  const double scale = window_s / cw.window_s;
  const double wtx = static_cast<double>(au.wire_tx_bytes) * scale;
  const double wrx = static_cast<double>(au.wire_rx_bytes) * scale;
  const double skew_s = std::abs(static_cast<double>(ok.front()->t_ns) / 1e9) +
                        std::abs(static_cast<double>(ok.back()->t_ns) / 1e9 - window_s);
  const double wire_rate = std::max(wtx, wrx) / window_s;
  // Data in flight at an edge (sent before the window, acknowledged or read inside it, or the
  // reverse) is up to one round trip at the link's rate: a 50 ms shaper queue at 100 Mbit/s is
  // 0.6 MB, 5% of a 1 s window (seen: an rw test's acknowledged tx 5.6% above its wire). The
  // round trip is the largest the senders' own estimators allow (see link_report).
  const double rtt_s = static_cast<double>(max_rtt_us) / 1e6;
  au.resolution_bytes =
      static_cast<std::uint64_t>(std::llround(wire_rate * (skew_s + rtt_s) + 0.01 * std::max(wtx, wrx))) +
      flows * 65536;
  if (wtx > 0) au.tx_ratio = static_cast<double>(ptx) / wtx;
  if (wrx > 0) au.rx_ratio = static_cast<double>(prx) / wrx;
  const auto res = static_cast<double>(au.resolution_bytes);
  const bool over = static_cast<double>(ptx) > wtx + res || static_cast<double>(prx) > wrx + res;
  au.verdict = over ? kPayloadAboveWire : "ok";
  return au;
}

LinkReport link_report(const LinkResult& l, const AgentResult& a, const std::string& node,
                       std::vector<std::string>& findings) {
  LinkReport lr;
  lr.name = l.info.name;
  lr.kind = l.info.kind;
  lr.driver = l.info.driver;
  lr.mtu = l.info.mtu;
  lr.speed_mbps = l.info.speed_mbps;
  lr.shaped_mbps = l.info.shaped_mbps;
  lr.duplex = l.info.duplex;
  lr.vanished = l.vanished;
  const CounterWindow cw = counter_window(l);
  if (l.vanished) {
    findings.push_back(
        fmt::format("link {} on {} disappeared during the test: figures cover the {} samples taken before", l.info.name,
                    node, cw.ok.size()));
  }
  lr.window_s = cw.window_s;
  lr.tx_mb_per_s = mb_per_s(cw.tx_bytes, cw.window_s);
  lr.rx_mb_per_s = mb_per_s(cw.rx_bytes, cw.window_s);
  lr.intervals = cw.intervals;
  if (cw.ok.size() >= 2) {
    const auto& c0 = cw.ok.front()->counters;
    const auto& c1 = cw.ok.back()->counters;
    lr.tx_errors = c1.tx_errors - c0.tx_errors;
    lr.rx_errors = c1.rx_errors - c0.rx_errors;
    lr.tx_dropped = c1.tx_dropped - c0.tx_dropped;
    lr.rx_dropped = c1.rx_dropped - c0.rx_dropped;
  }
  std::uint64_t ptx = 0, prx = 0, got = 0, flows = 0;
  std::uint32_t max_rtt_us = 0;
  for (const auto& f : a.flows) {
    if (f.iface != l.info.name) continue;
    ptx += f.tx_delivered_window;
    prx += f.rx_bytes_window;
    got += arrived(f);
    ++flows;
    // The round trip at the window's open is not in the result, only the one at its close, and a
    // shaper's queue swings it: the largest the sender's own estimator allows (RFC 6298's
    // srtt + 4 rttvar) bounds both. Seen with srtt alone: an rw rpc test at 100 Mbit/s on a loaded
    // host, acknowledged tx 3.3% above the wire over 1 s, 0.4 MB (32 ms of the link) beyond.
    if (f.tcp.valid) max_rtt_us = std::max(max_rtt_us, f.tcp.rtt_us + 4 * f.tcp.rttvar_us);
    // The MSS this node sends with, on connections where it is the main sender.
    if (f.tcp.valid && f.tx_bytes_window > f.rx_bytes_window && f.tcp.snd_mss > 0) {
      lr.min_sender_mss = lr.min_sender_mss == 0 ? f.tcp.snd_mss : std::min(lr.min_sender_mss, f.tcp.snd_mss);
    }
  }
  const double w = a.window_s > 0 ? a.window_s : lr.window_s;
  lr.payload_tx_mb_per_s = mb_per_s(ptx, w);
  lr.payload_rx_mb_per_s = mb_per_s(prx, w);
  // The audit's rx side is what arrived (read + the receive queues' change): a reader starved of
  // CPU at a window's edge moves bytes between windows without moving them off the wire.
  lr.wire_audit = wire_audit(l, cw, ptx, got, flows, max_rtt_us, w);
  if (lr.wire_audit.verdict == kPayloadAboveWire) {
    const WireAudit& au = lr.wire_audit;
    findings.push_back(
        fmt::format("wire audit failed on {} {}: fabperf counted more payload than the interface carried (tx {} vs {} "
                    "bytes, rx {} vs {} bytes; resolution {} bytes): its figures for this link are wrong",
                    node, lr.name, au.payload_tx_bytes, au.wire_tx_bytes, au.payload_rx_bytes, au.wire_rx_bytes,
                    au.resolution_bytes));
  }
  if (lr.speed_mbps > 0) {
    const double wire = std::max(lr.tx_mb_per_s, lr.rx_mb_per_s);
    lr.utilization_pct = 100.0 * wire * 8.0 / static_cast<double>(lr.speed_mbps);
    lr.best_goodput_mb_per_s = best_tcp_goodput_mb_per_s(lr.speed_mbps, lr.mtu);
    if (lr.best_goodput_mb_per_s > 0) {
      lr.efficiency_pct = 100.0 * std::max(lr.payload_tx_mb_per_s, lr.payload_rx_mb_per_s) / lr.best_goodput_mb_per_s;
    }
  }
  // Jumbo frames checked, not assumed: the interface says MTU > 1500 but the connection's
  // segments are 1500-class, so the peer or a switch port in between runs a smaller MTU.
  if (lr.kind != "loopback" && lr.mtu > 1500 && lr.min_sender_mss > 0 &&
      static_cast<double>(lr.min_sender_mss) < 0.9 * expected_mss(lr.mtu)) {
    lr.jumbo_mismatch = true;
    findings.push_back(fmt::format(
        "jumbo frames not in use on {} {}: MTU {} allows MSS {}, but connections send with MSS {} (the peer's or a "
        "switch port's MTU is smaller)",
        node, lr.name, lr.mtu, expected_mss(lr.mtu), lr.min_sender_mss));
  }
  if (lr.tx_errors + lr.rx_errors + lr.tx_dropped + lr.rx_dropped > 0) {
    findings.push_back(fmt::format("link {} on {}: {} tx / {} rx errors, {} tx / {} rx drops during the window",
                                   lr.name, node, lr.tx_errors, lr.rx_errors, lr.tx_dropped, lr.rx_dropped));
  }
  return lr;
}

// Per pair, each end's counts: what it read (rx), what its peer acknowledged (delivered) and
// what it wrote (sent).
struct PairEnd {
  std::uint64_t rx{0}, delivered{0}, sent{0}, msgs{0};
  std::uint32_t conns{0};
  double window{0};
  bool reported{false};
};
struct PairAcc {
  PairEnd client, server;
  PairReport report;  // the client's connections' retransmits, largest rtt and smallest MSS
};

// What finish() needs of each node, kept in the order the caller gave so that sums of doubles,
// merged histograms and findings come out the same whatever order results arrived in.
struct NodeAcc {
  std::size_t order{0};
  NodeReport report;
  std::vector<std::string> findings;
  std::optional<double> cli_cpu, srv_cpu;
};
using PairMap = std::map<std::pair<std::uint32_t, std::uint32_t>, PairAcc>;

// One flow's connection row, with the findings its counts raise.
ConnReport conn_report(const FlowResult& f, const NodeRecord& n, double window_s, std::vector<std::string>& findings) {
  if (f.verify_errors > 0) {
    findings.push_back(
        fmt::format("data verification failed on {} ({} -> {}): {} received chunks differed from what was sent", n.name,
                    f.local, f.remote, f.verify_errors));
  }
  if (!f.error.empty()) {
    findings.push_back(fmt::format("connection {} -> {} on {}: {}", f.local, f.remote, n.name, f.error));
  }
  return {f, n.index, f.peer_node, mb_per_s(f.tx_delivered_window + arrived(f), window_s)};
}

// A data flow's counts into its pair's end, keyed (client, server) whichever end reported it.
void add_to_pair(PairMap& pairs, const FlowResult& f, std::uint32_t node, double window_s, bool stream) {
  const bool client = f.role == FlowRole::client;
  auto& p = pairs[client ? std::make_pair(node, f.peer_node) : std::make_pair(f.peer_node, node)];
  PairEnd& e = client ? p.client : p.server;
  e.reported = true;
  // What arrived, not what was read: a reader starved at an edge reads inside the window bytes
  // that crossed the wire before it (CI: 15.85 MB/s over 1 s on a link that carries 12.41).
  e.rx += arrived(f);
  e.delivered += f.tx_delivered_window;
  e.sent += f.tx_bytes_window;
  e.msgs += stream ? 0 : f.msgs_window;
  e.window = window_s;
  ++e.conns;
  if (client) {
    p.report.retrans += f.retrans_window;
    if (f.tcp.valid) {
      p.report.rtt_us = std::max(p.report.rtt_us, f.tcp.rtt_us);
      p.report.snd_mss = p.report.snd_mss == 0 ? f.tcp.snd_mss : std::min(p.report.snd_mss, f.tcp.snd_mss);
    }
  }
}

// The busiest fabperf thread's share of a CPU: past kHostLimitedPct the host, not the fabric,
// may be what limited the node.
void busiest_thread(NodeReport& nr, const AgentResult& a, const std::string& node, std::vector<std::string>& findings) {
  for (const auto& t : a.threads) {
    const double pct = nr.window_s > 0 ? 100.0 * t.cpu_s / nr.window_s : 0.0;
    if (pct > nr.busiest_thread_pct) {
      nr.busiest_thread_pct = pct;
      nr.busiest_thread = t.label;
    }
  }
  if (nr.busiest_thread_pct >= kHostLimitedPct) {
    nr.host_limited = true;
    findings.push_back(
        fmt::format("host-limited: fabperf thread {} at {:.0f}% CPU on {}: this node's CPU, not the "
                    "fabric, may limit its figures",
                    nr.busiest_thread, nr.busiest_thread_pct, node));
  }
}

// The node's bonds and the flows on them, all explain_alb_receive reads: the rest of a large
// result is not kept until finish().
NodeRecord bond_record(const NodeRecord& n, const AgentResult& a) {
  NodeRecord lite;
  lite.index = n.index;
  lite.name = n.name;
  lite.result.emplace().bonds = a.bonds;
  for (const auto& f : a.flows) {
    if (std::any_of(a.bonds.begin(), a.bonds.end(), [&](const BondResult& b) { return b.at_open.name == f.iface; }))
      lite.result->flows.push_back(f);
  }
  return lite;
}

// A driver that ran late measured a window its peers' flows did not fill: its own flows went out
// after the window opened (beyond the warm-up), or it read the edges after the peers had stopped
// (beyond the cool-down). Past half the window the finding says the figures have no basis (a
// finding, not a failed run: under ThreadSanitizer in CI a fresh agent's first test ran 0.7 s late).
void schedule_check(NodeReport& nr, const AgentResult& a, const TestSpec& spec, std::vector<std::string>& findings) {
  nr.late_ms = static_cast<double>(std::max(a.start_late_ns, a.close_late_ns)) / 1e6;
  const auto uncovered = std::max<std::int64_t>(0, a.start_late_ns - spec.warmup().count()) +
                         std::max<std::int64_t>(0, a.close_late_ns - spec.cooldown().count());
  const auto window = spec.window().count();
  if (uncovered * 100 <= window) return;
  const bool no_basis = uncovered * 2 > window;
  findings.push_back(fmt::format(
      "node {} kept the test's schedule {:.0f} ms late (its host did not run fabperf on time): {:.0f}% of the "
      "window is not covered by the flows{}",
      nr.name, nr.late_ms, 100.0 * static_cast<double>(std::min(uncovered, window)) / static_cast<double>(window),
      no_basis ? ", so this test's figures have no basis: run it again" : ""));
}

}  // namespace

struct ReportBuilder::State {
  Report r;
  // Bonded nodes' raw bonds and bond flows only: the balance-alb receive notes need every peer's
  // ARP table (explain_alb_receive), and a result without bonds holds none.
  std::vector<NodeRecord> bonded;
  bool stream{true};
  double nominal_window{0};
  std::uint64_t buffsize{1};
  PairMap pairs;
  std::vector<NodeAcc> nodes;
};

ReportBuilder::ReportBuilder(const RunRecord& run) : s_(std::make_unique<State>()) {
  Report& r = s_->r;
  r.fabperf_version = FABPERF_VERSION;
  r.test_id = run.test_id;
  r.started_at = run.started_at;
  r.socksize_basis = run.socksize_basis;
  r.spec = run.spec;
  r.interrupted = run.interrupted;
  for (const auto& n : run.nodes) {
    r.servers += n.is_server ? 1 : 0;
    r.clients += n.is_client ? 1 : 0;
  }
  s_->stream = run.spec.mode() == Mode::stream;
  s_->nominal_window = static_cast<double>(run.spec.window().count()) / 1e9;
  s_->buffsize = run.spec.buffsize();
}

ReportBuilder::~ReportBuilder() = default;

const Report& ReportBuilder::header() const {
  return s_->r;
}

const NodeReport& ReportBuilder::add(const NodeRecord& n, std::size_t order, std::vector<ConnReport>& conns) {
  Report& r = s_->r;
  NodeAcc acc;
  acc.order = order;
  std::vector<std::string>& findings = acc.findings;
  NodeReport& nr = acc.report;
  nr.index = n.index;
  nr.name = n.name;
  nr.hostname = n.hostname;
  nr.role = n.is_server && n.is_client ? "server+client" : n.is_server ? "server" : "client";
  nr.status = n.status;
  nr.error = n.error;
  nr.clock_offset_us = static_cast<double>(n.clock.offset_ns) / 1e3;
  nr.clock_uncertainty_us = static_cast<double>(n.clock.uncertainty_ns) / 1e3;
  r.max_clock_uncertainty_us = std::max(r.max_clock_uncertainty_us, nr.clock_uncertainty_us);
  nr.warnings = n.setup_warnings;
  nr.counters.emplace();  // a node without a result sampled none
  if (n.status != NodeStatus::ok) {
    r.complete = false;
    findings.push_back(fmt::format("node {} {}: {} (its own counters are missing from this report)", n.name,
                                   to_string(n.status), n.error));
  }
  if (n.result) {
    const AgentResult& a = *n.result;
    nr.aborted = a.aborted;
    if (a.aborted) {
      r.complete = false;
      findings.push_back(fmt::format("node {} stopped early: {}", n.name, a.abort_reason));
    }
    nr.window_s = a.window_s > 0 ? a.window_s : s_->nominal_window;
    schedule_check(nr, a, r.spec, findings);
    nr.window_open_unix_s = static_cast<double>(a.window_open_unix_ns) / 1e9;
    nr.cpu_busy_pct = a.cpu_busy_pct;
    nr.retrans_segs = a.retrans_segs;
    nr.process_cpu_s = a.process_cpu_s;
    std::uint64_t tx = 0, rx = 0;
    for (const auto& f : a.flows) {
      tx += f.tx_delivered_window;
      rx += f.rx_bytes_window;
      conns.push_back(conn_report(f, n, nr.window_s, findings));
      r.verify_errors += f.verify_errors;
      // Probes carry pings only: no data, not one of the pair's connections.
      if (f.op != FlowOp::probe) add_to_pair(s_->pairs, f, n.index, nr.window_s, s_->stream);
    }
    nr.tx_mb_per_s = mb_per_s(tx, nr.window_s);
    nr.rx_mb_per_s = mb_per_s(rx, nr.window_s);
    if (a.process_cpu_s > 0) nr.bytes_per_cpu_s = static_cast<double>(tx + rx) / a.process_cpu_s;
    busiest_thread(nr, a, n.name, findings);
    if (n.is_client) acc.cli_cpu = a.cpu_busy_pct;
    if (n.is_server) acc.srv_cpu = a.cpu_busy_pct;
    if (a.delay && a.delay->count() > 0) {
      nr.delay = summarize(*a.delay);
      nr.delay_histogram = std::make_shared<const LatencyHistogram>(*a.delay);
    }
    if (a.latency) {
      nr.latency = summarize(*a.latency);
      nr.histogram = std::make_shared<const LatencyHistogram>(*a.latency);
    }
    std::int64_t prev_t = 0;
    for (const auto& sm : a.intervals) {
      const double dt = static_cast<double>(sm.t_ns - prev_t) / 1e9;
      prev_t = sm.t_ns;
      nr.intervals.push_back(
          {static_cast<double>(sm.t_ns) / 1e9, mb_per_s(sm.tx_bytes, dt), mb_per_s(sm.rx_bytes, dt)});
    }
    for (const auto& l : a.links) nr.links.push_back(link_report(l, a, n.name, findings));
    nr.pcie_slots = pcie_slot_reports(a, nr.links, nr, findings);
    for (const auto& b : a.bonds) nr.bonds.push_back(bond_report(b, a, n.name, findings));
    for (const auto& p : a.rdma_ports) nr.rdma_ports.push_back(rdma_port_report(p, a, s_->buffsize, n.name, findings));
    if (!a.bonds.empty()) s_->bonded.push_back(bond_record(n, a));
    for (const auto& t : a.trials) nr.trials.push_back(trial_report(t));
    nr.counters = counter_report(a);
    for (const auto& w : a.warnings) {
      if (std::find(nr.warnings.begin(), nr.warnings.end(), w) == nr.warnings.end()) nr.warnings.push_back(w);
    }
  }
  for (const auto& w : nr.warnings) findings.push_back(fmt::format("node {}: {}", n.name, w));
  s_->nodes.push_back(std::move(acc));
  return s_->nodes.back().report;
}

std::string node_name(const Report& r, std::uint32_t index) {
  const auto it = std::ranges::find(r.nodes, index, &NodeReport::index);
  return it != r.nodes.end() ? it->name : fmt::format("node{}", index);
}

Report ReportBuilder::finish(bool interrupted) && {
  Report r = std::move(s_->r);
  r.interrupted = r.interrupted || interrupted;
  const bool stream = s_->stream;
  std::ranges::stable_sort(s_->nodes, {}, &NodeAcc::order);
  std::vector<double> cli_cpu, srv_cpu;
  // Every node's histogram merged; none when no node has one.
  std::optional<LatencyHistogram> all_delay, all_latency;
  const auto merge = [](std::optional<LatencyHistogram>& all, const std::shared_ptr<const LatencyHistogram>& h) {
    if (!h) return;
    if (!all) all.emplace();
    all->merge(*h);
  };
  for (auto& n : s_->nodes) {
    if (n.cli_cpu) cli_cpu.push_back(*n.cli_cpu);
    if (n.srv_cpu) srv_cpu.push_back(*n.srv_cpu);
    merge(all_delay, n.report.delay_histogram);
    merge(all_latency, n.report.histogram);
    for (auto& f : n.findings) r.findings.push_back(std::move(f));
    r.nodes.push_back(std::move(n.report));
  }
  if (all_delay) r.delay_histogram = std::make_shared<const LatencyHistogram>(*all_delay);
  if (all_latency) r.histogram = std::make_shared<const LatencyHistogram>(*all_latency);
  s_->nodes.clear();

  // Each pair's rate uses its own node's measured window; the aggregate is their sum.
  for (const auto& [key, p] : s_->pairs) {
    PairReport pr = p.report;
    pr.client = key.first;
    pr.server = key.second;
    pr.sender_bytes = p.client.sent + p.server.sent;
    // Each direction as its receiver read it, over the receiver's window; when one end's result
    // was lost, the other end's reads and what its peer acknowledged.
    const PairEnd& any = p.client.reported ? p.client : p.server;
    std::uint64_t bytes = 0;
    double rate = 0;
    if (p.client.reported && p.server.reported) {
      pr.measured_by = "receivers";
      bytes = p.client.rx + p.server.rx;
      rate = mb_per_s(p.client.rx, p.client.window) + mb_per_s(p.server.rx, p.server.window);
    } else {
      pr.measured_by = p.client.reported ? "client" : "server";
      bytes = any.rx + any.delivered;
      rate = mb_per_s(bytes, any.window);
    }
    pr.connections = any.conns;
    const std::uint64_t msgs = stream ? bytes / s_->buffsize : any.msgs;
    pr.tput = {bytes, rate, rate * 8.0 / 1e3, msgs, any.window > 0 ? static_cast<double>(msgs) / any.window : 0.0};
    if (bytes == 0 && any.window > 0) {
      // Said, not left to read as a dead link: a starved host (a loaded 2-core machine once gave
      // a 1 s plan step's pair 0 MB/s) and a stalled flow look the same in the figure.
      r.findings.push_back(
          fmt::format("pair {} -> {}: no byte arrived inside the {:.2f} s window (starved data "
                      "threads or stalled connections): this figure is not the fabric's",
                      node_name(r, pr.client), node_name(r, pr.server), any.window));
    }
    r.aggregate.bytes += pr.tput.bytes;
    r.aggregate.msgs += pr.tput.msgs;
    r.aggregate.mb_per_s += pr.tput.mb_per_s;
    r.aggregate.msg_per_s += pr.tput.msg_per_s;
    r.pairs.push_back(std::move(pr));
  }
  s_->pairs.clear();
  r.aggregate.gbit_per_s = r.aggregate.mb_per_s * 8.0 / 1e3;
  r.window_s = s_->nominal_window;
  r.cli_cpu_pct = stats::mean(cli_cpu);
  r.srv_cpu_pct = stats::mean(srv_cpu);
  if (r.histogram) r.latency = summarize(*r.histogram);
  if (r.delay_histogram) r.delay = summarize(*r.delay_histogram);
  {
    std::vector<std::pair<std::string, const CounterReport*>> reps;
    for (const auto& n : r.nodes) reps.emplace_back(n.name, &*n.counters);
    r.counter_movers = top_movers(reps);
  }
  explain_alb_receive(s_->bonded, r);
  s_->bonded.clear();
  if (r.interrupted)
    r.findings.insert(r.findings.begin(), "test interrupted by the user: results cover the time measured");
  return r;
}

Report compute_report(const RunRecord& run) {
  ReportBuilder b(run);
  std::vector<ConnReport> conns;
  for (std::size_t i = 0; i < run.nodes.size(); ++i) b.add(run.nodes[i], i, conns);
  Report r = std::move(b).finish(run.interrupted);
  r.connections = std::move(conns);
  return r;
}

}  // namespace fabperf
