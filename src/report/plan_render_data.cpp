// PlanReport -> JSON (the model itself), CSV tables and JUnit XML, and the tables the text and
// HTML reports share. Formatting only.
#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/report/plan_report.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <charconv>
#include <cmath>

#include "report/result_json.hpp"
#include "report/text_table.hpp"

namespace fabperf {

using nlohmann::json;

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // XML 1.0 forbids most control characters even as references: show them, do not drop them.
        if (c < 0x20 && ch != '\n' && ch != '\t' && ch != '\r') {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string csv_field(std::string_view s) {
  // A text cell a spreadsheet would run as a formula (=, +, -, @, or a leading tab or CR) gets a
  // leading apostrophe (OWASP's advice); numbers, negative ones included, stay numbers.
  std::string neutral;
  if (!s.empty() && std::string_view("=+-@\t\r").find(s.front()) != std::string_view::npos) {
    double ignored = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), ignored);
    if (ec != std::errc() || end != s.data() + s.size()) {
      neutral = "'" + std::string(s);
      s = neutral;
    }
  }
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (const char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::string PlanCells::num(std::optional<double> v) const {
  if (!v) return "n/a";
  const double x = *v;
  if (!html) return fmt::format("{:g}", std::round(x * 100) / 100);
  if (x == std::floor(x) || std::fabs(x) >= 100) return fmt::format("{:.0f}", x + 0.0);  // + 0.0: -0 is 0
  return std::fabs(x) >= 10 ? fmt::format("{:.1f}", x) : fmt::format("{:.2g}", x);
}

std::string PlanCells::text(std::string_view s) const {
  return html ? xml_escape(s) : std::string(s);
}

std::string PlanCells::limit(double v) const {
  return html ? fmt::format("{:g}", v) : num(v);
}

std::string PlanCells::us(double v) const {
  if (!html) return text::us(v);
  if (v >= 1e6) return fmt::format("{:.3g} s", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.3g} ms", v / 1e3);
  return fmt::format("{:.3g} us", v);
}

std::string status_class(const std::string& status) {
  if (status == "done" || status == "ok" || status == "PASS" || status == "pass") return "ok";
  if (status == "interrupted" || status == "INCOMPLETE" || status == "NO KPI") return "warn";
  return "bad";
}

std::string PlanCells::status(const std::string& s) const {
  return html ? "<span class=\"pill " + status_class(s) + "\">" + xml_escape(s) + "</span>" : s;
}

bool subject_failed(const PlanReport& r, const StepView& s, const std::string& scope, const std::string& subject) {
  return std::ranges::any_of(r.kpis, [&](const KpiCheck& k) {
    return k.scope == scope && k.subject == subject && !k.pass && (k.step == s.id || (!k.step && k.test == s.test));
  });
}

PlanTable kpi_group_table(const PlanReport& r, const PlanCells& c) {
  PlanTable t{{"KPI", "test", "scope", ">threshold", ">checks", ">failed", ">worst", "worst at", "result"}};
  for (const auto& g : r.kpi_groups) {
    t.rows.push_back({g.failed > 0,
                      {c.text(g.kpi), c.text(g.test.value_or("(plan)")), c.text(g.scope),
                       fmt::format("{} {} {}", c.text(g.op), c.limit(g.threshold), c.text(g.unit)),
                       std::to_string(g.passed + g.failed), std::to_string(g.failed), c.num(g.worst),
                       c.text(g.worst_subject.empty() ? "-" : g.worst_subject), c.status(g.failed ? "FAIL" : "pass")}});
  }
  return t;
}

PlanTable failed_check_table(const PlanReport& r, const PlanCells& c) {
  PlanTable t{{"KPI", "step", "subject", ">value", c.html ? ">required" : ">threshold", "detail"}};
  for (const auto& k : r.kpis) {
    if (k.pass) continue;
    t.rows.push_back(
        {true,
         {c.text(k.kpi), c.text(k.step.value_or(k.test.value_or("(plan)"))),
          c.text(k.subject.empty() ? "-" : k.subject), fmt::format("{} {}", c.num(k.value), c.text(k.unit)),
          fmt::format("{} {}", c.text(k.op), c.limit(k.threshold)), c.text(k.detail)}});
  }
  return t;
}

PlanTable step_table(const PlanReport& r, const PlanCells& c) {
  const char* arrow = c.html ? "&rarr;" : "->";
  PlanTable t{{">#", "step", "pattern", "status", fmt::format("clients {} servers", arrow), ">MB/s", ">Gbit/s",
               ">time s", "KPIs"}};
  for (const auto& s : r.steps) {
    if (!s.listed) continue;
    const char* sep = c.html ? ", " : ",";
    t.rows.push_back(
        {s.kpi_failed || s.status == "failed",
         {std::to_string(s.index), c.html ? fmt::format("<a href=\"#step-{}\">{}</a>", s.index, c.text(s.id)) : s.id,
          c.text(s.pattern), c.status(s.status),
          fmt::format("{} {} {}", c.text(fmt::format("{}", fmt::join(s.clients, sep))), arrow,
                      c.text(fmt::format("{}", fmt::join(s.servers, sep)))),
          s.measured ? fmt::format("{:.0f}", s.mb_per_s) : "-", s.measured ? fmt::format("{:.2f}", s.gbit_per_s) : "-",
          fmt::format("{:.1f}", s.duration_s),
          s.kpi_passed + s.kpi_failed ? fmt::format("{} ok, {} failed", s.kpi_passed, s.kpi_failed) : "-"}});
  }
  return t;
}

PlanTable node_table(const PlanReport& r, const StepView& s, const PlanCells& c) {
  const std::string us = c.html ? "" : " us";
  PlanTable t{
      {"node", "role", "status", ">tx MB/s", ">rx MB/s", ">CPU %", ">retrans", ">p50" + us, ">p99" + us, ">max" + us}};
  for (const auto& n : s.nodes) {
    const auto& l = n.latency ? n.latency : n.delay;
    t.rows.push_back(
        {subject_failed(r, s, "node", n.name),
         {c.text(n.name), c.text(n.role), c.status(std::string(to_string(n.status))), text::f1(n.tx_mb_per_s),
          text::f1(n.rx_mb_per_s), text::f0(n.cpu_busy_pct), text::count_or_dash(n.retrans_segs),
          l ? c.us(l->p50_us) : "-", l ? c.us(l->p99_us) : "-", l ? c.us(l->max_us) : "-"}});
  }
  return t;
}

// Keys: the field names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ResultLatency::Bucket, lo_us, hi_us, count)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ResultLatency, count, mean_us, min_us, p50_us, p90_us, p99_us, p999_us, max_us,
                                   buckets)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PairRow, client, server, mb_per_s, retrans, rtt_us)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SeriesPoint, t_s, mb_per_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Series, name, points)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PairMatrix, test, nodes, mb_per_s, min, max, cells)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KpiGroup, test, kpi, scope, op, threshold, unit, passed, failed, worst,
                                   worst_subject)
// The fields written as they are; step_json and render_plan_json add the rest (`listed` is not written).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepView, index, id, test, pattern, clients, servers, status, error, started_at,
                                   duration_s, measured, op, summary, mb_per_s, gbit_per_s, msg_per_s, window_s, pairs,
                                   series, findings, kpi_passed, kpi_failed)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PlanReport, source, kind, plan_name, plan_file, fabperf_version, started_at,
                                   finished, interrupted, steps_total, steps_done, steps_failed, steps_interrupted,
                                   steps_missing, resumed, verdict, verdict_reason, kpi_groups, kpi_passed, kpi_failed,
                                   matrices, notes, isolation)

namespace {
using jsonu::array_json;

json latency_json(const std::optional<ResultLatency>& l, const char* what) {
  if (!l) return nullptr;
  json j = *l;
  j["what"] = what;
  return j;
}

json node_row_json(const NodeReport& n) {
  return {{json_key(col::node), n.name},
          {json_key(col::role), n.role},
          {json_key(col::status), to_string(n.status)},
          {json_key(col::tx_mb_per_s), n.tx_mb_per_s},
          {json_key(col::rx_mb_per_s), n.rx_mb_per_s},
          {json_key(col::cpu_busy_pct), n.cpu_busy_pct},
          {json_key(col::retrans_segs), jsonu::nonneg(n.retrans_segs)},
          {"latency", n.latency ? latency_json(n.latency, "rpc") : latency_json(n.delay, "delay")}};
}

// The step's links, node by node.
json links_json(const StepView& s) {
  json out = json::array();
  for (const auto& n : s.nodes) {
    for (const auto& l : n.links) {
      out.push_back({{json_key(col::node), n.name},
                     {json_key(col::link), l.name},
                     {json_key(col::tx_mb_per_s), l.tx_mb_per_s},
                     {json_key(col::rx_mb_per_s), l.rx_mb_per_s},
                     {json_key(col::payload_mb_per_s), payload_mb_per_s_of(l)},
                     {json_key(col::speed_mbps), l.speed_mbps > 0 ? json(l.speed_mbps) : json()},
                     {json_key(col::utilization_pct), jsonu::nonneg(l.utilization_pct)},
                     {json_key(col::errors), errors_of(l)},
                     {json_key(col::drops), drops_of(l)}});
    }
  }
  return out;
}

json step_json(const StepView& s) {
  json j = s;
  j.update(
      {{"nodes", array_json(s.nodes, node_row_json)},
       {"links", links_json(s)},
       {"latency", latency_json(s.latency, "rpc")},
       {"delay", latency_json(s.delay, "delay")},
       {"counter_events", array_json(s.counter_events, [](const CounterEvent& ev) -> json {
          return {{"node", ev.node}, {"link", ev.subject}, {"t0_s", ev.t0_s}, {"t1_s", ev.t1_s}, {"text", ev.text}};
        })}});
  return j;
}

std::string num(double v) {
  return fmt::format("{:.3f}", v);
}

// A JSON report value as a CSV cell: fractions with 3 decimals, whole numbers and true/false as
// JSON writes them, null (unknown) empty.
std::string csv_cell(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  return v.is_number_float() ? num(v.get<double>()) : v.dump();
}

}  // namespace

json render_plan_json(const PlanReport& r) {
  json j = r;
  j.update({{"schema", "fabperf.plan-report"},
            {"version", 1},
            {"finished_at", r.finished ? json(r.finished_at) : json(nullptr)},
            {"exit_code", jsonu::nonneg(r.exit_code)},
            {"kpis", array_json(r.kpis, &JsonOut::encode<KpiCheck>)},  // the "kpi" records' fields
            {"steps", array_json(r.steps, step_json)}});
  return j;
}

std::string render_plan_csv(const PlanReport& r, const std::string& table) {
  std::string out;
  // A row: the step's columns, then the fields `keys` (paths in a row of the JSON report, `j`; the
  // header row, `j` null, names them by their last key): a CSV column is its JSON field, unknown empty.
  auto row = [&out](std::vector<std::string> fields, const std::vector<std::string>& keys, const json& j) {
    for (const auto& k : keys) {
      const json::json_pointer p("/" + k);
      fields.push_back(j.is_null() ? p.back() : j.contains(p) ? csv_cell(j[p]) : "");
    }
    for (std::size_t i = 0; i < fields.size(); ++i) out += (i > 0 ? "," : "") + csv_field(fields[i]);
    out += "\r\n";  // RFC 4180
  };
  const auto at = [](const StepView& s) { return std::vector<std::string>{std::to_string(s.index), s.id, s.test}; };
  const std::string si = "step_index";
  if (table == "steps") {
    const std::vector<std::string> keys{"node",           "role",          "status",       "tx_mb_per_s",
                                        "rx_mb_per_s",    "cpu_busy_pct",  "retrans_segs", "latency/p50_us",
                                        "latency/p99_us", "latency/max_us"};
    row({si, "step", "test", "pattern", "step_status", "op", "step_mb_per_s"}, keys, nullptr);
    for (const auto& s : r.steps) {
      auto step = at(s);
      step.insert(step.end(), {s.pattern, s.status, s.op, s.measured ? num(s.mb_per_s) : ""});
      if (s.nodes.empty()) row(step, keys, json::object());
      for (const auto& n : s.nodes) row(step, keys, node_row_json(n));
    }
  } else if (table == "pairs") {
    const std::vector<std::string> keys{"client", "server", "mb_per_s", "retrans", "rtt_us"};
    row({si, "step", "test", "pattern"}, keys, nullptr);
    for (const auto& s : r.steps) {
      auto step = at(s);
      step.push_back(s.pattern);
      for (const auto& p : s.pairs) row(step, keys, p);
    }
  } else if (table == "links") {
    const std::vector<std::string> keys{
        "node",   "link", "tx_mb_per_s", "rx_mb_per_s", "payload_mb_per_s", "speed_mbps", "utilization_pct",
        "errors", "drops"};
    row({si, "step", "test"}, keys, nullptr);
    for (const auto& s : r.steps) {
      for (const auto& l : links_json(s)) row(at(s), keys, l);
    }
  } else if (table == "kpis") {
    const std::vector<std::string> keys{"test", "step",      "kpi",  "scope", "subject", "value",
                                        "op",   "threshold", "unit", "pass",  "detail"};
    row({}, keys, nullptr);
    for (const auto& c : r.kpis) row({}, keys, JsonOut::encode(c));
  } else {
    throw UsageError(fmt::format("--table '{}': unknown CSV table (steps, pairs, links, kpis)", table));
  }
  return out;
}

std::string render_plan_junit(const PlanReport& r) {
  // One <testsuite> per test of the plan (checks with no test form the suite "plan"). Each KPI
  // check is a <testcase>; each step is one too, so a step that failed shows as an error even
  // when no KPI could be checked, and an interrupted one as skipped.
  struct Suite {
    std::string name;
    std::string body;
    int tests{0}, failures{0}, errors{0}, skipped{0};
    double time{0};
    // The suite's (or all suites') name and counts, as <testsuite> and <testsuites> carry them.
    [[nodiscard]] std::string attrs() const {
      return fmt::format("name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\"",
                         xml_escape(name), tests, failures, errors, skipped, time);
    }
  };
  std::vector<Suite> suites;
  const std::string prefix = "fabperf." + (r.plan_name.empty() ? std::string("plan") : r.plan_name);
  Suite all{prefix, "", 0, 0, 0, 0, 0};
  // A <testcase> in the suite of `test` and in the totals: `inner` its elements, `seconds` its time
  // (negative: none, written 0), `count` what else it counts as (failures, errors, skipped) if any.
  auto testcase = [&](const std::string& test, const std::string& name, double seconds, const std::string& inner,
                      int Suite::*count) {
    auto it = std::find_if(suites.begin(), suites.end(), [&](const Suite& s) { return s.name == prefix + "." + test; });
    if (it == suites.end()) it = suites.insert(it, {prefix + "." + test, "", 0, 0, 0, 0, 0});
    for (Suite* su : {&*it, &all}) {
      ++su->tests;
      su->time += std::max(seconds, 0.0);
      if (count) ++(su->*count);
    }
    it->body += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{}\">\n{}    </testcase>\n",
                            xml_escape(prefix + "." + test), xml_escape(name),
                            seconds < 0 ? "0" : fmt::format("{:.3f}", seconds), inner);
  };
  for (const auto& s : r.steps) {
    std::string inner = s.status == "failed"
                            ? fmt::format("      <error message=\"{}\" type=\"step-failed\">{}</error>\n",
                                          xml_escape(s.error.empty() ? "step failed" : s.error), xml_escape(s.error))
                        : s.status == "interrupted" ? "      <skipped message=\"interrupted\"/>\n"
                                                    : "";
    if (s.measured && !s.summary.empty())
      inner += fmt::format("      <system-out>{}</system-out>\n", xml_escape(s.summary));
    testcase(
        s.test,
        fmt::format("step {} ({}: {} -> {})", s.id, s.pattern, fmt::join(s.clients, ","), fmt::join(s.servers, ",")),
        s.duration_s, inner,
        s.status == "failed"        ? &Suite::errors
        : s.status == "interrupted" ? &Suite::skipped
                                    : nullptr);
  }
  for (const auto& c : r.kpis) {
    std::string name = c.kpi + " " + c.scope;
    if (!c.subject.empty()) name += " " + c.subject;
    if (c.step) name += " [" + *c.step + "]";
    const std::string measured =
        c.value ? fmt::format("{}: {:g} {} (required {} {:g})", c.kpi, *c.value, c.unit, c.op, c.threshold)
                : fmt::format("{}: not measured (required {} {:g} {})", c.kpi, c.op, c.threshold, c.unit);
    testcase(c.test.value_or("plan"), name, -1,
             c.pass ? fmt::format("      <system-out>{}</system-out>\n", xml_escape(measured))
                    : fmt::format("      <failure message=\"{}\" type=\"kpi\">{}</failure>\n",
                                  xml_escape(c.detail.empty() ? measured : c.detail), xml_escape(measured)),
             c.pass ? nullptr : &Suite::failures);
  }
  if (!r.finished || r.steps_missing > 0) {
    testcase("plan", "plan finished", -1,
             fmt::format("      <error message=\"{}\" type=\"incomplete\"/>\n",
                         xml_escape(fmt::format("the plan did not finish: {} of {} steps have a record", r.steps.size(),
                                                r.steps_total))),
             &Suite::errors);
  }
  std::string out = fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites {}>\n", all.attrs());
  for (const auto& s : suites) {
    out += fmt::format("  <testsuite {}{}>\n{}  </testsuite>\n", s.attrs(),
                       r.started_at.empty() ? "" : fmt::format(" timestamp=\"{}\"", xml_escape(r.started_at)), s.body);
  }
  return out + "</testsuites>\n";
}

}  // namespace fabperf
