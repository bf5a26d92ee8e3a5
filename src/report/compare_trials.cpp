// `fabperf compare` over sets of trials: each quantity's trials on both sides go through
// stats::decide (means, bootstrap interval of the ratio, Mann-Whitney U, effect size), and the
// verdict is a sentence. Loading reads two file kinds (a result, a plan's results, which `run
// --repeat` writes too), each by its first record; everything after it is pure.
#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/report/compare.hpp>
#include <fabperf/report/plan_report.hpp>
#include "report/match.hpp"
#include "report/result_json.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

namespace fabperf {

using nlohmann::json;

namespace {

// Why a result may not count as a trial ("" when it may): only complete, uninterrupted runs do.
std::string exclusion(const ResultDoc& r) {
  if (r.interrupted) return "interrupted by the user";
  if (!r.complete) return "incomplete: " + (r.findings.empty() ? "a node did not report" : r.findings.front());
  return "";
}

// A plan's results file, read and checked as `fabperf report` reads it (the last record of a step
// id counts: a resumed run appends a fresh one): one set, or two for an A/B plan.
std::vector<TrialSet> plan_sets(std::istream& in, const std::string& path) {
  RawResults raw = load_results(in, path);
  std::vector<std::string> excluded;
  if (raw.truncated_line > 0)
    excluded.push_back(fmt::format("{}:{}: cut off (the run stopped while writing it)", path, raw.truncated_line));
  const json& plan = raw.plan["plan"];
  std::map<std::string, std::string> names;
  for (const auto& h : plan.value("hosts", json::array())) names[h.value("address", "")] = h["name"];
  const bool ab = plan.contains("ab") && plan["ab"].is_object();
  TrialSet a{ab ? plan["ab"].value("a_name", "A") : "", path, {}, excluded, {}},
      b{ab ? plan["ab"].value("b_name", "B") : "", path, {}, excluded, {}};
  if (ab) {
    try {
      const json& h = plan["ab"];
      a.planned = b.planned = parse_expectations(h.value("expect", std::vector<std::string>{}),
                                                 h.value("expect_rest", ""), h.value("expect_gain", ""));
    } catch (const std::exception& e) {
      throw UsageError(fmt::format("compare: {}:1: the plan's [ab] expectations: {}", path, e.what()));
    }
  }
  for (auto& l : raw.steps) {
    const auto id = l["id"].get<std::string>();
    TrialSet& side = l.value("config", "") == "B" ? b : a;
    if (l["status"] != "done") {
      side.excluded.push_back(fmt::format("step {}: {}", id, l["status"].get<std::string>()));
      continue;
    }
    Trial t{l.value("base_id", id), l.value("trial", 1u),
            read_result_doc(l["result"], ReadMode::lenient, fmt::format("compare: {}: step {}: result", path, id))};
    if (const auto why = exclusion(t.result); !why.empty()) {
      side.excluded.push_back(fmt::format("step {}: {}", id, why));
      continue;
    }
    // Plan results name nodes by address:port; the plan's hosts give them their names back.
    for (auto& n : t.result.nodes) {
      if (const auto it = names.find(n.name); it != names.end()) n.name = it->second;
    }
    side.trials.push_back(std::move(t));
  }
  return ab ? std::vector{a, b} : std::vector{a};
}

std::vector<TrialSet> load_one(const std::string& path) {
  const std::string text = read_text_file(path, "compare:");
  json whole = json::parse(text, nullptr, false);
  if (!whole.is_discarded()) {
    check_result_schema(whole, path);
    Trial t{"", 1, read_result_doc(whole, ReadMode::lenient, "compare: " + path)};
    if (const auto why = exclusion(t.result); !why.empty()) return {TrialSet{"", path, {}, {path + ": " + why}, {}}};
    return {TrialSet{"", path, {std::move(t)}, {}, {}}};
  }
  // JSON Lines: the first record says which kind, a plan's results (a "plan" line) or trials.
  std::istringstream lines(text);
  const auto first = text.find_first_not_of(" \t\r\n");
  const auto eol = text.find('\n', first == std::string::npos ? 0 : first);
  const json head = first == std::string::npos ? json() : json::parse(text.substr(first, eol - first), nullptr, false);
  if (head.is_object() && head.value("type", "") == "plan") return plan_sets(lines, path);
  throw UsageError(
      fmt::format("compare: {}: neither a result nor a plan's results (its first line is no plan record)", path));
}

using Key = std::tuple<std::string, std::string, std::string>;  // step, kind, subject

// A link's negotiated speed (Mb/s) in a set's first trial, -1 unknown; subject is NODE/LINK.
std::int64_t link_speed(const TrialSet& s, const std::string& subject) {
  if (s.trials.empty()) return -1;
  for (const auto& n : s.trials.front().result.nodes) {
    for (const auto& l : n.links) {
      if (n.name + "/" + l.name == subject) return l.speed_mbps;
    }
  }
  return -1;
}

// Every quantity of each trial, (step, kind, subject) -> its MB/s in each trial.
std::map<Key, std::vector<double>> samples_of(const TrialSet& s) {
  std::map<Key, std::vector<double>> out;
  for (const auto& t : s.trials) {
    std::map<std::pair<std::string, std::string>, double> m{{{"aggregate", ""}, t.result.aggregate.mb_per_s}};
    for (const auto& n : t.result.nodes) {
      for (const auto& l : n.links) {
        if (l.kind != "loopback") m[{"link", n.name + "/" + l.name}] = payload_mb_per_s_of(l);
      }
      for (const auto& b : n.bonds) {
        for (const auto& mem : b.members)
          m[{"member", n.name + "/" + b.name + "/" + mem.name}] = mem.tx_mb_per_s + mem.rx_mb_per_s;
      }
    }
    for (const auto& [k, v] : m) out[{t.step, k.first, k.second}].push_back(v);
  }
  return out;
}

}  // namespace

std::vector<TrialSet> load_trial_sets(const std::string& paths) {
  std::vector<TrialSet> joined;
  for (const auto& p : split_list(paths, ',')) {
    if (p.empty()) throw UsageError(fmt::format("compare: '{}': an empty file name in the list", paths));
    auto sets = load_one(p);
    if (joined.empty()) {
      joined = std::move(sets);
      continue;
    }
    if (sets.size() != joined.size())
      throw UsageError(fmt::format("compare: {}: an A/B results file cannot be joined with others", p));
    for (std::size_t i = 0; i < sets.size(); ++i) {
      for (auto& t : sets[i].trials) {
        t.trial = static_cast<std::uint32_t>(joined[i].trials.size() + 1);
        joined[i].trials.push_back(std::move(t));
      }
      for (auto& e : sets[i].excluded) joined[i].excluded.push_back(std::move(e));
      joined[i].file += "," + p;
    }
  }
  for (const auto& s : joined) {
    if (s.trials.empty())
      throw UsageError(fmt::format("compare: {}: no finished result{} in it{}", s.file,
                                   s.label.empty() ? "" : " for " + s.label,
                                   s.excluded.empty() ? std::string() : " (excluded: " + s.excluded.front() + ")"));
  }
  return joined;
}

TrialComparison compare_trial_sets(const TrialSet& a, const TrialSet& b, const TrialCompareOptions& o) {
  TrialComparison c;
  c.a_label = a.label.empty() ? "before" : a.label;
  c.b_label = b.label.empty() ? "after" : b.label;
  c.a_file = a.file;
  c.b_file = b.file;
  const auto sa = samples_of(a), sb = samples_of(b);
  std::map<std::string, std::size_t> family;  // kind -> quantities compared
  for (const auto& [k, v] : sa) {
    if (sb.count(k)) ++family[std::get<1>(k)];
  }
  if (family.empty()) {
    throw UsageError(fmt::format("compare: {} and {} have no step or quantity in common: results of unrelated runs",
                                 a.file, b.file));
  }
  std::size_t max_a = 0, max_b = 0;
  match(sa, sb, [&](const Key& k, const std::vector<double>* va, const std::vector<double>* vb) {
    TrialMetric m;
    std::tie(m.step, m.kind, m.subject) = k;
    if (!va || !vb) {
      // A link or bond member on one side only is a row that fails, never a silent omission: a
      // port that vanished after the change would otherwise pass unseen.
      if (m.kind == "aggregate") return;
      m.missing_in = va ? c.b_label : c.a_label;
      (va ? m.d.n_a : m.d.n_b) = (va ? va : vb)->size();
      (va ? m.d.mean_a : m.d.mean_b) = stats::mean(va ? *va : *vb);
      m.d.sentence = fmt::format("{} {}: missing in {}", m.kind, m.subject, m.missing_in);
      m.fails = true;
      c.metrics.push_back(std::move(m));
      return;
    }
    // Many links judged at 0.05 each would call some "slower" by chance: each kind shares 0.05.
    m.alpha = o.verdict.alpha / static_cast<double>(family[m.kind]);
    stats::VerdictOptions vo = o.verdict;
    vo.alpha = m.alpha;
    m.d = stats::decide(*va, *vb, c.b_label, vo);
    max_a = std::max(max_a, va->size());
    max_b = std::max(max_b, vb->size());
    const auto slash = m.subject.find('/');
    const auto e = m.kind == "link"        ? o.expect.for_link(m.subject.substr(0, slash), m.subject.substr(slash + 1),
                                                               link_speed(a, m.subject), link_speed(b, m.subject))
                   : m.kind == "aggregate" ? o.expect.gain()
                                           : std::nullopt;
    if (e) {
      m.expected_pct = e->pct;
      m.expectation = e->reason;
    }
    const int moved = int{m.d.direction == stats::Direction::faster} - int{m.d.direction == stats::Direction::slower};
    m.fails = m.kind != "member" && misses(m.expected_pct, e && std::abs(e->pct) < o.verdict.min_effect_pct, moved,
                                           m.d.change_pct, std::max(5.0, m.d.pm_pct));
    if (m.kind == "aggregate") c.verdicts.push_back((m.step.empty() ? "" : m.step + ": ") + m.d.sentence);
    c.metrics.push_back(std::move(m));
  });
  // The judged quantities first, then those missing on a side (before's, then after's).
  std::stable_partition(c.metrics.begin(), c.metrics.end(), [](const TrialMetric& m) { return m.missing_in.empty(); });
  for (const auto& [kind, n] : family) {
    if (n < 2) continue;
    const double need = o.verdict.alpha / static_cast<double>(n);
    if (stats::min_p(max_a, max_b) > need) {
      c.notes.push_back(
          fmt::format("{} {}s are judged at p < {:.2g} each (0.05 shared among them); {} vs {} trials cannot reach "
                      "it (at best p = {:.2g}): repeat more for a verdict per {}",
                      n, kind, need, max_a, max_b, stats::min_p(max_a, max_b), kind));
    }
  }
  for (const auto* side : {&a, &b}) {
    for (const auto& e : side->excluded)
      c.notes.push_back(fmt::format("excluded from {}: {}", side == &a ? c.a_label : c.b_label, e));
  }
  c.unreplicated = max_a < 2 || max_b < 2;
  if (c.unreplicated) {
    c.notes.push_back("unreplicated: with a single trial on a side, a change cannot be told from run-to-run noise");
  }
  if (!a.trials.empty() && !b.trials.empty()) {
    for (auto& n : settings_differ(a.trials.front().result, b.trials.front().result)) c.notes.push_back(std::move(n));
  }
  c.failed = std::ranges::any_of(c.metrics, &TrialMetric::fails);
  return c;
}

std::string render_trial_comparison_text(const TrialComparison& c) {
  std::size_t na = 0, nb = 0;
  for (const auto& m : c.metrics) {
    na = std::max(na, m.d.n_a);
    nb = std::max(nb, m.d.n_b);
  }
  std::string out = fmt::format("compare {} ({}, {} trials) -> {} ({}, {} trials)\n", c.a_label, c.a_file, na,
                                c.b_label, c.b_file, nb);
  const auto section = [&](const char* kind, const char* title) {
    std::string rows;
    std::size_t count = 0;
    double alpha = 0;
    for (const auto& m : c.metrics) {
      if (m.kind != kind) continue;
      ++count;
      alpha = m.alpha;
      const std::string name = m.kind == "aggregate" ? (m.step.empty() ? "aggregate" : m.step)
                                                     : (m.step.empty() ? m.subject : m.step + " " + m.subject);
      if (!m.missing_in.empty()) {
        const auto side = [](std::size_t n, double v) { return n > 0 ? fmt::format("{:.1f}", v) : std::string("-"); };
        rows += fmt::format("  {:<30} {:>9} {:>9}  missing in {}  <-- FAIL\n", name, side(m.d.n_a, m.d.mean_a),
                            side(m.d.n_b, m.d.mean_b), m.missing_in);
        continue;
      }
      rows += fmt::format(
          "  {:<30} {:>9.1f} {:>9.1f} {:>8} {:>18} {:>6} {:>7} {:>8.2f}  {}{}\n", name, m.d.mean_a, m.d.mean_b,
          fmt::format("{:+.1f}%", m.d.change_pct),
          m.d.n_a > 1 || m.d.n_b > 1 ? fmt::format("[{:+.1f}, {:+.1f}]%", m.d.ci_lo_pct, m.d.ci_hi_pct) : "-",
          fmt::format("{:.1f}/{:.1f}", m.d.cv_a_pct, m.d.cv_b_pct),
          m.d.n_a > 1 && m.d.n_b > 1 ? fmt::format("{:.2g}", m.d.test.p) : "-", m.d.test.rank_biserial,
          stats::to_string(m.d.direction), m.fails ? "  <-- FAIL" : "");
    }
    if (count == 0) return;
    out += fmt::format("\n{} (MB/s; judged at p < {:.2g}{})\n", title, alpha,
                       count > 1 ? fmt::format(", {} compared", count) : "");
    out += fmt::format("  {:<30} {:>9} {:>9} {:>8} {:>18} {:>6} {:>7} {:>8}  {}\n", "", c.a_label.substr(0, 9),
                       c.b_label.substr(0, 9), "change", "95% CI", "cv %", "p", "effect", "verdict");
    out += rows;
  };
  section("aggregate", "Aggregate");
  section("link", "Links (payload, busier direction)");
  section("member", "Bond members (tx+rx)");
  out += "\n";
  for (const auto& m : c.metrics) {
    if (!m.expectation.empty() && m.kind == "link") {
      out += fmt::format("expected: {}{}: {:+.1f}% ({}){}\n", m.step.empty() ? "" : m.step + " ", m.subject,
                         *m.expected_pct, m.expectation, m.fails ? " <-- FAIL" : "");
    }
  }
  for (const auto& n : c.notes) out += "note: " + n + "\n";
  out += "effect: rank-biserial correlation (Cliff's delta), +1 when every trial of " + c.b_label +
         " beat every trial of " + c.a_label +
         "; p: two-sided Mann-Whitney U; 95% CI: bootstrap of the ratio of means\n";
  for (const auto& v : c.verdicts) out += "verdict: " + v + "\n";
  out += c.failed
             ? "result: FAIL (a significant regression, an expected gain not shown, or a link missing on one side)\n"
             : "result: PASS\n";
  return out;
}

void to_json(json& j, const TrialMetric& m) {
  FABPERF_JSON_FIELDS(j, m, step, kind, subject, alpha, expected_pct, fails);
  FABPERF_JSON_FIELDS(j, m.d, n_a, n_b, cv_a_pct, cv_b_pct, change_pct);
  FABPERF_JSON_FIELDS(j, m.d.test, rank_biserial);
  FABPERF_JSON_FIELDS(j["mann_whitney"], m.d.test, u_a, u_b, p, exact);
  j["mean_a_mb_per_s"] = m.d.mean_a;
  j["mean_b_mb_per_s"] = m.d.mean_b;
  j["ci95_lo_pct"] = m.d.ci_lo_pct;
  j["ci95_hi_pct"] = m.d.ci_hi_pct;
  j["direction"] = stats::to_string(m.d.direction);
  j["verdict"] = m.d.sentence;
  DocOut{j}("expectation", m.expectation, Need::may, Unknown::empty);
  DocOut{j}("missing_in", m.missing_in, Need::may, Unknown::empty);
}

json render_trial_comparison_json(const TrialComparison& c) {
  json j{{"schema", "fabperf.compare-trials"},
         {"schema_version", 1},
         {"a", {{"label", c.a_label}, {"file", c.a_file}}},
         {"b", {{"label", c.b_label}, {"file", c.b_file}}}};
  FABPERF_JSON_FIELDS(j, c, metrics, verdicts, notes, unreplicated, failed);
  return j;
}

std::string render_trial_spread(const std::vector<std::pair<std::string, double>>& trials) {
  std::vector<std::pair<std::string, std::vector<double>>> sets;
  for (const auto& t : trials) {
    auto it = std::find_if(sets.begin(), sets.end(), [&](const auto& e) { return e.first == t.first; });
    if (it == sets.end()) it = sets.insert(sets.end(), {t.first, {}});
    it->second.push_back(t.second);
  }
  std::string out;
  for (const auto& [step, v] : sets) {
    if (v.size() < 2) continue;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    const double m = stats::mean(v);
    out += fmt::format("{}: {} trials: mean {:.1f} MB/s, run-to-run cv {:.1f}%, min {:.1f}, max {:.1f}\n", step,
                       v.size(), m, m > 0 ? 100 * stats::stddev(v) / m : 0.0, *lo, *hi);
  }
  return out;
}

}  // namespace fabperf
