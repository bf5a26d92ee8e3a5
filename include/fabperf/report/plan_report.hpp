// `fabperf report`: the results of a plan (JSON Lines written by `fabperf run --plan ...
// --results FILE`, schema "fabperf.plan-results") or of one run (`fabperf run --json FILE`)
// turned into a PlanReport view model, then formatted as text, JSON, CSV, JUnit XML or one
// self-contained HTML page. Three stages, each testable alone:
//   load_results()       file -> RawResults (every malformed line: UsageError "FILE:LINE: ...")
//   build_plan_report()  RawResults -> PlanReport (all arithmetic: aggregates, matrix, verdict)
//   render_plan_*()      PlanReport -> text (formatting only; columns from units.hpp)
// The line format is documented in docs/reports.md.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fabperf/core/fields.hpp>
#include <fabperf/report/result_doc.hpp>

namespace fabperf {

inline constexpr const char* kPlanResultsSchema = "fabperf.plan-results";
inline constexpr int kPlanResultsVersion = 1;

// The results file's records (docs/results-format.md): each type's `fields` names its keys once,
// for the writer (plan_record) and load_results alike, which checks each value as it reads it:
// v(key, member) by its type, v(key, whole number, lo, hi), v(key, text, OneOf{"a b"}).
// v.opt(): read only when present (older files); v.sparse(): also written only when not empty.
struct OneOf {
  std::string_view list;  // the values, a space between them
};
// The record of type `type` that m's fields make.
template <class T>
nlohmann::json plan_record(const char* type, const T& m) {
  nlohmann::json j = JsonOut::encode(m);
  j["type"] = type;
  return j;
}

// One KPI check: the "kpi" record of a results file, as the run wrote it and the report and
// --resume read it back.
struct KpiCheck {
  std::optional<std::string> test;  // null: plan-wide
  std::optional<std::string> step;  // null: over the whole test (or plan)
  std::string kpi;
  std::string scope;            // node, pair, link, aggregate, step
  std::string subject;          // "n1", "n1->n2", "n1/eth0" or ""
  std::optional<double> value;  // null: could not be measured (then pass is false)
  double threshold{0};
  std::string op;  // ">=" or "<="
  std::string unit;
  bool pass{false};
  std::string detail;
};
// In record order: the first bad field is the one named.
void fields(auto& v, KpiCheck& m) {
  v("test", m.test);
  v("step", m.step);
  v("kpi", m.kpi);
  v("scope", m.scope, OneOf{"node pair link aggregate step"});
  v("subject", m.subject);
  v("value", m.value);
  v("threshold", m.threshold);
  v("op", m.op, OneOf{">= <="});
  v("unit", m.unit);
  v("pass", m.pass);
  v("detail", m.detail);
}
inline nlohmann::json to_json(const KpiCheck& c) {
  return plan_record("kpi", c);
}

// A "step" record's own fields (its "result" and "figures" aside).
struct StepHead {
  int index{0};
  std::string id;
  std::string test;
  std::string pattern;
  std::vector<std::string> clients;  // the plan's host names
  std::vector<std::string> servers;
  std::string status;  // done, failed, interrupted
  std::string error;
  std::string started_at;
  double duration_s{0};
  std::string base_id;  // TESTNAME/K: the same step in every trial and configuration
  std::uint32_t trial{1};
  std::string config;  // A/B: "A" or "B"
};
void fields(auto& v, StepHead& m) {
  v("index", m.index, 0, 1 << 24);
  v("id", m.id);
  v("test", m.test);
  v("pattern", m.pattern, OneOf{"bipartite pairs each-vs-rest halves all-pairs ring incast broadcast all-to-all"});
  v("clients", m.clients);
  v("servers", m.servers);
  v("status", m.status, OneOf{"done failed interrupted"});
  v.opt("error", m.error);
  v("started_at", m.started_at);
  v("duration_s", m.duration_s);
  v.opt("base_id", m.base_id);
  v.opt("trial", m.trial, 0, 1 << 24);
  v.sparse("config", m.config);
}

// The "end" record: the plan finished (or stopped) and how.
struct PlanEnd {
  std::string finished_at;
  bool interrupted{false};
  bool passed{false};
  int exit_code{0};
};
void fields(auto& v, PlanEnd& m) {
  v("finished_at", m.finished_at);
  v("interrupted", m.interrupted);
  v("passed", m.passed);
  v("exit_code", m.exit_code, 0, 4);
}

// What the file held, validated line by line but not yet interpreted.
struct RawResults {
  std::string path;
  bool single_run{false};              // a plain `fabperf run --json` result, not a plan results file
  nlohmann::json plan;                 // the "plan" line (for a single run: a synthesized header)
  std::vector<nlohmann::json> steps;   // one per step id, the last record of that id, by index
  std::vector<KpiCheck> kpis;          // one per check key, the last record of that key
  std::optional<PlanEnd> end;          // the "end" line, when the plan finished
  std::vector<std::string> isolation;  // what the "isolation" lines named: "TEST: finding" each
  int resumed{0};                      // how many "plan" lines after the first (resumed runs)
  int superseded_steps{0};             // step records replaced by a later record of the same id
  std::size_t truncated_line{0};       // a last line cut off mid-write (ignored), 0 if none
};

// Reads a results file; throws UsageError naming FILE:LINE for every malformed line, an unknown
// schema or version. A file that ends without "end" is accepted (the plan did not finish).
RawResults load_results(const std::string& path);
// Receives each checked step record as it is read (and the plan header, which comes first, and
// where the record's line starts in the stream, -1 when it was not a line of it); records of a
// step id read again later come again (the last one counts).
using StepSink = std::function<void(const nlohmann::json& plan, nlohmann::json&& step, std::streamoff at)>;
// The same from a stream; `name` is used in messages. With `on_step`, steps go there, one line at
// a time, instead of into RawResults::steps: a results file of gigabytes is never held whole.
RawResults load_results(std::istream& in, const std::string& name, const StepSink& on_step = {});

struct PairRow {
  std::string client;  // the plan's host names, as the step's nodes
  std::string server;
  double mb_per_s{0};
  std::uint64_t retrans{0};
  std::uint32_t rtt_us{0};
};

struct SeriesPoint {
  double t_s{0};
  double mb_per_s{0};
};

struct Series {
  std::string name;  // "aggregate" or a node name
  std::vector<SeriesPoint> points;
};

// A dip the step's counter diagnosis found (docs/counters.md) on a node: its link (or "node"),
// when, and the sentence naming the counters that rose.
struct CounterEvent : Dip {
  std::string node;
};

struct StepView : StepHead {
  bool measured{false};  // the step has a result
  std::string op;        // write, read, ... (from the result's settings)
  std::string summary;   // nsdperf's one-line result
  double mb_per_s{0};
  double gbit_per_s{0};
  double msg_per_s{0};
  double window_s{0};
  // The result's nodes, each `node` the plan's host name when it could be matched, else the name
  // the run used; without their intervals, counters and bonds (series and counter_events hold
  // what the report shows of them).
  std::vector<NodeReport> nodes;
  std::vector<PairRow> pairs;
  std::optional<ResultLatency> latency;  // all clients merged: request latency ("rpc")
  std::optional<ResultLatency> delay;    // ping round trips under load ("delay")
  std::vector<Series> series;            // aggregate first, then one per node that sent data
  std::vector<std::string> findings;
  std::vector<CounterEvent> counter_events;  // dips and the counters that rose in them
  int kpi_passed{0};
  int kpi_failed{0};
  // Whether the reports for people (text, HTML) list it: every step of a plan of up to
  // kListAllSteps steps; of a larger one, those that need attention (PlanReport::notes says which).
  // JSON and CSV carry every step.
  bool listed{true};
};

// The all-pairs matrix of one test: cell [c][s] is client c -> server s in MB/s.
struct PairMatrix {
  std::string test;
  std::vector<std::string> nodes;
  std::vector<std::vector<std::optional<double>>> mb_per_s;
  double min{0};
  double max{0};
  int cells{0};  // measured cells
};

struct KpiGroup {
  std::optional<std::string> test;  // null for plan-wide checks
  std::string kpi;
  std::string scope;
  std::string op;
  double threshold{0};
  std::string unit;
  int passed{0};
  int failed{0};
  std::optional<double> worst;  // farthest on the wrong side (closest to the line when all pass); null: unmeasured
  std::string worst_subject;
};

struct PlanReport {
  std::string source;  // the file read
  std::string kind;    // "plan" or "run"
  std::string plan_name;
  std::string plan_file;
  std::string fabperf_version;
  std::string started_at;
  std::string finished_at;  // "" when the plan did not finish
  bool finished{false};
  bool interrupted{false};
  int exit_code{-1};  // from "end"; -1 when absent
  int steps_total{0};
  int steps_done{0};
  int steps_failed{0};
  int steps_interrupted{0};
  int steps_missing{0};  // planned but no record
  int resumed{0};
  std::string verdict;  // PASS, FAIL, ERROR (steps failed, no KPI failed), INCOMPLETE
  std::string verdict_reason;
  std::vector<StepView> steps;
  std::vector<KpiCheck> kpis;
  std::vector<KpiGroup> kpi_groups;
  int kpi_passed{0};
  int kpi_failed{0};
  std::vector<PairMatrix> matrices;
  std::vector<std::string> notes;      // things a reader must know (unfinished plan, resumed run)
  std::vector<std::string> isolation;  // "TEST: what isolation named", one line per finding
};

// A person reads a table of this many steps; past it (an all-pairs of 11 hosts is 110 steps, of
// 64 hosts 4032) the text and HTML reports list only the steps that failed or failed a KPI (at
// most kListAllSteps of them) and the kSlowestListed with the lowest MB/s.
inline constexpr std::size_t kListAllSteps = 100;
inline constexpr std::size_t kSlowestListed = 10;

// A step record's own fields (load_results checked them).
StepHead step_head(const nlohmann::json& step);
PlanReport build_plan_report(const RawResults& raw);
// load_results + build_plan_report, each step turned into its StepView as its line is read.
// `listed_detail`: only the listed steps keep their nodes, links, series, latencies and findings
// (what the text and HTML reports show; the stream is read again at those steps' lines), so that
// a million steps cost their summaries, not their details.
PlanReport read_plan_report(std::istream& in, const std::string& name, bool listed_detail = false);
PlanReport read_plan_report(const std::string& path, bool listed_detail = false);

// Formats. CSV tables: "steps" (one row per step x node; default), "pairs", "links", "kpis".
std::string render_plan_text(const PlanReport& r);
nlohmann::json render_plan_json(const PlanReport& r);
std::string render_plan_csv(const PlanReport& r, const std::string& table);
std::string render_plan_junit(const PlanReport& r);
std::string render_plan_html(const PlanReport& r);

// What the text and HTML reports share: how each writes a cell (as it is; HTML: escaped, statuses
// as pills, its own number formats) and their tables' rows, computed once (plan_render_data.cpp).
struct PlanCells {
  bool html{false};
  [[nodiscard]] std::string text(std::string_view s) const;
  [[nodiscard]] std::string num(std::optional<double> v) const;  // a KPI's value ("n/a": not measured)
  [[nodiscard]] std::string limit(double v) const;               // a KPI's threshold
  [[nodiscard]] std::string us(double v) const;                  // a latency in microseconds
  [[nodiscard]] std::string status(const std::string& s) const;  // a step's, node's, check's or verdict's
};
std::string status_class(const std::string& status);  // its pill's: ok, warn or bad
// A leading '>' marks a column of numbers (right-aligned in HTML); each row: whether it failed (HTML
// shades it), its cells.
struct PlanTable {
  std::vector<std::string> heads;
  std::vector<std::pair<bool, std::vector<std::string>>> rows{};
};
PlanTable kpi_group_table(const PlanReport& r, const PlanCells& c);
PlanTable failed_check_table(const PlanReport& r, const PlanCells& c);  // only the checks that failed
PlanTable step_table(const PlanReport& r, const PlanCells& c);          // only the listed steps
PlanTable node_table(const PlanReport& r, const StepView& s, const PlanCells& c);
// Whether a KPI check of `scope` on `subject` failed in this step (its own checks or its test's).
bool subject_failed(const PlanReport& r, const StepView& s, const std::string& scope, const std::string& subject);

// Text for XML/HTML element content and attribute values.
std::string xml_escape(std::string_view s);
// One CSV field: quoted when it holds a comma, quote or line break.
std::string csv_field(std::string_view s);

}  // namespace fabperf
