// PlanReport -> text for a terminal: the verdict first, then the failed checks, the steps, and
// each step's nodes, pairs, links and latency. Formatting only.
#include <fabperf/core/units.hpp>
#include <fabperf/report/plan_report.hpp>

#include "report/text_table.hpp"

#include <fmt/format.h>

namespace fabperf {

namespace {

using namespace text;  // the table and its number formats

std::string text_table(const PlanTable& p) {
  std::vector<Head> heads;
  for (const auto& h : p.heads) heads.emplace_back(h.substr(h.starts_with('>') ? 1 : 0));
  Table t(heads);
  for (const auto& row : p.rows) t.add(row.second);
  return t.str();
}

}  // namespace

std::string render_plan_text(const PlanReport& r) {
  std::string out;
  if (r.kind == "plan") {
    out += fmt::format("fabperf report: {}  (plan '{}'{}; fabperf {})\n", r.source, r.plan_name,
                       r.plan_file.empty() ? "" : " from " + r.plan_file, r.fabperf_version);
    out += fmt::format("started {}, {}\n", r.started_at, r.finished ? "finished " + r.finished_at : "did not finish");
  } else {
    out += fmt::format("fabperf report: {}  (one run, {}; fabperf {})\n", r.source, r.started_at, r.fabperf_version);
  }
  out += fmt::format("\nVERDICT: {}  ({})\n", r.verdict, r.verdict_reason);
  out += fmt::format("steps: {} done, {} failed, {} interrupted, {} not run, of {}\n", r.steps_done, r.steps_failed,
                     r.steps_interrupted, r.steps_missing, r.steps_total);
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  if (!r.isolation.empty()) out += "\nIsolation\n";
  for (const auto& l : r.isolation) out += "  " + l + "\n";

  const PlanCells cells;
  if (!r.kpi_groups.empty()) out += "\nKPI checks\n" + text_table(kpi_group_table(r, cells));
  if (r.kpi_failed > 0) out += "\nFailed checks\n" + text_table(failed_check_table(r, cells));
  out += "\nSteps\n" + text_table(step_table(r, cells));

  for (const auto& m : r.matrices) {
    out += fmt::format("\nAll-pairs matrix of '{}' (MB/s, row = client sending to column = server)\n", m.test);
    std::vector<Head> head{"client \\ server"};
    for (const auto& n : m.nodes) head.emplace_back(n);
    Table t(head);
    for (std::size_t i = 0; i < m.nodes.size(); ++i) {
      std::vector<std::string> row{m.nodes[i]};
      for (std::size_t j = 0; j < m.nodes.size(); ++j) {
        row.push_back(m.mb_per_s[i][j] ? f0(*m.mb_per_s[i][j]) : (i == j ? "." : "-"));
      }
      t.add(row);
    }
    out += t.str();
    if (m.cells > 0) out += fmt::format("  min {:.0f}, max {:.0f} MB/s over {} pairs\n", m.min, m.max, m.cells);
  }

  for (const auto& s : r.steps) {
    if (!s.listed) continue;
    out += fmt::format("\n== step {} {} ({}, {})\n", s.index, s.id, s.pattern, s.status);
    if (!s.error.empty()) out += "  error: " + s.error + "\n";
    if (!s.measured) {
      out += "  nothing was measured\n";
      continue;
    }
    if (!s.summary.empty()) out += "  " + s.summary + "\n";
    Table lt({col::node, col::link, col::tx_mb_per_s, col::rx_mb_per_s, col::payload_mb_per_s, col::speed_mbps,
              col::utilization_pct, col::errors, col::drops});
    for (const auto& n : s.nodes) {
      for (const auto& ln : n.links) {
        lt.add({n.name, ln.name, f1(ln.tx_mb_per_s), f1(ln.rx_mb_per_s), f1(payload_mb_per_s_of(ln)),
                ln.speed_mbps > 0 ? std::to_string(ln.speed_mbps) : "-", f1_or_dash(ln.utilization_pct),
                std::to_string(errors_of(ln)), std::to_string(drops_of(ln))});
      }
    }
    out += text_table(node_table(r, s, cells));
    if (!s.pairs.empty()) {
      Table pt({col::client, col::server, col::mb_per_s, col::retrans, col::rtt_us});
      for (const auto& p : s.pairs)
        pt.add({p.client, p.server, f1(p.mb_per_s), std::to_string(p.retrans), std::to_string(p.rtt_us)});
      out += "  pairs:\n" + pt.str("    ");
    }
    if (!lt.empty()) out += "  links:\n" + lt.str("    ");
    for (const auto& [what, l] : {std::pair{"rpc", &s.latency}, {"delay", &s.delay}}) {
      if (!*l) continue;
      const auto& v = **l;
      out += fmt::format("  {} latency: {} samples, mean {} us, p50 {}, p90 {}, p99 {}, p99.9 {}, max {} us\n", what,
                         v.count, us(v.mean_us), us(v.p50_us), us(v.p90_us), us(v.p99_us), us(v.p999_us), us(v.max_us));
    }
    for (const auto& f : s.findings) out += "  finding: " + f + "\n";
    for (const auto& ev : s.counter_events) out += "  counters: " + ev.node + " " + ev.text + "\n";
  }
  return out;
}

}  // namespace fabperf
