// Reading a results file: JSON Lines of schema "fabperf.plan-results" (docs/reports.md), or one
// `fabperf run --json` result. Every line is checked here, field by field, so that the model
// builder can read the records without guessing; a bad line names FILE:LINE and what is wrong.
#include <fabperf/core/error.hpp>
#include <fabperf/report/plan_report.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/report/result_doc.hpp>
#include "report/result_json.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fabperf {

using nlohmann::json;

namespace {

class LineError {
 public:
  LineError(std::string_view file, std::size_t line, std::string_view record)
      : file_(file), line_(line), record_(record) {}

  [[noreturn]] void fail(const std::string& problem) const {
    if (record_.empty()) throw UsageError(fmt::format("{}:{}: {}", file_, line_, problem));
    throw UsageError(fmt::format("{}:{}: {} record: {}", file_, line_, record_, problem));
  }
  const json& field(const json& j, const char* name) const {
    const auto it = j.find(name);
    if (it == j.end()) fail(fmt::format("missing field '{}'", name));
    return *it;
  }
  // The field, which `ok` must accept ("field 'NAME' must be WHAT" when it does not).
  const json& field(const json& j, const char* name, bool (json::*ok)() const noexcept, std::string_view what) const {
    const auto& v = field(j, name);
    if (!(v.*ok)()) fail(fmt::format("field '{}' must be {}", name, what));
    return v;
  }
  // Each check returns the value it checked, so a record is decoded in the same pass.
  const std::string& string(const json& j, const char* name) const {
    return field(j, name, &json::is_string, "a string").get_ref<const std::string&>();
  }
  std::optional<std::string> string_or_null(const json& j, const char* name) const {
    if (field(j, name).is_null()) return std::nullopt;
    return field(j, name, &json::is_string, "a string or null").get<std::string>();
  }
  double number(const json& j, const char* name) const {
    return field(j, name, &json::is_number, "a number").get<double>();
  }
  bool boolean(const json& j, const char* name) const {
    return field(j, name, &json::is_boolean, "true or false").get<bool>();
  }
  std::int64_t integer(const json& j, const char* name, std::int64_t lo, std::int64_t hi) const {
    const auto& v = field(j, name);
    if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi) {
      fail(fmt::format("field '{}' must be a whole number in [{}, {}]", name, lo, hi));
    }
    return v.get<std::int64_t>();
  }
  std::vector<std::string> strings(const json& j, const char* name) const {
    const auto& v = field(j, name);
    if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); }))
      fail(fmt::format("field '{}' must be a list of names", name));
    return v.get<std::vector<std::string>>();
  }
  const std::string& one_of(const json& j, const char* name, std::initializer_list<const char*> allowed) const {
    const auto& s = string(j, name);
    std::string list;
    for (const char* a : allowed) {
      if (s == a) return s;
      list += list.empty() ? a : fmt::format(", {}", a);
    }
    fail(fmt::format("field '{}' is '{}'; expected one of: {}", name, s, list));
  }

 private:
  std::string_view file_;
  std::size_t line_;
  std::string_view record_;
};

// A result as `fabperf run --json` writes it; enough is checked that the model can rely on it.
void check_run_result(const json& r, const LineError& e) {
  if (const auto problem = result_doc_problem(r); !problem.empty()) e.fail("'result' has " + problem);
}

void check_plan(const json& j, const LineError& e) {
  const auto schema = j.contains("schema") && j["schema"].is_string() ? j["schema"].get<std::string>() : "";
  if (schema != kPlanResultsSchema) {
    e.fail(fmt::format("schema '{}' is not a fabperf plan results file (expected '{}')", schema, kPlanResultsSchema));
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kPlanResultsVersion) {
    e.fail(fmt::format("results version {} is not supported (this fabperf reads version {})",
                       j.contains("version") ? j["version"].dump() : "(none)", kPlanResultsVersion));
  }
  e.string(j, "fabperf_version");
  e.string(j, "started_at");
  e.string(j, "plan_file");
  e.integer(j, "steps_total", 0, 1 << 24);
  const auto& plan = e.field(j, "plan");
  if (!plan.is_object()) e.fail("field 'plan' must be an object");
  if (plan.contains("hosts")) {
    if (!plan["hosts"].is_array()) e.fail("'plan.hosts' must be a list");
    for (const auto& h : plan["hosts"]) {
      if (!h.is_object() || !h.contains("name") || !h["name"].is_string()) e.fail("'plan.hosts' entries need a 'name'");
    }
  }
}

// The one decoder of a "step" record's own fields, its result checked but not read (step_head).
StepView read_step(const json& j, const LineError& e) {
  StepView s;
  s.index = static_cast<int>(e.integer(j, "index", 0, 1 << 24));
  s.id = e.string(j, "id");
  s.test = e.string(j, "test");
  s.pattern = e.one_of(
      j, "pattern",
      {"bipartite", "pairs", "each-vs-rest", "halves", "all-pairs", "ring", "incast", "broadcast", "all-to-all"});
  s.clients = e.strings(j, "clients");
  s.servers = e.strings(j, "servers");
  s.status = e.one_of(j, "status", {"done", "failed", "interrupted"});
  if (j.contains("error")) s.error = e.string(j, "error");
  s.started_at = e.string(j, "started_at");
  s.duration_s = e.number(j, "duration_s");
  const bool has_result = j.contains("result") && !j["result"].is_null();
  if (has_result) check_run_result(j["result"], e);
  if (!has_result && s.status == "done") e.fail("status 'done' but no 'result'");
  return s;
}

// The one decoder of a "kpi" record (to_json is its encoder); --resume and the report both read
// checks through it.
KpiCheck read_kpi(const json& j, const LineError& e) {
  // A braced list is evaluated left to right: the first bad field, in record order, is named.
  return KpiCheck{e.string_or_null(j, "test"), e.string_or_null(j, "step"), e.string(j, "kpi"),
                  e.one_of(j, "scope", {"node", "pair", "link", "aggregate", "step"}), e.string(j, "subject"),
                  // null: could not be measured
                  e.field(j, "value").is_null() ? std::nullopt : std::optional(e.number(j, "value")),
                  e.number(j, "threshold"), e.one_of(j, "op", {">=", "<="}), e.string(j, "unit"), e.boolean(j, "pass"),
                  e.string(j, "detail")};
}

void check_end(const json& j, const LineError& e) {
  e.string(j, "finished_at");
  e.boolean(j, "interrupted");
  e.boolean(j, "passed");
  e.integer(j, "exit_code", 0, 4);
}

std::string kpi_key(const KpiCheck& k) {
  return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}", k.test.value_or("\x1e"), k.step.value_or("\x1e"), k.kpi, k.scope,
                     k.subject);
}

// A single `fabperf run --json` result as a one-step plan with no KPIs.
RawResults from_single_run(json r, const std::string& name) {
  RawResults raw;
  raw.path = name;
  raw.single_run = true;
  const LineError e(name, 1, "");
  check_run_result(r, e);
  std::vector<std::string> clients, servers;
  for (const auto& n : r["nodes"]) {
    const auto role = n.value("role", std::string{});
    const auto nm = n.value("node", std::string{});
    if (role.find("client") != std::string::npos) clients.push_back(nm);
    if (role.find("server") != std::string::npos) servers.push_back(nm);
  }
  const std::string test = r.contains("settings") ? r["settings"].value("test", std::string{"run"}) : "run";
  raw.plan = {
      {"type", "plan"},
      {"schema", kPlanResultsSchema},
      {"version", kPlanResultsVersion},
      {"fabperf_version", r.value("fabperf_version", std::string{})},
      {"started_at", r.value("started_at", std::string{})},
      {"plan_file", ""},
      {"plan", {{"name", r.value("test_id", std::string{})}, {"hosts", json::array()}, {"tests", json::array()}}},
      {"steps_total", 1}};
  const bool interrupted = r.value("interrupted", false);
  raw.steps.push_back({{"type", "step"},
                       {"index", 0},
                       {"id", test + "/0"},
                       {"test", test},
                       {"pattern", "bipartite"},
                       {"clients", clients},
                       {"servers", servers},
                       {"status", interrupted ? "interrupted" : "done"},
                       {"error", ""},
                       {"started_at", r.value("started_at", std::string{})},
                       {"duration_s", r.contains("settings") && r["settings"].contains("time_ns") &&
                                              r["settings"]["time_ns"].is_number()
                                          ? r["settings"]["time_ns"].get<double>() / 1e9
                                          : 0.0},
                       {"result", std::move(r)}});
  raw.end =
      json{{"type", "end"}, {"finished_at", ""}, {"interrupted", interrupted}, {"passed", true}, {"exit_code", 0}};
  return raw;
}

// The records of a JSON Lines file, one line at a time: a step's JSON lives only as long as its
// line unless the caller keeps it (`on_step` empty: raw.steps).
struct FirstLine {
  std::string text;
  std::size_t number{0};
  bool unterminated{false};
  std::streamoff at{-1};  // where it starts in the stream
};

void read_lines(std::istream& in, FirstLine first, const std::string& name, RawResults& raw, const StepSink& on_step) {
  std::map<std::string, json> steps;  // by id
  std::unordered_set<std::string> step_ids;
  std::unordered_map<std::string, std::size_t> kpi_at;  // by kpi_key: where in raw.kpis
  bool have_plan = false;
  std::size_t lineno = first.number;
  std::string line = std::move(first.text);
  bool last_unterminated = first.unterminated;
  std::streamoff at = first.at;  // of `line`
  auto next = [&] {
    at = in.tellg();
    if (!std::getline(in, line)) return false;
    last_unterminated = in.eof();
    ++lineno;
    return true;
  };
  for (bool have = true; have; have = next()) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const LineError bad(name, lineno, "");
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      // The writer appends whole lines and flushes each; only a crash mid-write leaves a last line
      // without its newline. What came before it is intact and is reported.
      if (last_unterminated && have_plan) {
        raw.truncated_line = lineno;
        break;
      }
      bad.fail("not valid JSON");
    }
    if (!j.is_object()) bad.fail("expected a JSON object");
    if (!j.contains("type") || !j["type"].is_string()) bad.fail("record has no \"type\" (plan, step, kpi or end)");
    const auto type = j["type"].get<std::string>();
    const LineError e(name, lineno, type);
    if (!have_plan && type != "plan")
      bad.fail(fmt::format("the first record must be the \"plan\" header, found \"{}\"", type));
    if (type == "plan") {
      check_plan(j, e);
      if (!have_plan) {
        raw.plan = std::move(j);
        have_plan = true;
      } else {
        ++raw.resumed;
        raw.end.reset();  // a resumed run: finished only when a later "end" says so
      }
    } else if (type == "step") {
      auto id = read_step(j, e).id;
      if (!step_ids.insert(id).second) ++raw.superseded_steps;
      if (on_step) {
        on_step(raw.plan, std::move(j), at);
      } else {
        steps[std::move(id)] = std::move(j);
      }
    } else if (type == "kpi") {
      auto k = read_kpi(j, e);
      const auto [slot, fresh] = kpi_at.emplace(kpi_key(k), raw.kpis.size());
      if (fresh) raw.kpis.emplace_back();
      raw.kpis[slot->second] = std::move(k);  // the last record of a check, in the place of its first
    } else if (type == "end") {
      check_end(j, e);
      raw.end = std::move(j);
    } else if (type == "isolation") {
      e.string(j, "test");
      if (!e.field(j, "findings").is_array() || !e.field(j, "trace").is_array())
        e.fail("fields 'findings' and 'trace' must be lists");
      for (const auto& f : j["findings"]) {
        e.string(f, "text");
        e.boolean(f, "slow");
      }
      raw.isolation.push_back(std::move(j));
    } else if (type == "hook" || type == "isolate" || type == "per_link") {
      // A/B hooks, isolation rounds, per-link sweeps: `fabperf compare` and the run's output show them.
    } else {
      bad.fail(fmt::format(
          "unknown record type \"{}\" (expected plan, step, kpi, end, hook, isolate, isolation or per_link)", type));
    }
  }
  for (auto& [id, s] : steps) raw.steps.push_back(std::move(s));
  std::stable_sort(raw.steps.begin(), raw.steps.end(),
                   [](const json& a, const json& b) { return a["index"].get<int>() < b["index"].get<int>(); });
}

}  // namespace

RawResults load_results(std::istream& in, const std::string& name, const StepSink& on_step) {
  RawResults raw;
  raw.path = name;
  // A results file is JSON Lines, read a line at a time (an all-pairs of many hosts writes
  // gigabytes); anything whose first line is not a record is one JSON document, read whole.
  FirstLine first;
  while (first.text.find_first_not_of(" \t\r") == std::string::npos) {
    first.at = in.tellg();
    if (!std::getline(in, first.text))
      throw UsageError(fmt::format("{}: empty file: not a fabperf results file", name));
    first.unterminated = in.eof();
    ++first.number;
  }
  if (const json head = json::parse(first.text, nullptr, false); head.is_object() && head.contains("type")) {
    read_lines(in, std::move(first), name, raw, on_step);
    return raw;
  }
  std::stringstream ss;
  ss << std::string(first.number - 1, '\n') << first.text << '\n' << in.rdbuf();
  const std::string text = ss.str();
  // A whole-file JSON document (pretty-printed, as `fabperf run --json` writes) is a single run.
  {
    json whole = json::parse(text, nullptr, false);
    if (!whole.is_discarded() && whole.is_object() && !whole.contains("type")) {
      const auto schema = whole.value("schema", std::string{});
      if (schema == kResultSchema) {
        raw = from_single_run(std::move(whole), name);
        if (on_step) {
          for (auto& st : raw.steps) on_step(raw.plan, std::move(st), -1);
          raw.steps.clear();
        }
        return raw;
      }
      throw UsageError(
          fmt::format("{}: schema '{}' is neither '{}' nor '{}'", name, schema, kPlanResultsSchema, kResultSchema));
    }
  }
  // A run's result cut short: `fabperf run --json` writes the header and each node's section as its
  // result arrives, and the rest at the end (docs/usage.md, "Written as collected").
  {
    const auto begin = text.find_first_not_of(" \t\r\n");
    const auto schema_at = text.find("\"schema\": \"fabperf.result\"");
    if (text[begin] == '{' && schema_at != std::string::npos && schema_at < 64) {
      std::size_t complete = 0;
      const auto nodes_at = text.find("\n  \"nodes\": [");
      if (nodes_at != std::string::npos) {
        const auto nodes_end = text.find("\n  ]", nodes_at);
        for (auto at = text.find("\n    }", nodes_at); at != std::string::npos && at < nodes_end;
             at = text.find("\n    }", at + 1)) {
          ++complete;
        }
      }
      throw UsageError(fmt::format(
          "{}: a partial fabperf result: the run stopped while collecting results ({} complete node section{} written, "
          "no pairs, aggregate or summary); report reads complete results only",
          name, complete, complete == 1 ? "" : "s"));
    }
  }

  std::istringstream lines(text);  // not a document: each line's error names its line
  read_lines(lines, FirstLine{}, name, raw, on_step);
  return raw;
}

RawResults load_results(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("report: cannot read {}: {}", path, errno_text(errno)));
  return load_results(in, path);
}

StepView step_head(const json& step) {
  return read_step(step, LineError("step", 0, "step"));  // load_results checked it: no error names a line
}

// Keys: the field names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KpiCheck, test, step, kpi, scope, subject, value, threshold, op, unit, pass, detail)

json to_json(const KpiCheck& c) {
  json j = c;
  j["type"] = "kpi";
  return j;
}

}  // namespace fabperf
