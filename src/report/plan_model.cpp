// RawResults -> PlanReport: every number a report shows is taken or derived here, once. The
// renderers only format what this builds.
#include <fabperf/report/plan_report.hpp>

#include <fabperf/core/error.hpp>
#include <fabperf/report/result_doc.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <unordered_map>

namespace fabperf {

using nlohmann::json;

namespace {

// Fields of the plan's own records (plan_load checked their types): absent reads as not given.
std::string str(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

struct Host {
  std::string name;
  std::string address;
};

// Result nodes carry the endpoint the coordinator used ("10.0.0.1:6668"); the plan names hosts.
// Match by name, then by an address that only one host of the step's role list has (agents
// sharing an address, as in --local tests, differ only by port), then by role order against the
// step's client/server lists. A node no host matched keeps the name the run used.
void name_nodes(std::vector<NodeReport>& nodes, const std::vector<Host>& hosts, const std::vector<std::string>& clients,
                const std::vector<std::string>& servers) {
  std::size_t ci = 0, si = 0;
  for (auto& n : nodes) {
    const std::string host = host_of(n.name);
    const bool is_client = n.role.find("client") != std::string::npos;
    const std::vector<std::string>& candidates = is_client ? clients : servers;
    std::string found;
    for (const auto& h : hosts) {
      if (h.name == n.name || h.name == host) found = h.name;
    }
    const auto by_address = [&](const Host& h) {
      return !h.address.empty() && (h.address == host || h.address == n.name) && std::ranges::count(candidates, h.name);
    };
    if (found.empty() && std::ranges::count_if(hosts, by_address) == 1)
      found = std::ranges::find_if(hosts, by_address)->name;
    // Role order: a "server+client" node plays both roles, so it takes a place in both lists.
    const std::size_t pos = is_client ? ci : si;
    if (found.empty() && pos < candidates.size()) found = candidates[pos];
    if (is_client) ++ci;
    if (n.role.find("server") != std::string::npos) ++si;
    if (!found.empty()) n.name = found;
  }
}

// How far a value is on the failing side of its threshold (positive = failing); a check that
// could not be measured is the worst of all.
double shortfall(const KpiCheck& c) {
  if (!c.value) return std::numeric_limits<double>::infinity();
  return c.op == ">=" ? c.threshold - *c.value : *c.value - c.threshold;
}

// Which steps the text and HTML reports list (StepView::listed).
void list_steps(PlanReport& r) {
  if (r.steps.size() <= kListAllSteps) return;
  std::vector<StepView*> slow;
  std::size_t attention = 0;
  for (auto& s : r.steps) {
    s.listed = (s.status != "done" || s.kpi_failed > 0) && attention < kListAllSteps;
    attention += s.listed ? 1 : 0;
    if (!s.listed && s.measured) slow.push_back(&s);
  }
  const auto k = std::min(kSlowestListed, slow.size());
  std::partial_sort(slow.begin(), slow.begin() + static_cast<std::ptrdiff_t>(k), slow.end(),
                    [](const StepView* a, const StepView* b) { return a->mb_per_s < b->mb_per_s; });
  for (std::size_t i = 0; i < k; ++i) slow[i]->listed = true;
  r.notes.push_back(fmt::format(
      "{} steps: the tables below list {} of them, every step that failed or failed a KPI (at most {}) and the {} "
      "with the lowest MB/s; every step is in `fabperf report FILE -f csv` and `-f json`",
      r.steps.size(), attention + k, kListAllSteps, k));
}

std::vector<Host> plan_hosts(const json& plan_line) {
  std::vector<Host> hosts;  // plan_load checked that "plan" is an object and its "hosts", when there, a list
  for (const auto& h : plan_line.value("plan", json::object()).value("hosts", json::array()))
    hosts.push_back({str(h, "name"), str(h, "address")});
  return hosts;
}

// The step's view; without `detail`, only what the model needs of every step (status, figures,
// pairs for the matrix), not its nodes, series, latencies and findings.
StepView step_view(const json& sj, const std::vector<Host>& hosts, bool detail = true) {
  StepView s;
  static_cast<StepHead&>(s) = step_head(sj);
  if (!sj.contains("result") || !sj["result"].is_object()) return s;
  ResultDoc r = read_result_doc(sj["result"], ReadMode::lenient, fmt::format("step {}: result", s.id));
  s.measured = true;
  s.op = r.test;
  s.mb_per_s = r.aggregate.mb_per_s;
  s.gbit_per_s = r.aggregate.gbit_per_s;
  s.msg_per_s = r.aggregate.msg_per_s;
  s.window_s = r.window_s;
  name_nodes(r.nodes, hosts, s.clients, s.servers);
  for (const auto& p : r.pairs)
    s.pairs.push_back({node_name(r, p.client), node_name(r, p.server), p.tput.mb_per_s, p.retrans, p.rtt_us});
  if (!detail) return s;
  s.summary = r.summary;
  s.latency = std::move(r.latency);
  s.delay = std::move(r.delay);
  s.findings = std::move(r.findings);
  Series aggregate{"aggregate", {}};
  std::vector<Series> per_node;
  for (auto& n : r.nodes) {
    if (n.counters) {
      for (const auto& d : n.counters->dips) s.counter_events.push_back({d, n.name});
    }
    // Every payload byte is sent by exactly one node, so the sum of the senders' tx series is the
    // step's throughput over time. Agents' intervals share the window's start, so the k-th
    // interval of each node covers the same time.
    Series ns{n.name, {}};
    double sent = 0;
    for (std::size_t k = 0; k < n.intervals.size(); ++k) {
      const auto& p = n.intervals[k];
      sent += p.tx_mb_per_s;
      ns.points.push_back({p.t_s, p.tx_mb_per_s});
      if (aggregate.points.size() <= k) aggregate.points.push_back({p.t_s, 0});
      aggregate.points[k].mb_per_s += p.tx_mb_per_s;
    }
    if (sent > 0) per_node.push_back(std::move(ns));
    // A million steps are kept: only what the report shows of a node stays.
    n.intervals = {};
    n.counters.reset();
    n.bonds = {};
    for (auto& l : n.links) l.intervals = {};
  }
  s.nodes = std::move(r.nodes);
  if (!aggregate.points.empty()) {
    s.series.push_back(std::move(aggregate));
    for (auto& ns : per_node) s.series.push_back(std::move(ns));
  }
  return s;
}

// KPI groups: one line per (test, KPI, scope, threshold) in the verdict table.
// Returns the checks of each step (passed, failed), counted once: a plan of N hosts all-pairs has
// N(N-1) steps and as many checks.
std::unordered_map<std::string, std::pair<int, int>> group_kpis(PlanReport& r) {
  std::unordered_map<std::string, std::pair<int, int>> step_checks;
  std::map<std::string, std::size_t> group_at;
  std::vector<const KpiCheck*> worst_at;
  for (const auto& k : r.kpis) {
    const auto key = fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}", k.test.value_or(""), k.kpi, k.scope, k.op, k.threshold);
    auto it = group_at.find(key);
    if (it == group_at.end()) {
      it = group_at.emplace(key, r.kpi_groups.size()).first;
      r.kpi_groups.push_back({k.test.value_or("").empty() ? std::nullopt : k.test, k.kpi, k.scope, k.op, k.threshold,
                              k.unit, 0, 0, k.value, k.subject});
      worst_at.push_back(&k);
    }
    auto& g = r.kpi_groups[it->second];
    (k.pass ? g.passed : g.failed) += 1;
    if (shortfall(k) > shortfall(*worst_at[it->second])) {
      worst_at[it->second] = &k;
      g.worst = k.value;
      g.worst_subject = k.subject;
    }
    (k.pass ? r.kpi_passed : r.kpi_failed) += 1;
    auto& c = step_checks[k.step.value_or("")];
    (k.pass ? c.first : c.second) += 1;
  }
  return step_checks;
}

// All-pairs matrices, one per test that used the pattern. Hosts in plan order first; later steps win.
void build_matrices(PlanReport& r, const std::vector<Host>& hosts) {
  std::map<std::string, std::size_t> matrix_at;
  std::vector<std::unordered_map<std::string, std::size_t>> node_at;  // per matrix: name -> row
  for (const auto& s : r.steps) {
    if (s.pattern != "all-pairs" || s.pairs.empty()) continue;
    const auto [it, added] = matrix_at.emplace(s.test, r.matrices.size());
    if (added) {
      r.matrices.push_back({s.test, {}, {}, 0, 0, 0});
      node_at.emplace_back();
    }
    auto& m = r.matrices[it->second];
    const auto row = [&m, &at = node_at[it->second]](const std::string& n) {
      const auto [e, fresh] = at.emplace(n, m.nodes.size());
      if (fresh) {
        m.nodes.push_back(n);
        for (auto& cells : m.mb_per_s) cells.resize(m.nodes.size());
        m.mb_per_s.emplace_back(m.nodes.size());
      }
      return e->second;
    };
    if (added) {
      for (const auto& h : hosts) row(h.name);
    }
    for (const auto& p : s.pairs) {
      const auto c = row(p.client);
      const auto v = row(p.server);  // first: a new row moves the others
      m.mb_per_s[c][v] = p.mb_per_s;
    }
  }
  for (auto& m : r.matrices) {
    for (const auto& cells : m.mb_per_s) {
      for (const auto& c : cells) {
        if (!c) continue;
        m.min = m.cells == 0 ? *c : std::min(m.min, *c);
        m.max = m.cells == 0 ? *c : std::max(m.max, *c);
        ++m.cells;
      }
    }
  }
}

// The verdict and its reason.
std::pair<std::string, std::string> verdict(const PlanReport& r) {
  if (r.kpi_failed > 0)
    return {"FAIL", fmt::format("{} of {} KPI checks failed", r.kpi_failed, r.kpi_failed + r.kpi_passed)};
  if (r.steps_failed > 0) return {"ERROR", fmt::format("{} step(s) failed to run", r.steps_failed)};
  if (!r.finished || r.interrupted || r.steps_missing > 0 || r.steps_interrupted > 0) {
    return {"INCOMPLETE", fmt::format("{} of {} steps done; {} KPI checks passed so far", r.steps_done,
                                      std::max(r.steps_total, static_cast<int>(r.steps.size())), r.kpi_passed)};
  }
  if (r.kpis.empty()) return {"NO KPI", fmt::format("{} step(s) measured; no KPI was checked", r.steps_done)};
  return {"PASS", fmt::format("all {} KPI checks passed", r.kpi_passed)};
}

// The report from the file's records, its steps already turned into views (in index order).
PlanReport finish_report(const RawResults& raw, std::vector<KpiCheck> kpis, std::vector<StepView> steps) {
  PlanReport r;
  r.source = raw.path;
  r.kind = raw.single_run ? "run" : "plan";
  r.plan_name = str(raw.plan.value("plan", json::object()), "name");
  r.plan_file = str(raw.plan, "plan_file");
  r.fabperf_version = str(raw.plan, "fabperf_version");
  r.started_at = str(raw.plan, "started_at");
  r.steps_total = raw.plan.value("steps_total", 0);
  r.resumed = raw.resumed;
  const std::vector<Host> hosts = plan_hosts(raw.plan);

  r.kpis = std::move(kpis);  // a million checks at 1024 hosts: moved from the reader, not copied
  const auto step_checks = group_kpis(r);
  r.steps = std::move(steps);
  for (auto& s : r.steps) {
    if (const auto c = step_checks.find(s.id); c != step_checks.end()) {
      s.kpi_passed = c->second.first;
      s.kpi_failed = c->second.second;
    }
    if (s.status == "done") ++r.steps_done;
    if (s.status == "failed") ++r.steps_failed;
    if (s.status == "interrupted") ++r.steps_interrupted;
  }
  r.steps_missing = std::max(0, r.steps_total - static_cast<int>(r.steps.size()));
  list_steps(r);

  if (raw.end) {
    r.finished = true;
    r.finished_at = raw.end->finished_at;
    r.interrupted = raw.end->interrupted;
    r.exit_code = raw.end->exit_code;
  }

  build_matrices(r, hosts);

  // Notes (each when its condition holds) and verdict.
  for (const auto& [when, note] :
       {std::pair{
            raw.truncated_line > 0,
            fmt::format("line {} was cut off mid-write (the writer stopped); it was ignored", raw.truncated_line)},
        {r.resumed > 0, fmt::format("the plan was resumed {} time(s); the last record of each step counts", r.resumed)},
        {raw.superseded_steps > 0,
         fmt::format("{} step record(s) were replaced by a later record of the same step", raw.superseded_steps)},
        {!r.finished,
         "the plan did not finish (no \"end\" record): the results below are what was measured before it stopped"},
        {r.interrupted, "the plan was interrupted"},
        {r.steps_missing > 0, fmt::format("{} of {} planned steps have no record", r.steps_missing, r.steps_total)}}) {
    if (when) r.notes.push_back(note);
  }
  std::tie(r.verdict, r.verdict_reason) = verdict(r);
  r.isolation = raw.isolation;
  if (r.finished && r.kind == "plan" && raw.end->passed != (r.verdict == "PASS" || r.verdict == "NO KPI")) {
    r.notes.push_back(
        fmt::format("the run itself recorded passed={} (exit code {}); the verdict here is from the records",
                    raw.end->passed, r.exit_code));
  }
  return r;
}

}  // namespace

PlanReport build_plan_report(const RawResults& raw) {
  const std::vector<Host> hosts = plan_hosts(raw.plan);
  std::vector<StepView> steps;
  steps.reserve(raw.steps.size());
  for (const auto& sj : raw.steps) steps.push_back(step_view(sj, hosts));
  return finish_report(raw, raw.kpis, std::move(steps));
}

PlanReport read_plan_report(std::istream& in, const std::string& name, bool listed_detail) {
  std::optional<std::vector<Host>> hosts;              // the first plan header's
  std::map<std::string, StepView> by_id;               // the last record of each step id, as load_results keeps
  std::unordered_map<std::string, std::streamoff> at;  // where each step's record starts, when it lost its detail
  RawResults raw = load_results(in, name, [&](const json& plan, json&& sj, std::streamoff off) {
    if (!hosts) hosts = plan_hosts(plan);
    StepView v = step_view(sj, *hosts, !listed_detail || off < 0);
    if (listed_detail && off >= 0) at.insert_or_assign(v.id, off);
    by_id.insert_or_assign(v.id, std::move(v));
  });
  std::vector<StepView> steps;
  steps.reserve(by_id.size());
  for (auto& [id, v] : by_id) steps.push_back(std::move(v));
  std::stable_sort(steps.begin(), steps.end(), [](const StepView& a, const StepView& b) { return a.index < b.index; });
  PlanReport r = finish_report(raw, std::move(raw.kpis), std::move(steps));
  for (auto& s : r.steps) {  // the listed steps' details, from their own lines
    const auto it = at.find(s.id);
    if (!s.listed || it == at.end()) continue;
    std::string line;
    in.clear();
    json sj;
    if (in.seekg(it->second) && std::getline(in, line)) sj = json::parse(line, nullptr, false);
    if (!sj.is_object() || sj.value("id", "") != s.id)
      throw UsageError(fmt::format("{}: cannot read step {} again (the file changed while it was read?)", name, s.id));
    StepView full = step_view(sj, *hosts);
    full.kpi_passed = s.kpi_passed;
    full.kpi_failed = s.kpi_failed;
    s = std::move(full);
  }
  return r;
}

PlanReport read_plan_report(const std::string& path, bool listed_detail) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("report: cannot read {}: {}", path, errno_text(errno)));
  return read_plan_report(in, path, listed_detail);
}

}  // namespace fabperf
