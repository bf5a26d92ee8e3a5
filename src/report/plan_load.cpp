// Reading a results file: JSON Lines of schema "fabperf.plan-results" (docs/reports.md), or one
// `fabperf run --json` result. Every line is checked here, field by field, so that the model
// builder can read the records without guessing; a bad line names FILE:LINE and what is wrong.
#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/report/plan_report.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/report/result_doc.hpp>
#include "report/result_json.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fabperf {

using nlohmann::json;

namespace {

// A line's checks: every problem names FILE:LINE (and the record type); the reader of the records'
// field lists (plan_report.hpp), each value checked as it is read, in record order.
class LineError {
 public:
  LineError(std::string_view file, std::size_t line, std::string_view record, const json* j = nullptr)
      : file_(file), line_(line), record_(record), j_(j) {}

  [[noreturn]] void fail(const std::string& problem) const {
    if (record_.empty()) throw UsageError(fmt::format("{}:{}: {}", file_, line_, problem));
    throw UsageError(fmt::format("{}:{}: {} record: {}", file_, line_, record_, problem));
  }
  // The same checks, of another object of the line.
  [[nodiscard]] LineError of(const json& j) const { return {file_, line_, record_, &j}; }
  template <class T>
  T read() const {
    T m;
    fields(*this, m);
    return m;
  }
  const json& field(const char* name) const {
    const auto it = j_->find(name);
    if (it == j_->end()) fail(fmt::format("missing field '{}'", name));
    return *it;
  }
  // The field, which `ok` must accept ("field 'NAME' must be WHAT" when it does not).
  const json& field(const char* name, bool (json::*ok)() const noexcept, std::string_view what) const {
    const auto& v = field(name);
    if (!(v.*ok)()) fail(fmt::format("field '{}' must be {}", name, what));
    return v;
  }
  void operator()(const char* k, std::string& x) const {
    x = field(k, &json::is_string, "a string").get<std::string>();
  }
  void operator()(const char* k, double& x) const { x = field(k, &json::is_number, "a number").get<double>(); }
  void operator()(const char* k, bool& x) const { x = field(k, &json::is_boolean, "true or false").get<bool>(); }
  void operator()(const char* k, std::optional<std::string>& x) const {
    if (!field(k).is_null()) x = field(k, &json::is_string, "a string or null").get<std::string>();
  }
  void operator()(const char* k, std::optional<double>& x) const {
    if (!field(k).is_null()) x = field(k, &json::is_number, "a number").get<double>();
  }
  template <std::integral T>
  void operator()(const char* k, T& x, std::int64_t lo, std::int64_t hi) const {
    const auto& v = field(k);
    if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi) {
      fail(fmt::format("field '{}' must be a whole number in [{}, {}]", k, lo, hi));
    }
    x = v.get<T>();
  }
  void operator()(const char* k, std::vector<std::string>& x) const {
    const auto& v = field(k);
    if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); }))
      fail(fmt::format("field '{}' must be a list of names", k));
    x = v.get<std::vector<std::string>>();
  }
  void operator()(const char* k, std::string& x, OneOf allowed) const {
    (*this)(k, x);
    const auto values = split_list(allowed.list, ' ');
    if (std::find(values.begin(), values.end(), x) == values.end())
      fail(fmt::format("field '{}' is '{}'; expected one of: {}", k, x, fmt::join(values, ", ")));
  }
  template <class T, class... A>
  void opt(const char* k, T& x, const A&... a) const {
    if (j_->contains(k)) (*this)(k, x, a...);
  }
  void sparse(const char* k, auto&&... a) const { opt(k, a...); }

 private:
  std::string_view file_;
  std::size_t line_;
  std::string_view record_;
  const json* j_;
};

void check_plan(const json& j, const LineError& e) {
  const auto schema = j.contains("schema") && j["schema"].is_string() ? j["schema"].get<std::string>() : "";
  if (schema != kPlanResultsSchema) {
    e.fail(fmt::format("schema '{}' is not a fabperf plan results file (expected '{}')", schema, kPlanResultsSchema));
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kPlanResultsVersion) {
    e.fail(fmt::format("results version {} is not supported (this fabperf reads version {})",
                       j.contains("version") ? j["version"].dump() : "(none)", kPlanResultsVersion));
  }
  std::string text;
  int steps_total = 0;
  for (const char* k : {"fabperf_version", "started_at", "plan_file"}) e(k, text);
  e("steps_total", steps_total, 0, 1 << 24);
  const auto& plan = e.field("plan", &json::is_object, "an object");
  if (plan.contains("hosts")) {
    if (!plan["hosts"].is_array()) e.fail("'plan.hosts' must be a list");
    for (const auto& h : plan["hosts"]) {
      if (!h.is_object() || !h.contains("name") || !h["name"].is_string()) e.fail("'plan.hosts' entries need a 'name'");
    }
  }
}

// A "step" record's own fields, its result checked but not read.
StepHead read_step(const json& j, const LineError& e) {
  auto s = e.read<StepHead>();
  const bool has_result = j.contains("result") && !j["result"].is_null();
  // Enough of the result is checked that the model can rely on it.
  if (const auto p = has_result ? result_doc_problem(j["result"]) : ""; !p.empty()) e.fail("'result' has " + p);
  if (!has_result && s.status == "done") e.fail("status 'done' but no 'result'");
  return s;
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
  if (const auto p = result_doc_problem(r); !p.empty()) LineError(name, 1, "").fail("'result' has " + p);
  StepHead s;
  for (const auto& n : r["nodes"]) {
    const auto role = n.value("role", std::string{});
    const auto nm = n.value("node", std::string{});
    if (role.find("client") != std::string::npos) s.clients.push_back(nm);
    if (role.find("server") != std::string::npos) s.servers.push_back(nm);
  }
  const json settings = r.contains("settings") && r["settings"].is_object() ? r["settings"] : json::object();
  s.test = settings.value("test", std::string{"run"});
  s.id = s.base_id = s.test + "/0";
  s.pattern = "bipartite";
  s.status = r.value("interrupted", false) ? "interrupted" : "done";
  s.started_at = r.value("started_at", std::string{});
  if (const auto t = settings.find("time_ns"); t != settings.end() && t->is_number())
    s.duration_s = t->get<double>() / 1e9;
  raw.plan = {
      {"type", "plan"},
      {"schema", kPlanResultsSchema},
      {"version", kPlanResultsVersion},
      {"fabperf_version", r.value("fabperf_version", std::string{})},
      {"started_at", s.started_at},
      {"plan_file", ""},
      {"plan", {{"name", r.value("test_id", std::string{})}, {"hosts", json::array()}, {"tests", json::array()}}},
      {"steps_total", 1}};
  raw.end = PlanEnd{"", s.status == "interrupted", true, 0};
  raw.steps.push_back(plan_record("step", s));
  raw.steps.back()["result"] = std::move(r);
  return raw;
}

// The records of a JSON Lines file, one line at a time: a step's JSON lives only as long as its
// line unless the caller keeps it (`on_step` empty: raw.steps).
void read_lines(std::istream& in, const std::string& name, RawResults& raw, const StepSink& on_step) {
  std::map<std::string, json> steps;  // by id
  std::unordered_set<std::string> step_ids;
  std::unordered_map<std::string, std::size_t> kpi_at;  // by kpi_key: where in raw.kpis
  bool have_plan = false;
  std::size_t lineno = 0;
  std::string line;
  for (std::streamoff at = in.tellg(); std::getline(in, line); at = in.tellg()) {  // `at`: where `line` starts
    const bool last_unterminated = in.eof();
    ++lineno;
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
    const LineError e(name, lineno, type, &j);
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
      auto id = std::move(read_step(j, e).id);
      if (!step_ids.insert(id).second) ++raw.superseded_steps;
      if (on_step) {
        on_step(raw.plan, std::move(j), at);
      } else {
        steps[std::move(id)] = std::move(j);
      }
    } else if (type == "kpi") {
      auto k = e.read<KpiCheck>();
      const auto [slot, fresh] = kpi_at.emplace(kpi_key(k), raw.kpis.size());
      if (fresh) raw.kpis.emplace_back();
      raw.kpis[slot->second] = std::move(k);  // the last record of a check, in the place of its first
    } else if (type == "end") {
      raw.end = e.read<PlanEnd>();
    } else if (type == "isolation") {
      std::string test, text;
      bool slow = false;
      e("test", test);
      if (!e.field("findings").is_array() || !e.field("trace").is_array())
        e.fail("fields 'findings' and 'trace' must be lists");
      for (const auto& f : j["findings"]) {
        e.of(f)("text", text);
        e.of(f)("slow", slow);
        raw.isolation.push_back(fmt::format("{}: {}{}", test, slow ? "SLOW " : "", text));
      }
      // Nothing named: the trace's last word says why (no suspect, too few good peers, ...).
      if (j["findings"].empty() && !j["trace"].empty() && j["trace"].back().is_string())
        raw.isolation.push_back(test + ": " + j["trace"].back().get<std::string>());
    } else if (type == "hook" || type == "isolate" || type == "per_link") {
      // A/B hooks, isolation rounds, per-link sweeps: `fabperf compare` and the run's output show them.
    } else {
      bad.fail(fmt::format(
          "unknown record type \"{}\" (expected plan, step, kpi, end, hook, isolate, isolation or per_link)", type));
    }
  }
  for (auto& [id, s] : steps) raw.steps.push_back(std::move(s));
  std::ranges::stable_sort(raw.steps, {}, [](const json& s) { return s["index"].get<int>(); });
}

}  // namespace

RawResults load_results(std::istream& in, const std::string& name, const StepSink& on_step) {
  RawResults raw;
  raw.path = name;
  // A results file is JSON Lines, read a line at a time (an all-pairs of many hosts writes
  // gigabytes); anything whose first line is not a record is one JSON document, read whole.
  const auto start = in.tellg();
  std::string first;
  while (first.find_first_not_of(" \t\r") == std::string::npos) {
    if (!std::getline(in, first)) throw UsageError(fmt::format("{}: empty file: not a fabperf results file", name));
  }
  in.seekg(start);
  if (const json head = json::parse(first, nullptr, false); head.is_object() && head.contains("type")) {
    read_lines(in, name, raw, on_step);
    return raw;
  }
  const std::string text(std::istreambuf_iterator<char>(in), {});
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
      const auto nodes_at = text.find("\n  \"nodes\": [");
      const auto nodes_end = text.find("\n  ]", nodes_at);  // npos, as every find below, without "nodes"
      std::size_t complete = 0;
      for (auto at = text.find("\n    }", nodes_at); at < nodes_end; at = text.find("\n    }", at + 1)) ++complete;
      throw UsageError(fmt::format(
          "{}: a partial fabperf result: the run stopped while collecting results ({} complete node section{} written, "
          "no pairs, aggregate or summary); report reads complete results only",
          name, complete, complete == 1 ? "" : "s"));
    }
  }

  std::istringstream lines(text);  // not a document: each line's error names its line
  read_lines(lines, name, raw, on_step);
  return raw;
}

RawResults load_results(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("report: cannot read {}: {}", path, errno_text(errno)));
  return load_results(in, path);
}

StepHead step_head(const json& step) {
  return LineError("step", 0, "step", &step).read<StepHead>();  // load_results checked it: no error names a line
}

}  // namespace fabperf
