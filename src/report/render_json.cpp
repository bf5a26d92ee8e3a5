#include <fabperf/report/report.hpp>

#include <nlohmann/json.hpp>

#include "report/result_json.hpp"

namespace fabperf {

using jsonu::array_json;
using nlohmann::json;

// Keys: the field names. The document's shared types have their field lists in result_json.hpp.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrialArmReport, name, mb_per_s, cpu_s_per_gb)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrialReport, what, chosen, reason, arms, summary)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WireAudit, verdict, payload_tx_bytes, wire_tx_bytes, tx_ratio, payload_rx_bytes,
                                   wire_rx_bytes, rx_ratio, resolution_bytes)
// A connection's "tcp" object, written only when the sample is valid (null otherwise).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TcpSample, rtt_us, rttvar_us, snd_mss, rcv_mss, pmtu, snd_cwnd, total_retrans)

namespace {
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
  return {{"series", std::move(series)},
          {"dips", doc_json(c.dips)},
          {"categories", std::move(totals)},
          {"movers", doc_json(c.categories)}};
}

}  // namespace

void to_json(json& j, const PcieSlotReport& s) {
  const DocOut out{j};
  FABPERF_FIELDS(out, Need::may, s, address, link, ports, usable_gbps, tx_gbps, rx_gbps, used_pct, at_ceiling);
  out("ports_speed_mbps", s.ports_speed_mbps, Need::may, Unknown::not_positive);
  out("bound_by", s.bound_by, Need::may, Unknown::empty);
}

json node_json(const NodeReport& n) {
  json j = doc_json(n);
  j["rdma_ports"] = rdma_ports_json(n.rdma_ports);
  j["counters"] = counters_json(n.counters.value_or(CounterReport{}));
  return j;
}

json connection_json(const ConnReport& c) {
  json j;
  FABPERF_FIELDS(DocOut{j}, Need::may, c, node, peer, role, op, local, remote, tx_bytes_window, tx_delivered_window,
                 rx_bytes_window, tx_bytes_total, rx_bytes_total, mb_per_s, error);
  DocOut{j}("retrans", c.retrans_window, Need::may);
  j["tcp"] = c.tcp.valid ? json(c.tcp) : json(nullptr);
  return j;
}

json result_header_json(const Report& r) {
  json j{{"schema", kResultSchema}, {"schema_version", kResultSchemaVersion}, {"settings", to_json(r.spec)}};
  FABPERF_FIELDS(DocOut{j}, Need::may, r, fabperf_version, test_id, started_at, clients, servers);
  return j;
}

json result_summary_json(const Report& r) {
  json j;
  FABPERF_FIELDS(DocOut{j}, Need::may, r, complete, interrupted, cli_cpu_pct, srv_cpu_pct, max_clock_uncertainty_us,
                 findings, counter_movers, latency, delay);
  j["aggregate"] = doc_json(r.aggregate);
  j["aggregate"]["window_s"] = r.window_s;
  j["verify"] = r.spec.verify() ? json{{"errors", r.verify_errors}} : json(nullptr);
  j["summary"] = render_summary_line(r);
  if (!r.socksize_basis.empty()) j["socksize_auto"] = {{"socksize", r.spec.socksize()}, {"basis", r.socksize_basis}};
  return j;
}

json render_json(const Report& r) {
  json doc = result_header_json(r);
  doc.update(result_summary_json(r));
  doc["nodes"] = array_json(r.nodes, node_json);
  doc["pairs"] = doc_json(r.pairs);
  doc["connections"] = array_json(r.connections, connection_json);
  return doc;
}

}  // namespace fabperf
