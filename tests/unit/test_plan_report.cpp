// `fabperf report`: loader, model and renderers on hand-written inputs (shape tests; the
// integration test renders results measured by the real binary).
#include <fabperf/core/error.hpp>
#include <fabperf/report/plan_report.hpp>

#include <gtest/gtest.h>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

using namespace fabperf;
using nlohmann::json;

namespace {

// A run result as `fabperf run --json` shapes it: node i is "127.0.0.1:700i"; clients first.
json run_result(int clients, int servers, double pair_mb) {
  json nodes = json::array();
  json pairs = json::array();
  const int n = clients + servers;
  for (int i = 0; i < n; ++i) {
    const bool client = i < clients;
    json iv = json::array();
    for (int t = 1; t <= 3; ++t) {
      iv.push_back({{"t_s", t * 0.5}, {"tx_mb_per_s", client ? pair_mb * servers : 0.0}, {"rx_mb_per_s", 0.0}});
    }
    nodes.push_back({{"index", i},
                     {"node", "127.0.0.1:700" + std::to_string(i)},
                     {"role", client ? "client" : "server"},
                     {"status", "ok"},
                     {"tx_mb_per_s", client ? pair_mb * servers : 0.0},
                     {"rx_mb_per_s", client ? 0.0 : pair_mb * clients},
                     {"cpu_busy_pct", 10.0},
                     {"retrans_segs", 0},
                     {"intervals", iv},
                     {"links", json::array({{{"link", "lo"},
                                             {"tx_mb_per_s", 1.0},
                                             {"rx_mb_per_s", 2.0},
                                             {"payload_tx_mb_per_s", 1.0},
                                             {"payload_rx_mb_per_s", 0.5},
                                             {"speed_mbps", nullptr},
                                             {"utilization_pct", nullptr}}})},
                     {"latency", client ? json{{"count", 10},
                                               {"mean_us", 50.0},
                                               {"p50_us", 40.0},
                                               {"p99_us", 90.0},
                                               {"max_us", 100.0},
                                               {"buckets",
                                                {{{"lo_us", 32.0}, {"hi_us", 64.0}, {"count", 7}},
                                                 {{"lo_us", 64.0}, {"hi_us", 128.0}, {"count", 3}}}}}
                                        : json(nullptr)}});
  }
  for (int c = 0; c < clients; ++c) {
    for (int s = clients; s < n; ++s) pairs.push_back({{"client", c}, {"server", s}, {"mb_per_s", pair_mb + c}});
  }
  return {{"schema", "fabperf.result"},
          {"schema_version", 1},
          {"fabperf_version", "0.test"},
          {"test_id", "t1"},
          {"started_at", "2026-01-01T00:00:00Z"},
          {"settings", {{"test", "write"}}},
          {"aggregate", {{"mb_per_s", pair_mb * clients * servers}, {"gbit_per_s", 1.0}, {"window_s", 1.5}}},
          {"nodes", nodes},
          {"pairs", pairs},
          {"findings", json::array()},
          {"summary", "1-1 write 100 MB/sec"},
          {"latency",
           {{"count", 10},
            {"mean_us", 50.0},
            {"p50_us", 40.0},
            {"p99_us", 90.0},
            {"max_us", 100.0},
            {"buckets",
             {{{"lo_us", 32.0}, {"hi_us", 64.0}, {"count", 7}}, {{"lo_us", 64.0}, {"hi_us", 128.0}, {"count", 3}}}}}}};
}

json plan_line(int steps_total = 2) {
  return {{"type", "plan"},
          {"schema", "fabperf.plan-results"},
          {"version", 1},
          {"fabperf_version", "0.test"},
          {"started_at", "2026-01-01T00:00:00Z"},
          {"plan_file", "p.yaml"},
          {"plan",
           {{"name", "acceptance"},
            {"hosts",
             {{{"name", "n1"}, {"address", "10.0.0.1"}, {"links", json::array()}},
              {{"name", "n2"}, {"address", "10.0.0.2"}, {"links", json::array()}},
              {{"name", "n3"}, {"address", "10.0.0.3"}, {"links", json::array()}}}},
            {"tests", json::array()},
            {"kpis", json::object()}}},
          {"steps_total", steps_total}};
}

json step_line(int index, const std::string& c, const std::string& s, double mb, const std::string& status = "done") {
  json j = {{"type", "step"},
            {"index", index},
            {"id", "ap/" + std::to_string(index)},
            {"test", "ap"},
            {"pattern", "all-pairs"},
            {"clients", {c}},
            {"servers", {s}},
            {"status", status},
            {"error", ""},
            {"started_at", "2026-01-01T00:00:01Z"},
            {"duration_s", 2.5}};
  if (status == "done") j["result"] = run_result(1, 1, mb);
  return j;
}

json kpi_line(const std::string& step, const std::string& subject, double value, bool pass) {
  return {
      {"type", "kpi"},   {"test", "ap"},       {"step", step},   {"kpi", "pair_min_mb_per_s"},
      {"scope", "pair"}, {"subject", subject}, {"value", value}, {"threshold", 150.0},
      {"op", ">="},      {"unit", "MB/s"},     {"pass", pass},   {"detail", pass ? "" : subject + " below 150 MB/s"}};
}

json end_line(bool passed) {
  return {{"type", "end"},
          {"finished_at", "2026-01-01T00:01:00Z"},
          {"interrupted", false},
          {"passed", passed},
          {"exit_code", passed ? 0 : 1}};
}

std::string lines(const std::vector<json>& v) {
  std::string out;
  for (const auto& j : v) out += j.dump() + "\n";
  return out;
}

RawResults load(const std::string& text) {
  std::istringstream in(text);
  return load_results(in, "r.jsonl");
}

std::string load_error(const std::string& text) {
  try {
    load(text);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string good() {
  return lines({plan_line(), step_line(0, "n1", "n2", 200), kpi_line("ap/0", "n1->n2", 200, true),
                step_line(1, "n2", "n1", 100), kpi_line("ap/1", "n2->n1", 100, false), end_line(false)});
}

}  // namespace

TEST(PlanLoad, GoodFile) {
  const auto raw = load(good());
  EXPECT_FALSE(raw.single_run);
  EXPECT_EQ(raw.steps.size(), 2u);
  EXPECT_EQ(raw.kpis.size(), 2u);
  EXPECT_TRUE(raw.end.has_value());
}

TEST(PlanLoad, MissingEndMeansUnfinished) {
  const auto r = build_plan_report(load(lines({plan_line(3), step_line(0, "n1", "n2", 200)})));
  EXPECT_FALSE(r.finished);
  EXPECT_EQ(r.verdict, "INCOMPLETE");
  EXPECT_EQ(r.steps_missing, 2);
  EXPECT_NE(render_plan_text(r).find("did not finish"), std::string::npos);
}

// Issue 31: what isolation named is in the report (text, HTML, JSON), not only in the run's output;
// a malformed isolation record is refused by line.
TEST(PlanLoad, IsolationFindingsAreReported) {
  const json iso = {{"type", "isolation"},
                    {"test", "ap"},
                    {"rounds", 2},
                    {"trace", {"known good: n2"}},
                    {"findings", {{{"slow", true}, {"text", "n1 eth0: 3.6 MB/s against 4 good peers"}}}}};
  const auto r = build_plan_report(load(lines({plan_line(), step_line(0, "n1", "n2", 200), iso, end_line(false)})));
  ASSERT_EQ(r.isolation, (std::vector<std::string>{"ap: SLOW n1 eth0: 3.6 MB/s against 4 good peers"}));
  EXPECT_NE(render_plan_text(r).find("Isolation\n  ap: SLOW n1 eth0"), std::string::npos) << render_plan_text(r);
  EXPECT_NE(render_plan_html(r).find("<li>ap: SLOW n1 eth0"), std::string::npos);
  EXPECT_EQ(render_plan_json(r)["isolation"][0], r.isolation[0]);
  json none = iso;
  none["findings"] = json::array();
  none["trace"] = {"only 2 known-good node(s): isolation needs 3"};
  EXPECT_EQ(build_plan_report(load(lines({plan_line(), none}))).isolation,
            (std::vector<std::string>{"ap: only 2 known-good node(s): isolation needs 3"}));
  json bad = iso;
  bad["findings"] = "n1";
  EXPECT_NE(load_error(lines({plan_line(), bad})).find("r.jsonl:2: isolation record: fields 'findings' and 'trace'"),
            std::string::npos);
}

TEST(PlanLoad, LastLineCutMidWriteIsIgnoredWithANote) {
  std::string text =
      lines({plan_line(), step_line(0, "n1", "n2", 200)}) + step_line(1, "n2", "n1", 100).dump().substr(0, 40);
  const auto r = build_plan_report(load(text));
  EXPECT_EQ(r.steps.size(), 1u);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes.front().find("line 3 was cut off"), std::string::npos);
}

TEST(PlanLoad, MalformedLinesNameFileAndLine) {
  auto base = lines({plan_line(), step_line(0, "n1", "n2", 200)});
  EXPECT_EQ(load_error(base + "{not json\n" + end_line(true).dump() + "\n"), "r.jsonl:3: not valid JSON");
  EXPECT_EQ(load_error(base + "[1,2]\n"), "r.jsonl:3: expected a JSON object");
  EXPECT_EQ(
      load_error(base + "{\"type\":\"bogus\"}\n"),
      "r.jsonl:3: unknown record type \"bogus\" (expected plan, step, kpi, end, hook, isolate, isolation or per_link)");
  auto step = step_line(1, "n2", "n1", 100);
  step.erase("duration_s");
  EXPECT_EQ(load_error(base + step.dump() + "\n"), "r.jsonl:3: step record: missing field 'duration_s'");
  step = step_line(1, "n2", "n1", 100);
  step["pattern"] = "zigzag";
  EXPECT_NE(load_error(base + step.dump() + "\n").find("r.jsonl:3: step record: field 'pattern' is 'zigzag'"),
            std::string::npos);
  auto k = kpi_line("ap/0", "n1->n2", 1, true);
  k["pass"] = "yes";
  EXPECT_EQ(load_error(base + k.dump() + "\n"), "r.jsonl:3: kpi record: field 'pass' must be true or false");
  k = kpi_line("ap/0", "n1->n2", 1, true);
  k["op"] = ">";
  EXPECT_NE(load_error(base + k.dump() + "\n").find("r.jsonl:3: kpi record: field 'op'"), std::string::npos);
  step = step_line(1, "n2", "n1", 100);
  step["result"]["schema"] = "other";
  EXPECT_NE(load_error(base + step.dump() + "\n").find("r.jsonl:3: step record: 'result' has schema 'other'"),
            std::string::npos);
  EXPECT_EQ(load_error(step_line(0, "n1", "n2", 1).dump() + "\n"),
            "r.jsonl:1: the first record must be the \"plan\" header, found \"step\"");
  EXPECT_EQ(load_error("\n\n"), "r.jsonl: empty file: not a fabperf results file");
}

TEST(PlanLoad, WrongSchemaOrVersion) {
  auto p = plan_line();
  p["schema"] = "someone.else";
  EXPECT_NE(load_error(p.dump() + "\n")
                .find("r.jsonl:1: plan record: schema 'someone.else' is not a fabperf plan results file"),
            std::string::npos);
  p = plan_line();
  p["version"] = 2;
  EXPECT_NE(load_error(p.dump() + "\n").find("results version 2 is not supported (this fabperf reads version 1)"),
            std::string::npos);
  EXPECT_NE(load_error("{\"schema\": \"x\", \"a\": 1}").find("schema 'x' is neither"), std::string::npos);
}

TEST(PlanLoad, ResumedRunLastRecordOfAStepWins) {
  auto text = lines({plan_line(), step_line(0, "n1", "n2", 200), step_line(1, "n2", "n1", 0, "interrupted")});
  text += lines({plan_line(), step_line(1, "n2", "n1", 180), end_line(true)});
  const auto raw = load(text);
  EXPECT_EQ(raw.resumed, 1);
  EXPECT_EQ(raw.superseded_steps, 1);
  const auto r = build_plan_report(raw);
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[1].status, "done");
  EXPECT_EQ(r.steps_interrupted, 0);
  EXPECT_TRUE(r.finished);
}

TEST(PlanLoad, SingleRunJson) {
  const auto raw = load(run_result(2, 2, 100).dump(2));
  EXPECT_TRUE(raw.single_run);
  const auto r = build_plan_report(raw);
  EXPECT_EQ(r.kind, "run");
  ASSERT_EQ(r.steps.size(), 1u);
  EXPECT_EQ(r.steps[0].nodes.size(), 4u);
  EXPECT_EQ(r.steps[0].pairs.size(), 4u);
  EXPECT_EQ(r.verdict, "NO KPI");
  EXPECT_TRUE(r.matrices.empty());
}

TEST(PlanModel, MatrixVerdictAndNames) {
  const auto r = build_plan_report(load(good()));
  EXPECT_EQ(r.verdict, "FAIL");
  EXPECT_EQ(r.kpi_failed, 1);
  EXPECT_EQ(r.kpi_passed, 1);
  ASSERT_EQ(r.kpi_groups.size(), 1u);
  EXPECT_EQ(r.kpi_groups[0].worst_subject, "n2->n1");
  EXPECT_DOUBLE_EQ(r.kpi_groups[0].worst.value_or(-1), 100);
  // Result nodes are "127.0.0.1:700x": matched to the plan's names through the step's roles.
  ASSERT_EQ(r.steps[0].nodes.size(), 2u);
  EXPECT_EQ(r.steps[0].nodes[0].name, "n1");
  EXPECT_EQ(r.steps[0].nodes[1].name, "n2");
  EXPECT_EQ(r.steps[1].pairs[0].client, "n2");
  ASSERT_EQ(r.matrices.size(), 1u);
  const auto& m = r.matrices[0];
  ASSERT_EQ(m.nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(m.cells, 2);
  EXPECT_DOUBLE_EQ(*m.mb_per_s[0][1], 200);
  EXPECT_DOUBLE_EQ(*m.mb_per_s[1][0], 100);
  EXPECT_FALSE(m.mb_per_s[0][2].has_value());
  EXPECT_DOUBLE_EQ(m.min, 100);
  EXPECT_DOUBLE_EQ(m.max, 200);
  // Time series: the aggregate is the senders' sum, then one line per sender.
  ASSERT_EQ(r.steps[0].series.size(), 2u);
  EXPECT_EQ(r.steps[0].series[0].name, "aggregate");
  EXPECT_DOUBLE_EQ(r.steps[0].series[0].points[0].mb_per_s, 200);
  EXPECT_EQ(r.steps[0].kpi_passed, 1);
  EXPECT_EQ(r.steps[1].kpi_failed, 1);
}

TEST(PlanModel, NamesMatchedByAddress) {
  auto s = step_line(0, "n1", "n2", 50);
  s["clients"] = {"n1", "n3"};
  s["result"] = run_result(2, 1, 50);
  s["result"]["nodes"][0]["node"] = "10.0.0.3:6668";  // clients in the other order than the step lists them
  s["result"]["nodes"][1]["node"] = "10.0.0.1:6668";
  s["result"]["nodes"][2]["node"] = "n2";
  const auto r = build_plan_report(load(lines({plan_line(1), s, end_line(true)})));
  EXPECT_EQ(r.steps[0].nodes[0].name, "n3");
  EXPECT_EQ(r.steps[0].nodes[1].name, "n1");
  EXPECT_EQ(r.steps[0].nodes[2].name, "n2");
  EXPECT_EQ(r.steps[0].pairs[0].client, "n3");
}

TEST(PlanModel, FailedStepIsAnErrorVerdict) {
  auto s = step_line(0, "n1", "n2", 0, "failed");
  s["error"] = "connect 10.0.0.2:6668: Connection refused";
  const auto r = build_plan_report(load(lines({plan_line(1), s, end_line(false)})));
  EXPECT_EQ(r.verdict, "ERROR");
  EXPECT_FALSE(r.steps[0].measured);
}

TEST(PlanRender, CsvTablesHaveConstantColumnCounts) {
  const auto r = build_plan_report(load(good()));
  for (const std::string t : {"steps", "pairs", "links", "kpis"}) {
    const auto csv = render_plan_csv(r, t);
    std::istringstream in(csv);
    std::string line;
    std::size_t cols = 0, rows = 0;
    while (std::getline(in, line)) {
      std::size_t c = 1;
      bool quoted = false;
      for (const char ch : line) {
        if (ch == '"') quoted = !quoted;
        if (ch == ',' && !quoted) ++c;
      }
      if (rows++ == 0) cols = c;
      EXPECT_EQ(c, cols) << t << ": " << line;
    }
    EXPECT_GT(rows, 1u) << t;
  }
  EXPECT_THROW(render_plan_csv(r, "bogus"), UsageError);
  // The CSV columns are the JSON report's row fields read by name: a field renamed in one place
  // and not the other must show here, not as a silently empty column.
  const auto steps = render_plan_csv(r, "steps");
  EXPECT_EQ(steps.substr(0, steps.find("\r\n")),
            "step_index,step,test,pattern,step_status,op,step_mb_per_s,node,role,status,tx_mb_per_s,rx_mb_per_s,"
            "cpu_busy_pct,retrans_segs,p50_us,p99_us,max_us");
  EXPECT_TRUE(std::regex_search(
      steps, std::regex(",client,ok,[1-9][0-9.]*,0\\.000,10\\.000,0,40\\.000,90\\.000,100\\.000\r\n")))
      << steps;
  const auto links = render_plan_csv(r, "links");
  EXPECT_NE(links.find(",lo,1.000,2.000,"), std::string::npos) << links;
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  // Formula injection: text that a spreadsheet would evaluate is neutralised; numbers are not.
  EXPECT_EQ(csv_field("=HYPERLINK(\"http://x\")"), "\"'=HYPERLINK(\"\"http://x\"\")\"");
  EXPECT_EQ(csv_field("@SUM(A1)"), "'@SUM(A1)");
  EXPECT_EQ(csv_field("+cmd"), "'+cmd");
  EXPECT_EQ(csv_field("-2+3"), "'-2+3");
  EXPECT_EQ(csv_field("\tx"), "'\tx");
  EXPECT_EQ(csv_field("-12.5"), "-12.5");
  EXPECT_EQ(csv_field("eth0"), "eth0");
}

TEST(PlanRender, JunitCountsAndEscapes) {
  auto k = kpi_line("ap/1", "n2->n1", 100, false);
  k["detail"] = "<&\"'> bad";
  const auto r = build_plan_report(load(good() + k.dump() + "\n"));
  const auto x = render_plan_junit(r);
  EXPECT_NE(x.find("tests=\"4\" failures=\"1\" errors=\"0\""), std::string::npos) << x;
  EXPECT_NE(x.find("message=\"&lt;&amp;&quot;&#39;&gt; bad\""), std::string::npos) << x;
  EXPECT_EQ(x.find("<&"), std::string::npos);
  EXPECT_EQ(xml_escape("a\x01<"), "a\\x01&lt;");
}

TEST(PlanRender, JunitUnfinishedPlanIsAnError) {
  const auto r = build_plan_report(load(lines({plan_line(2), step_line(0, "n1", "n2", 200)})));
  const auto x = render_plan_junit(r);
  EXPECT_NE(x.find("name=\"plan finished\""), std::string::npos);
  EXPECT_NE(x.find("errors=\"1\""), std::string::npos);
}

TEST(PlanRender, HtmlIsSelfContainedAndEscaped) {
  auto p = plan_line();
  p["plan"]["name"] = "<script>alert(1)</script>";
  auto text = good();
  text.replace(0, text.find('\n'), p.dump());
  const auto html = render_plan_html(build_plan_report(load(text)));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // only the SVG namespace
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_NE(html.find("class=\"heat-cell\""), std::string::npos);
  EXPECT_NE(html.find("class=\"bar\""), std::string::npos);
  EXPECT_NE(html.find("class=\"chart timeseries\""), std::string::npos);
  EXPECT_NE(html.find("class=\"chart histogram\""), std::string::npos);
  EXPECT_NE(html.find("FAIL"), std::string::npos);
}

TEST(PlanRender, TextAndJsonCarryTheVerdict) {
  const auto r = build_plan_report(load(good()));
  const auto t = render_plan_text(r);
  EXPECT_EQ(t.find("VERDICT: FAIL"), t.find("VERDICT"));
  EXPECT_LT(t.find("VERDICT"), t.find("Steps"));
  EXPECT_NE(t.find("n2->n1"), std::string::npos);
  const auto j = render_plan_json(r);
  EXPECT_EQ(j["verdict"], "FAIL");
  EXPECT_EQ(j["matrices"][0]["mb_per_s"][0][1], 200.0);
  EXPECT_TRUE(j["matrices"][0]["mb_per_s"][0][0].is_null());
  EXPECT_EQ(j["steps"].size(), 2u);
}

TEST(PlanModel, UnmeasuredKpiValueIsNullAndWorst) {
  auto k = kpi_line("ap/0", "n1->n2", 0, false);
  k["value"] = nullptr;
  k["kpi"] = "min-efficiency-pct";
  const auto r = build_plan_report(load(good() + k.dump() + "\n"));
  ASSERT_EQ(r.kpis.size(), 3u);
  EXPECT_FALSE(r.kpis[2].value.has_value());
  EXPECT_EQ(r.kpi_failed, 2);
  EXPECT_EQ(render_plan_json(r)["kpis"][2]["value"], nullptr);
  EXPECT_NE(render_plan_text(r).find("n/a"), std::string::npos);
  EXPECT_NE(render_plan_junit(r).find("not measured"), std::string::npos);
  k["value"] = "high";
  EXPECT_EQ(load_error(good() + k.dump() + "\n"), "r.jsonl:7: kpi record: field 'value' must be a number");
}

TEST(PlanModel, CounterDipsReachEveryRenderer) {
  auto s = step_line(0, "n1", "n2", 50);
  s["result"]["nodes"][0]["counters"] = {
      {"dips", json::array({{{"subject", "lo"},
                             {"t0_s", 0.5},
                             {"t1_s", 1.0},
                             {"change_pct", -60.0},
                             {"text", "lo 0.5-1.0 s: -60%; qdisc.drops +12 (discard)"}}})}};
  const auto r = build_plan_report(load(lines({plan_line(1), s, end_line(true)})));
  ASSERT_EQ(r.steps[0].counter_events.size(), 1u);
  EXPECT_EQ(r.steps[0].counter_events[0].node, "n1");
  EXPECT_EQ(r.steps[0].counter_events[0].subject, "lo");
  EXPECT_DOUBLE_EQ(r.steps[0].counter_events[0].t1_s, 1.0);
  EXPECT_NE(render_plan_text(r).find("counters: n1 lo 0.5-1.0 s: -60%; qdisc.drops +12 (discard)"), std::string::npos);
  const std::string html = render_plan_html(r);
  EXPECT_NE(html.find("class=\"counter-event\""), std::string::npos);
  EXPECT_NE(html.find("qdisc.drops +12 (discard)"), std::string::npos);
  EXPECT_EQ(render_plan_json(r)["steps"][0]["counter_events"][0]["text"],
            "lo 0.5-1.0 s: -60%; qdisc.drops +12 (discard)");
}

// A large plan (an all-pairs of 70 hosts is 4830 steps): the people's reports list the steps that
// need attention and the slowest, say so, and draw the matrix one pixel a pair; JSON keeps all.
TEST(PlanRender, LargePlansListTheStepsThatNeedAttentionAndDrawThePairsAsAnImage) {
  std::vector<json> v{plan_line(140)};
  for (int k = 0; k < 140; ++k) {
    const int i = k % 70;
    const std::string c = "h" + std::to_string(i);
    const std::string s = "h" + std::to_string((i + 1 + k / 70) % 70);
    v.push_back(step_line(k, c, s, 100 + i, k == 5 ? "failed" : "done"));
    if (k != 5) v.push_back(kpi_line("ap/" + std::to_string(k), c + "->" + s, 100 + i, k != 7));
  }
  v.push_back(end_line(false));
  const auto r = build_plan_report(load(lines(v)));
  ASSERT_EQ(r.steps.size(), 140u);
  EXPECT_EQ(std::count_if(r.steps.begin(), r.steps.end(), [](const StepView& s) { return s.listed; }),
            2 + static_cast<long>(kSlowestListed));
  for (const int k : {0, 70, 4, 74, 5, 7}) EXPECT_TRUE(r.steps[static_cast<std::size_t>(k)].listed) << k;
  EXPECT_FALSE(r.steps[69].listed);
  const auto t = render_plan_text(r);
  EXPECT_NE(t.find("note: 140 steps: the tables below list 12 of them"), std::string::npos) << t;
  EXPECT_NE(t.find("== step 7 "), std::string::npos);
  EXPECT_EQ(t.find("== step 69 "), std::string::npos);
  EXPECT_EQ(render_plan_json(r)["steps"].size(), 140u);
  const auto html = render_plan_html(r);
  ASSERT_EQ(r.matrices.at(0).nodes.size(), 73u);  // the plan's 3 hosts, then h0..h69
  EXPECT_NE(html.find("href=\"data:image/png;base64,iVBORw0KGgo"), std::string::npos);  // the PNG signature
  EXPECT_EQ(html.find("class=\"heat-cell\""), std::string::npos);
  EXPECT_EQ(html.find("id=\"step-69\""), std::string::npos);
  EXPECT_NE(html.find("id=\"step-7\""), std::string::npos);
  // Read for text and HTML: the steps not listed keep their summary and pairs, not their details.
  std::istringstream in(lines(v));
  const auto light = read_plan_report(in, "r.jsonl", true);
  EXPECT_EQ(render_plan_text(light), t);
  EXPECT_EQ(render_plan_html(light), html);
  EXPECT_TRUE(light.steps[69].nodes.empty());
  EXPECT_EQ(light.steps[69].pairs.size(), 1u);
  EXPECT_EQ(light.steps[7].nodes.size(), 2u);
}

// `fabperf report` reads a file a line at a time (read_plan_report); it must build the same
// report as loading every record first: resumed steps, a single run, a cut-off last line.
TEST(PlanLoad, ReadingLineByLineBuildsTheSameReport) {
  auto resumed = lines({plan_line(), step_line(0, "n1", "n2", 200), step_line(1, "n2", "n1", 0, "interrupted")});
  resumed += lines({plan_line(), step_line(1, "n2", "n1", 180), end_line(true)});
  const std::string cut = lines({plan_line(), step_line(0, "n1", "n2", 200)}) + R"({"type": "step", "ind)";
  for (const std::string& text : {good(), resumed, cut, run_result(2, 2, 100).dump(2), "\n\n" + good()}) {
    std::istringstream in(text);
    const auto streamed = read_plan_report(in, "r.jsonl");
    const auto whole = build_plan_report(load(text));
    EXPECT_EQ(render_plan_json(streamed), render_plan_json(whole)) << text.substr(0, 80);
    EXPECT_FALSE(streamed.steps.empty());
    // Details kept for the listed steps only (text, HTML): those two reports are the same.
    std::istringstream again(text);
    const auto listed = read_plan_report(again, "r.jsonl", true);
    EXPECT_EQ(render_plan_text(listed), render_plan_text(whole)) << text.substr(0, 80);
    EXPECT_EQ(render_plan_html(listed), render_plan_html(whole)) << text.substr(0, 80);
  }
  std::istringstream bad(lines({plan_line()}) + "{\"type\": \"step\"}\n");
  EXPECT_THROW(read_plan_report(bad, "r.jsonl"), UsageError);
}
