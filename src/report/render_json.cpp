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

json links_json(const std::vector<LinkReport>& links) {
  return array_json(links, [](const LinkReport& l) -> json {
    return {{json_key(col::link), l.name},
            {json_key(col::kind), l.kind},
            {"driver", l.driver},
            {json_key(col::mtu), l.mtu},
            {json_key(col::speed_mbps), positive(l.speed_mbps)},
            {json_key(col::shaped_mbps), nonneg(l.shaped_mbps)},
            {"duplex", l.duplex},
            {"window_s", l.window_s},
            {json_key(col::tx_mb_per_s), l.tx_mb_per_s},
            {json_key(col::rx_mb_per_s), l.rx_mb_per_s},
            {"payload_tx_mb_per_s", l.payload_tx_mb_per_s},
            {"payload_rx_mb_per_s", l.payload_rx_mb_per_s},
            {json_key(col::utilization_pct), nonneg(l.utilization_pct)},
            {json_key(col::best_goodput_mb_per_s), positive(l.best_goodput_mb_per_s)},
            {json_key(col::efficiency_pct), nonneg(l.efficiency_pct)},
            {"tx_errors", l.tx_errors},
            {"rx_errors", l.rx_errors},
            {"tx_dropped", l.tx_dropped},
            {"rx_dropped", l.rx_dropped},
            {"vanished", l.vanished},
            {"min_sender_mss", l.min_sender_mss},
            {"jumbo_mismatch", l.jumbo_mismatch},
            {"wire_audit", l.wire_audit},
            {"intervals", l.intervals}};
  });
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

json pcie_slots_json(const std::vector<PcieSlotReport>& slots) {
  return array_json(slots, [](const PcieSlotReport& s) -> json {
    return {{"address", s.address},
            {"link", s.link},
            {"ports", s.ports},
            {"ports_speed_mbps", positive(s.ports_speed_mbps)},
            {"usable_gbps", s.usable_gbps},
            {"tx_gbps", s.tx_gbps},
            {"rx_gbps", s.rx_gbps},
            {"used_pct", s.used_pct},
            {"at_ceiling", s.at_ceiling},
            {"bound_by", s.bound_by.empty() ? json(nullptr) : json(s.bound_by)}};
  });
}
}  // namespace

json bonds_json(const std::vector<BondReport>& bonds) {
  return array_json(bonds, [](const BondReport& b) -> json {
    json members = array_json(b.members, [](const BondMemberReport& m) -> json {
      return {{json_key(col::member), m.name},
              {json_key(col::speed_mbps), positive(m.speed_mbps)},
              {"state_open", m.state_open},
              {"state_close", m.state_close},
              {json_key(col::link_failures), m.link_failures},
              {json_key(col::tx_mb_per_s), m.tx_mb_per_s},
              {json_key(col::rx_mb_per_s), m.rx_mb_per_s},
              {json_key(col::tx_share_pct), m.tx_share_pct},
              {json_key(col::rx_share_pct), m.rx_share_pct},
              {json_key(col::predicted_flows), nonneg(m.predicted_flows)},
              {json_key(col::predicted_tx_share_pct), nonneg(m.predicted_tx_share_pct)},
              {"intervals", m.intervals}};
    });
    json flows = array_json(b.flows, [](const BondFlowReport& f) -> json {
      return {{"local", f.local},
              {"remote", f.remote},
              {"tx_bytes_window", f.tx_bytes_window},
              {"member_index", nonneg(f.member_index)},
              {json_key(col::member), f.member.empty() ? json(nullptr) : json(f.member)}};
    });
    return {{json_key(col::bond), b.name},
            {"mode", b.mode},
            {"hash_policy", b.hash_policy},
            {"peers", b.peers},
            {"members", std::move(members)},
            {json_key(col::tx_mb_per_s), b.tx_mb_per_s},
            {json_key(col::rx_mb_per_s), b.rx_mb_per_s},
            {"member_speed_sum_mbps", positive(b.member_speed_sum_mbps)},
            {json_key(col::best_goodput_mb_per_s), positive(b.best_goodput_mb_per_s)},
            {"capacity_used_pct", nonneg(b.capacity_used_pct)},
            {"tx_jain", b.tx_jain},
            {"rx_jain", b.rx_jain},
            {"tx_members_used", b.tx_members_used},
            {"rx_members_used", b.rx_members_used},
            {"tx_max_min", positive(b.tx_max_min)},
            {"rx_max_min", positive(b.rx_max_min)},
            {"prediction", b.prediction},
            {"flows", std::move(flows)},
            {"notes", b.notes},
            {"inventory", to_json(b.inventory)}};
  });
}

json node_json(const NodeReport& n) {
  return {{"index", n.index},
          {json_key(col::node), n.name},
          {"hostname", n.hostname},
          {json_key(col::role), n.role},
          {json_key(col::status), to_string(n.status)},
          {"error", n.error},
          {"aborted", n.aborted},
          {"window_s", n.window_s},
          {"window_open_unix_s", positive(n.window_open_unix_s)},
          {json_key(col::tx_mb_per_s), n.tx_mb_per_s},
          {json_key(col::rx_mb_per_s), n.rx_mb_per_s},
          {json_key(col::cpu_busy_pct), n.cpu_busy_pct},
          {json_key(col::retrans_segs), nonneg(n.retrans_segs)},
          {"process_cpu_s", n.process_cpu_s},
          {"bytes_per_cpu_s", n.bytes_per_cpu_s},
          {"busiest_thread", n.busiest_thread},
          {"busiest_thread_pct", n.busiest_thread_pct},
          {"host_limited", n.host_limited},
          {json_key(col::clock_offset_us), n.clock_offset_us},
          {json_key(col::clock_uncertainty_us), n.clock_uncertainty_us},
          {"late_ms", n.late_ms},
          {"latency", latency_json(n.latency, n.histogram)},
          {"delay", latency_json(n.delay, n.delay_histogram)},
          {"intervals", n.intervals},
          {"links", links_json(n.links)},
          {"bonds", bonds_json(n.bonds)},
          {"rdma_ports", rdma_ports_json(n.rdma_ports)},
          {"trials", n.trials},
          {"pcie_slots", pcie_slots_json(n.pcie_slots)},
          {"warnings", n.warnings},
          {"counters", counters_json(n.counters)}};
}

json pair_json(const PairReport& p) {
  json j = p.tput;
  j["client"] = p.client;
  j["server"] = p.server;
  j["measured_by"] = p.measured_by;
  j["connections"] = p.connections;
  j[json_key(col::retrans)] = p.retrans;
  j[json_key(col::rtt_us)] = p.rtt_us;
  j[json_key(col::snd_mss)] = p.snd_mss;
  j["sender_bytes"] = p.sender_bytes;
  return j;
}

json connection_json(const ConnReport& c) {
  return {{json_key(col::node), c.node},
          {"peer", c.peer},
          {json_key(col::role), to_string(c.role)},
          {"op", to_string(c.op)},
          {"local", c.local},
          {"remote", c.remote},
          {"tx_bytes_window", c.tx_bytes_window},
          {"tx_delivered_window", c.tx_delivered_window},
          {"rx_bytes_window", c.rx_bytes_window},
          {"tx_bytes_total", c.tx_bytes_total},
          {"rx_bytes_total", c.rx_bytes_total},
          {json_key(col::mb_per_s), c.mb_per_s},
          {json_key(col::retrans), c.retrans},
          {"tcp", c.tcp.valid ? json(c.tcp) : json(nullptr)},
          {"error", c.error}};
}

json result_header_json(const Report& r) {
  return {{"schema", kResultSchema},
          {"schema_version", kResultSchemaVersion},
          {"fabperf_version", r.fabperf_version},
          {"test_id", r.test_id},
          {"started_at", r.started_at},
          {"settings", to_json(r.spec)},
          {"clients", r.clients},
          {"servers", r.servers}};
}

json result_summary_json(const Report& r) {
  json agg = r.aggregate;
  agg["window_s"] = r.window_s;
  json doc{{"complete", r.complete},
           {"interrupted", r.interrupted},
           {"aggregate", std::move(agg)},
           {"cli_cpu_pct", r.cli_cpu_pct},
           {"srv_cpu_pct", r.srv_cpu_pct},
           {"max_clock_uncertainty_us", r.max_clock_uncertainty_us},
           {"latency", latency_json(r.latency, r.histogram)},
           {"delay", latency_json(r.delay, r.delay_histogram)},
           {"verify", r.spec.verify() ? json{{"errors", r.verify_errors}} : json(nullptr)},
           {"findings", r.findings},
           {"counter_movers", r.counter_movers},
           {"summary", render_summary_line(r)}};
  if (!r.socksize_basis.empty()) doc["socksize_auto"] = {{"socksize", r.spec.socksize()}, {"basis", r.socksize_basis}};
  return doc;
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
