// KPIs: thresholds evaluated per node / pair / link / step over step results as the results file
// holds them (render_json of each step's Report), so a resumed plan judges finished steps exactly
// like fresh ones.
#include <fabperf/core/error.hpp>
#include <fabperf/plan/plan.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

namespace fabperf::plan {
namespace {

using nlohmann::json;

struct KpiDef {
  const char* name;
  std::optional<double> KpiSet::*field;
  const char* scope;
  const char* op;
  const char* unit;
  double lo, hi;
};
#define FABPERF_KPI_DEF(member, name, scope, op, unit, lo, hi) KpiDef{name, &KpiSet::member, scope, op, unit, lo, hi},
constexpr KpiDef kKpiDefs[] = {FABPERF_KPIS(FABPERF_KPI_DEF)};
#undef FABPERF_KPI_DEF
const KpiDef& kpi_def(std::string_view name) {
  const auto* d = std::ranges::find(kKpiDefs, name, &KpiDef::name);
  if (d == std::end(kKpiDefs)) throw UsageError(fmt::format("unknown KPI '{}'", name));
  return *d;
}

// The checks of one evaluation: each one judged against its KPI's threshold (none: not checked).
struct Judge {
  const KpiSet& k;
  const std::optional<std::string>& test;
  std::vector<KpiCheck> out;

  void operator()(const char* kpi, const std::optional<std::string>& step, std::string subject,
                  std::optional<double> value, std::string detail) {
    const KpiDef& d = kpi_def(kpi);
    if (!(k.*d.field)) return;
    const double t = *(k.*d.field);
    const bool pass = value && (std::string(d.op) == ">=" ? *value >= t : *value <= t);
    out.push_back({test, step, d.name, d.scope, std::move(subject), value, t, d.op, d.unit, pass, std::move(detail)});
  }
};

// Links over the test: best throughput and efficiency, summed errors.
struct LinkAcc {
  double best_mbps{-1};
  std::string best_mbps_step;
  std::optional<double> best_eff;
  std::string best_eff_step;
  double speed{-1};
  double errors{0};
  std::string error_detail;
};

// Counter KPIs: every node, from the sums compute_report put in its "counters".
void counter_checks(Judge& check, const std::string& step, const std::string& name, const NodeReport& n) {
  for (const auto& [kpi, cat] :
       {std::pair{"max-pause-frames", "pause"}, std::pair{"max-discards", "discard"},
        std::pair{"max-fec-uncorrected", "fec_uncorrected"}, std::pair{"max-ecn-marks", "ecn"}}) {
    if (!(check.k.*kpi_def(kpi).field)) continue;
    if (!n.counters) {
      check(kpi, step, name, std::nullopt, fmt::format("{} in {}: no counters were sampled", name, step));
      continue;
    }
    const auto category = *counter_category_from_string(cat);
    const auto v = static_cast<double>(n.counters->total(category));
    std::string top;
    if (const auto m = std::ranges::find(n.counters->categories, category, &CategoryMovers::category);
        m != n.counters->categories.end()) {
      for (const auto& t : m->top) {
        if (top.size() > 120) break;
        top += fmt::format("{}{} {} +{}", top.empty() ? "" : ", ", t.source, t.name, t.delta);
      }
    }
    check(kpi, step, name, v,
          fmt::format("{} in {}: {} {}{}", name, step, figure(v), cat, top.empty() ? "" : " (" + top + ")"));
  }
}

// The link KPIs, over the whole test.
void link_checks(Judge& check, const std::vector<std::string>& order, const std::map<std::string, LinkAcc>& links) {
  for (const auto& sub : order) {
    const auto& a = links.at(sub);
    const bool measured = !a.best_mbps_step.empty();
    check("min-link-mbps", std::nullopt, sub, measured ? std::optional(a.best_mbps) : std::nullopt,
          measured ? fmt::format("{}: best {} MB/s of payload (in {})", sub, figure(a.best_mbps), a.best_mbps_step)
                   : fmt::format("{}: not measured in a complete step (a node of each step it was in was lost)", sub));
    check("min-efficiency-pct", std::nullopt, sub, a.best_eff,
          a.best_eff  ? fmt::format("{}: best {}% of the goodput {} Mb/s allows (in {})", sub, figure(*a.best_eff),
                                    figure(a.speed), a.best_eff_step)
          : !measured ? fmt::format("{}: not measured in a complete step", sub)
                      : fmt::format("{}: link speed unknown, efficiency cannot be computed", sub));
    check("max-nic-errors", std::nullopt, sub, a.errors,
          a.error_detail.empty() ? fmt::format("{}: no errors or drops", sub) : sub + ": " + a.error_detail);
  }
}

}  // namespace

std::string figure(double v) {
  if (std::fabs(v) >= 100 || v == std::floor(v)) return fmt::format("{:.0f}", v);
  return fmt::format("{:.3g}", v);
}

bool KpiSet::empty() const {
  return *this == KpiSet{};
}

const std::vector<std::string>& kpi_names() {
#define FABPERF_KPI_NAME(member, name, ...) name,
  static const std::vector<std::string> names{FABPERF_KPIS(FABPERF_KPI_NAME)};
#undef FABPERF_KPI_NAME
  return names;
}

void set_kpi(KpiSet& k, std::string_view name, double value) {
  const auto& d = kpi_def(name);
  if (!(value >= d.lo && value <= d.hi)) {
    throw UsageError(fmt::format("KPI '{}': {} is out of range ({}..{})", name, value, figure(d.lo), figure(d.hi)));
  }
  k.*d.field = value;
}

KpiSet kpi_profile(std::string_view name) {
  KpiSet k;
  if (name == "ibm-readiness") {
    // IBM's network readiness check: every node >= 2000 MB/s, min/max >= 0.79; retransmits and NIC
    // errors are reported for information by that tool, so they are not thresholds here.
    k.min_node_mbps = 2000;
    k.min_spread = 0.79;
    return k;
  }
  if (name == "none") return k;
  throw UsageError(fmt::format("unknown KPI profile '{}' (ibm-readiness, none)", name));
}

KpiSet merge(const KpiSet& base, const KpiSet& over) {
  KpiSet k = base;
  for (const auto& d : kKpiDefs) {
    if (over.*d.field) k.*d.field = over.*d.field;
  }
  return k;
}

json to_json(const KpiSet& k) {
  json j = json::object();
  for (const auto& d : kKpiDefs) {
    if (k.*d.field) j[d.name] = *(k.*d.field);
  }
  return j;
}

std::vector<KpiCheck> evaluate_kpis(const KpiSet& k, const std::vector<StepOutcome>& steps,
                                    const std::map<std::string, std::string>& names,
                                    const std::optional<std::string>& test) {
  Judge check{k, test, {}};
  // Node values over the test, for the spread.
  struct NodeValue {
    std::string step, node;
    double mbps;
  };
  std::vector<NodeValue> node_values;
  std::map<std::string, LinkAcc> links;
  std::vector<std::string> link_order;

  for (const auto& s : steps) {
    const ResultDoc& r = s.result;
    // A step that lost a node shows its partners' links at whatever moved before: a link's best
    // comes from complete steps only (one seen only in such steps is "not measured").
    std::map<std::uint64_t, std::string> by_index;
    for (const auto& n : r.nodes) by_index[n.index] = label_of(names, n.name);
    for (const auto& n : r.nodes) {
      const std::string name = label_of(names, n.name);
      counter_checks(check, s.id, name, n);
      if (n.role.find("client") != std::string::npos) {
        const double v = role_mbps(n, r.test, true);
        node_values.push_back({s.id, name, v});
        check("min-node-mbps", s.id, name, v,
              fmt::format("{} as a client in {}: {} MB/s ({})", name, s.id, figure(v), r.test));
        const ResultLatency* lat = n.latency ? &*n.latency : n.delay ? &*n.delay : nullptr;
        check("max-p99-latency-us", s.id, name, lat ? std::optional(lat->p99_us) : std::nullopt,
              lat ? fmt::format("{} in {}: p99 {} us over {} {}", name, s.id, figure(lat->p99_us), lat->count,
                                n.latency ? "requests" : "ping round trips under load")
                  : fmt::format("{} in {}: no latency was measured", name, s.id));
      }
      for (const auto& l : n.links) {
        const std::string sub = name + "/" + l.name;
        if (!links.count(sub)) link_order.push_back(sub);
        auto& a = links[sub];
        const double mb = payload_mb_per_s_of(l);
        if (r.complete && mb > a.best_mbps) {
          a.best_mbps = mb;
          a.best_mbps_step = s.id;
        }
        if (r.complete && l.efficiency_pct >= 0 && (!a.best_eff || l.efficiency_pct > *a.best_eff)) {
          a.best_eff = l.efficiency_pct;
          a.best_eff_step = s.id;
        }
        if (l.speed_mbps >= 0) a.speed = static_cast<double>(l.speed_mbps);
        const auto e = static_cast<double>(errors_of(l) + drops_of(l));
        if (e > 0) {
          a.error_detail += fmt::format("{}{}: tx_errors {} rx_errors {} tx_dropped {} rx_dropped {}",
                                        a.error_detail.empty() ? "" : "; ", s.id, l.tx_errors, l.rx_errors,
                                        l.tx_dropped, l.rx_dropped);
        }
        a.errors += e;
      }
    }
    for (const auto& p : r.pairs) {
      const std::string sub = by_index[p.client] + "->" + by_index[p.server];
      check("min-pair-mbps", s.id, sub, p.tput.mb_per_s,
            fmt::format("{} in {}: {} MB/s over {} connections", sub, s.id, figure(p.tput.mb_per_s), p.connections));
      check("max-retransmits", s.id, sub, static_cast<double>(p.retrans),
            fmt::format("{} in {}: {} segments retransmitted", sub, s.id, p.retrans));
    }
    check("min-aggregate-mbps", s.id, "", r.aggregate.mb_per_s,
          fmt::format("{}: {} MB/s over {} clients and {} servers", s.id, figure(r.aggregate.mb_per_s), r.clients,
                      r.servers));
  }

  if (k.min_spread) {
    if (node_values.empty()) {
      check("min-spread", std::nullopt, "", std::nullopt, "no client node was measured");
    } else {
      const auto [mn, mx] = std::ranges::minmax_element(node_values, {}, &NodeValue::mbps);
      const double ratio = mx->mbps > 0 ? mn->mbps / mx->mbps : 0.0;
      check("min-spread", std::nullopt, "", ratio,
            fmt::format("slowest {} {} MB/s ({}), fastest {} {} MB/s ({}) over {} node results", mn->node,
                        figure(mn->mbps), mn->step, mx->node, figure(mx->mbps), mx->step, node_values.size()));
    }
  }
  link_checks(check, link_order, links);
  return std::move(check.out);
}

std::string render_verdicts(const std::vector<KpiCheck>& checks) {
  if (checks.empty()) return "KPIs: none set\n";
  std::size_t failed = 0;
  std::string rows;
  for (const auto& c : checks) {
    if (c.pass) continue;
    ++failed;
    rows += fmt::format("  FAIL {:<18} {:<22} {:<14} {:>10} {} {:<8} {}\n", c.kpi, c.subject.empty() ? "-" : c.subject,
                        c.step ? *c.step : (c.test ? *c.test : std::string("plan")),
                        c.value ? figure(*c.value) : std::string("n/a"), c.op, figure(c.threshold) + " " + c.unit,
                        c.detail);
  }
  // Passing checks are summarised per KPI with the worst value, so the table stays readable on
  // big fabrics; every check is in the results file.
  std::map<std::string, std::pair<std::size_t, const KpiCheck*>> passed;
  for (const auto& c : checks) {
    if (!c.pass) continue;
    auto& [n, worst] = passed[(c.test ? *c.test : std::string("plan")) + " " + c.kpi];
    ++n;
    const bool lower_is_worse = c.op == ">=";
    if (!worst || (c.value && worst->value && (lower_is_worse ? *c.value < *worst->value : *c.value > *worst->value)))
      worst = &c;
  }
  std::string out = fmt::format("KPI verdicts: {} checks, {} failed\n", checks.size(), failed);
  out += rows;
  for (const auto& [key, v] : passed) {
    const auto& w = *v.second;
    out += fmt::format("  pass {:<40} {:>4} checks, worst {} {} {} {} ({})\n", key, v.first,
                       w.value ? figure(*w.value) : std::string("n/a"), w.unit, w.op, figure(w.threshold),
                       w.subject.empty() ? (w.step ? *w.step : std::string("-")) : w.subject);
  }
  return out;
}

}  // namespace fabperf::plan
