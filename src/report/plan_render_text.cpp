// PlanReport -> text for a terminal: the verdict first, then the failed checks, the steps, and
// each step's nodes, pairs, links and latency. Formatting only.
#include <fabperf/core/units.hpp>
#include <fabperf/report/plan_report.hpp>

#include "report/text_table.hpp"

#include <fmt/format.h>
#include <cmath>

namespace fabperf {

namespace {

using namespace text;  // the table and its number formats

std::string kpi_value(std::optional<double> v) {
  return v ? fmt::format("{:g}", std::round(*v * 100) / 100) : "n/a";
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

  if (!r.kpi_groups.empty()) {
    out += "\nKPI checks\n";
    Table t({col::kpi, col::test, col::scope, col::threshold, "checks", "failed", "worst", "worst at", col::pass});
    for (const auto& g : r.kpi_groups) {
      t.add({g.kpi, g.test.value_or("(plan)"), g.scope, fmt::format("{} {} {}", g.op, kpi_value(g.threshold), g.unit),
             std::to_string(g.passed + g.failed), std::to_string(g.failed), kpi_value(g.worst),
             g.worst_subject.empty() ? "-" : g.worst_subject, g.failed ? "FAIL" : "pass"});
    }
    out += t.str();
    if (r.kpi_failed > 0) {
      out += "\nFailed checks\n";
      Table f({col::kpi, col::step, col::subject, col::value, col::threshold, col::detail});
      for (const auto& k : r.kpis) {
        if (k.pass) continue;
        f.add({k.kpi, k.step.value_or(k.test.value_or("(plan)")), k.subject.empty() ? "-" : k.subject,
               fmt::format("{} {}", kpi_value(k.value), k.unit), fmt::format("{} {}", k.op, kpi_value(k.threshold)),
               k.detail});
      }
      out += f.str();
    }
  }

  out += "\nSteps\n";
  Table st({"#", col::step, col::pattern, col::status, "clients -> servers", col::mb_per_s, col::gbit_per_s,
            col::duration_s, "KPIs"});
  for (const auto& s : r.steps) {
    if (!s.listed) continue;
    st.add({std::to_string(s.index), s.id, s.pattern, s.status,
            fmt::format("{} -> {}", fmt::join(s.clients, ","), fmt::join(s.servers, ",")),
            s.measured ? f0(s.mb_per_s) : "-", s.measured ? fmt::format("{:.2f}", s.gbit_per_s) : "-", f1(s.duration_s),
            s.kpi_passed + s.kpi_failed ? fmt::format("{} ok, {} failed", s.kpi_passed, s.kpi_failed) : "-"});
  }
  out += st.str();

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
    Table nt({col::node, col::role, col::status, col::tx_mb_per_s, col::rx_mb_per_s, col::cpu_busy_pct,
              col::retrans_segs, col::p50_us, col::p99_us, col::max_us});
    Table lt({col::node, col::link, col::tx_mb_per_s, col::rx_mb_per_s, col::payload_mb_per_s, col::speed_mbps,
              col::utilization_pct, col::errors, col::drops});
    for (const auto& n : s.nodes) {
      const auto& l = n.latency ? n.latency : n.delay;
      nt.add({n.name, n.role, std::string(to_string(n.status)), f1(n.tx_mb_per_s), f1(n.rx_mb_per_s),
              f0(n.cpu_busy_pct), count_or_dash(n.retrans_segs), l ? us(l->p50_us) : "-", l ? us(l->p99_us) : "-",
              l ? us(l->max_us) : "-"});
      for (const auto& ln : n.links) {
        lt.add({n.name, ln.name, f1(ln.tx_mb_per_s), f1(ln.rx_mb_per_s), f1(payload_mb_per_s_of(ln)),
                ln.speed_mbps > 0 ? std::to_string(ln.speed_mbps) : "-", f1_or_dash(ln.utilization_pct),
                std::to_string(errors_of(ln)), std::to_string(drops_of(ln))});
      }
    }
    out += nt.str();
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
