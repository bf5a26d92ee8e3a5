#include <fabperf/core/units.hpp>
#include <fabperf/report/report.hpp>

#include <nlohmann/json.hpp>

#include "report/result_json.hpp"

namespace fabperf {

using jsonu::array_json;
using jsonu::nonneg;
using jsonu::positive;
using nlohmann::json;

// Keys: the field names.
void to_json(json& j, CounterCategory c) {
  j = to_string(c);
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(IntervalPoint, t_s, tx_mb_per_s, rx_mb_per_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CounterMove, source, name, delta, category, label)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CategoryMovers, category, total, top)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Dip, subject, t0_s, t1_s, mb_per_s, median_mb_per_s, change_pct, rose, rose_unlisted,
                                   text)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrialArmReport, name, mb_per_s, cpu_s_per_gb)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrialReport, what, chosen, reason, arms, summary)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Throughput, bytes, mb_per_s, gbit_per_s, msgs, msg_per_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LatencySummary, count, mean_us, stddev_us, min_us, p50_us, p90_us, p99_us, p999_us,
                                   max_us)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WireAudit, verdict, payload_tx_bytes, wire_tx_bytes, tx_ratio, payload_rx_bytes,
                                   wire_rx_bytes, rx_ratio, resolution_bytes)
// A connection's "tcp" object, written only when the sample is valid (null otherwise).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TcpSample, rtt_us, rttvar_us, snd_mss, rcv_mss, pmtu, snd_cwnd, total_retrans)

namespace {
// Null when not measured; the histogram's non-empty buckets when there is one.
json latency_json(const std::optional<LatencySummary>& l, const std::optional<LatencyHistogram>& h) {
  if (!l) return nullptr;
  json j = *l;
  if (h) {
    json b = json::array();
    for (int i = 0; i < LatencyHistogram::kBuckets; ++i) {
      if (h->bucket_count(i)) {
        b.push_back({{"lo_us", LatencyHistogram::bucket_lower_ns(i) / 1e3},
                     {"hi_us", LatencyHistogram::bucket_upper_ns(i) / 1e3},
                     {"count", h->bucket_count(i)}});
      }
    }
    j["buckets"] = std::move(b);
  }
  return j;
}

// Every sample of every named counter: the values at the first sample, and for each counter
// that changed its increase per interval. `categories` holds the window's sums (the KPIs read them).
json counters_json(const CounterReport& c) {
  json series = array_json(c.series, [](const CounterSeries& s) -> json {
    json first = json::object();
    for (const auto& [k, v] : s.first) first[k] = v;
    json moved = json::object();
    for (const auto& [k, d] : s.moved) moved[k] = d;
    return {{"source", s.source}, {"t_s", s.t_s}, {"first", std::move(first)}, {"moved", std::move(moved)}};
  });
  json totals = json::object();
  for (const auto cat : symptom_categories()) totals[std::string(to_string(cat))] = c.total(cat);
  return {{"series", std::move(series)}, {"dips", c.dips}, {"categories", std::move(totals)}, {"movers", c.categories}};
}

}  // namespace

// The report's types whose keys are (mostly) their fields' names; "unknown" (-1 or 0) is null.
void to_json(json& j, const LinkReport& l) {
  FABPERF_JSON_FIELDS(j, l, kind, driver, mtu, duplex, window_s, tx_mb_per_s, rx_mb_per_s, payload_tx_mb_per_s,
                      payload_rx_mb_per_s, tx_errors, rx_errors, tx_dropped, rx_dropped, vanished, min_sender_mss,
                      jumbo_mismatch, wire_audit, intervals);
  j[json_key(col::link)] = l.name;
  j["speed_mbps"] = positive(l.speed_mbps);
  j["shaped_mbps"] = nonneg(l.shaped_mbps);
  j["utilization_pct"] = nonneg(l.utilization_pct);
  j["best_goodput_mb_per_s"] = positive(l.best_goodput_mb_per_s);
  j["efficiency_pct"] = nonneg(l.efficiency_pct);
}

void to_json(json& j, const BondMemberReport& m) {
  FABPERF_JSON_FIELDS(j, m, state_open, state_close, link_failures, tx_mb_per_s, rx_mb_per_s, tx_share_pct,
                      rx_share_pct, intervals);
  j[json_key(col::member)] = m.name;
  j["speed_mbps"] = positive(m.speed_mbps);
  j["predicted_flows"] = nonneg(m.predicted_flows);
  j["predicted_tx_share_pct"] = nonneg(m.predicted_tx_share_pct);
}

void to_json(json& j, const BondFlowReport& f) {
  FABPERF_JSON_FIELDS(j, f, local, remote, tx_bytes_window);
  j["member_index"] = nonneg(f.member_index);
  j[json_key(col::member)] = f.member.empty() ? json(nullptr) : json(f.member);
}

void to_json(json& j, const BondReport& b) {
  FABPERF_JSON_FIELDS(j, b, mode, hash_policy, peers, members, tx_mb_per_s, rx_mb_per_s, tx_jain, rx_jain,
                      tx_members_used, rx_members_used, prediction, flows, notes);
  j[json_key(col::bond)] = b.name;
  j["member_speed_sum_mbps"] = positive(b.member_speed_sum_mbps);
  j["best_goodput_mb_per_s"] = positive(b.best_goodput_mb_per_s);
  j["capacity_used_pct"] = nonneg(b.capacity_used_pct);
  j["tx_max_min"] = positive(b.tx_max_min);
  j["rx_max_min"] = positive(b.rx_max_min);
  j["inventory"] = to_json(b.inventory);
}

void to_json(json& j, const PcieSlotReport& s) {
  FABPERF_JSON_FIELDS(j, s, address, link, ports, usable_gbps, tx_gbps, rx_gbps, used_pct, at_ceiling);
  j["ports_speed_mbps"] = positive(s.ports_speed_mbps);
  j["bound_by"] = s.bound_by.empty() ? json(nullptr) : json(s.bound_by);
}

json node_json(const NodeReport& n) {
  json j;
  FABPERF_JSON_FIELDS(j, n, index, hostname, role, error, aborted, window_s, tx_mb_per_s, rx_mb_per_s, cpu_busy_pct,
                      process_cpu_s, bytes_per_cpu_s, busiest_thread, busiest_thread_pct, host_limited, clock_offset_us,
                      clock_uncertainty_us, late_ms, intervals, links, bonds, trials, pcie_slots, warnings);
  j[json_key(col::node)] = n.name;
  j["status"] = to_string(n.status);
  j["window_open_unix_s"] = positive(n.window_open_unix_s);
  j["retrans_segs"] = nonneg(n.retrans_segs);
  j["latency"] = latency_json(n.latency, n.histogram);
  j["delay"] = latency_json(n.delay, n.delay_histogram);
  j["rdma_ports"] = rdma_ports_json(n.rdma_ports);
  j["counters"] = counters_json(n.counters);
  return j;
}

json pair_json(const PairReport& p) {
  json j = p.tput;
  FABPERF_JSON_FIELDS(j, p, client, server, measured_by, connections, retrans, rtt_us, snd_mss, sender_bytes);
  return j;
}

json connection_json(const ConnReport& c) {
  json j;
  FABPERF_JSON_FIELDS(j, c, node, peer, local, remote, tx_bytes_window, tx_delivered_window, rx_bytes_window,
                      tx_bytes_total, rx_bytes_total, mb_per_s, retrans, error);
  j["role"] = to_string(c.role);
  j["op"] = to_string(c.op);
  j["tcp"] = c.tcp.valid ? json(c.tcp) : json(nullptr);
  return j;
}

json result_header_json(const Report& r) {
  json j{{"schema", kResultSchema}, {"schema_version", kResultSchemaVersion}, {"settings", to_json(r.spec)}};
  FABPERF_JSON_FIELDS(j, r, fabperf_version, test_id, started_at, clients, servers);
  return j;
}

json result_summary_json(const Report& r) {
  json j;
  FABPERF_JSON_FIELDS(j, r, complete, interrupted, cli_cpu_pct, srv_cpu_pct, max_clock_uncertainty_us, findings,
                      counter_movers);
  j["aggregate"] = r.aggregate;
  j["aggregate"]["window_s"] = r.window_s;
  j["latency"] = latency_json(r.latency, r.histogram);
  j["delay"] = latency_json(r.delay, r.delay_histogram);
  j["verify"] = r.spec.verify() ? json{{"errors", r.verify_errors}} : json(nullptr);
  j["summary"] = render_summary_line(r);
  if (!r.socksize_basis.empty()) j["socksize_auto"] = {{"socksize", r.spec.socksize()}, {"basis", r.socksize_basis}};
  return j;
}

json render_json(const Report& r) {
  json doc = result_header_json(r);
  doc.update(result_summary_json(r));
  doc["nodes"] = array_json(r.nodes, node_json);
  doc["pairs"] = array_json(r.pairs, pair_json);
  doc["connections"] = array_json(r.connections, connection_json);
  return doc;
}

}  // namespace fabperf
