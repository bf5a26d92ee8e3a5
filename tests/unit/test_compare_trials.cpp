#include <fabperf/core/error.hpp>
#include <fabperf/report/compare.hpp>
#include <fabperf/report/plan_report.hpp>
#include <fabperf/report/report.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <fstream>

using namespace fabperf;
using nlohmann::json;

namespace {

// A result with an aggregate, two links on node n1 and a two-member bond.
json result(double agg, double eth0, double eth1, double m0 = 10, double m1 = 10) {
  return {{"schema", kResultSchema},
          {"schema_version", kResultSchemaVersion},
          {"settings", {{"test", "write"}, {"mode", "stream"}}},
          {"aggregate", {{"mb_per_s", agg}}},
          {"nodes",
           json::array(
               {{{"node", "n1"},
                 {"links", json::array({{{"link", "eth0"}, {"kind", "ether"}, {"payload_tx_mb_per_s", eth0}},
                                        {{"link", "eth1"}, {"kind", "ether"}, {"payload_tx_mb_per_s", eth1}},
                                        {{"link", "lo"}, {"kind", "loopback"}, {"payload_tx_mb_per_s", 1.0}}})},
                 {"bonds",
                  json::array({{{"bond", "bond0"},
                                {"members",
                                 json::array({{{"member", "eth0"}, {"tx_mb_per_s", m0}, {"rx_mb_per_s", 0}},
                                              {{"member", "eth1"}, {"tx_mb_per_s", m1}, {"rx_mb_per_s", 0}}})}}})}}})},
          {"pairs", json::array()}};
}

TrialSet set(const std::vector<json>& results, const std::string& label = "") {
  TrialSet s{label, "f", {}, {}, {}};
  for (const auto& r : results) {
    s.trials.push_back(
        {"", static_cast<std::uint32_t>(s.trials.size() + 1), read_result_doc(r, ReadMode::lenient, "trial")});
  }
  return s;
}

const TrialMetric& metric(const TrialComparison& c, const std::string& kind, const std::string& subject) {
  for (const auto& m : c.metrics) {
    if (m.kind == kind && m.subject == subject) return m;
  }
  throw std::runtime_error("no metric " + kind + " " + subject);
}

std::string temp_file(const std::string& text) {
  char path[] = "/tmp/fabperf-trials-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

// A plan's results file as the executor writes it: the plan record, then one record per step.
json plan_record(json plan_obj) {
  return {{"type", "plan"},
          {"schema", kPlanResultsSchema},
          {"version", kPlanResultsVersion},
          {"fabperf_version", "x"},
          {"started_at", "t"},
          {"plan_file", "p.toml"},
          {"steps_total", 4},
          {"plan", std::move(plan_obj)}};
}
json step_record(int index, const std::string& id, const std::string& config, int trial, json r,
                 const std::string& status) {
  json j{{"type", "step"},    {"index", index},    {"id", id},         {"base_id", "bond/0"}, {"trial", trial},
         {"status", status},  {"result", r},       {"test", "bond"},   {"pattern", "pairs"},  {"clients", {"h1"}},
         {"servers", {"h1"}}, {"started_at", "t"}, {"duration_s", 1.0}};
  if (!config.empty()) j["config"] = config;
  return j;
}

}  // namespace

TEST(CompareTrials, FasterLinkAndUnchangedLink) {
  // eth0 gains 40%, eth1 stays; the aggregate gains 20%.
  std::vector<json> a, b;
  for (int i = 0; i < 5; ++i) {
    a.push_back(result(100 + i, 50 + i * 0.5, 50 + (i % 2 ? 0.3 : -0.3)));
    b.push_back(result(120 + i, 70 + i * 0.5, 50 + (i % 2 ? -0.4 : 0.4)));
  }
  const auto c = compare_trial_sets(set(a), set(b), {});
  EXPECT_EQ(c.a_label, "before");
  EXPECT_EQ(c.b_label, "after");
  const auto& agg = metric(c, "aggregate", "");
  EXPECT_EQ(agg.d.direction, stats::Direction::faster);
  EXPECT_DOUBLE_EQ(agg.alpha, 0.05);
  ASSERT_EQ(c.verdicts.size(), 1u);
  EXPECT_EQ(c.verdicts[0].rfind("after is 20% ± ", 0), 0u) << c.verdicts[0];
  // Two links share 0.05; 5 vs 5 can reach 0.0079 < 0.025.
  const auto& e0 = metric(c, "link", "n1/eth0");
  EXPECT_DOUBLE_EQ(e0.alpha, 0.025);
  EXPECT_EQ(e0.d.direction, stats::Direction::faster);
  EXPECT_EQ(metric(c, "link", "n1/eth1").d.direction, stats::Direction::no_difference);
  EXPECT_THROW(metric(c, "link", "n1/lo"), std::runtime_error);  // loopback is not a link of the fabric
  EXPECT_EQ(metric(c, "member", "n1/bond0/eth0").d.n_a, 5u);
  EXPECT_FALSE(c.failed);
  EXPECT_FALSE(c.unreplicated);

  // --expect-gain 40: eth0 shows it, eth1 and the aggregate (+20%) do not.
  TrialCompareOptions o;
  o.expect.gain_pct = 40;
  const auto e = compare_trial_sets(set(a), set(b), o);
  EXPECT_TRUE(e.failed);
  EXPECT_FALSE(metric(e, "link", "n1/eth0").fails);
  EXPECT_TRUE(metric(e, "link", "n1/eth1").fails);
  EXPECT_TRUE(metric(e, "aggregate", "").fails);
  const auto text = render_trial_comparison_text(e);
  EXPECT_NE(text.find("n1/eth1"), std::string::npos);
  EXPECT_NE(text.find("<-- FAIL"), std::string::npos);
  const auto j = render_trial_comparison_json(e);
  EXPECT_EQ(j["schema"], "fabperf.compare-trials");
  EXPECT_EQ(j["failed"], true);
}

TEST(CompareTrials, RegressionFailsButMembersDoNot) {
  std::vector<json> a, b;
  for (int i = 0; i < 5; ++i) {
    a.push_back(result(100 + i, 50, 50, 10 + i * 0.1, 10));
    b.push_back(result(80 + i, 40, 40, 20 + i * 0.1, 0.5));  // one member now carries nearly nothing
  }
  const auto c = compare_trial_sets(set(a), set(b), {});
  EXPECT_EQ(metric(c, "aggregate", "").d.direction, stats::Direction::slower);
  EXPECT_TRUE(metric(c, "aggregate", "").fails);
  EXPECT_EQ(metric(c, "member", "n1/bond0/eth1").d.direction, stats::Direction::slower);
  EXPECT_FALSE(metric(c, "member", "n1/bond0/eth1").fails);
  EXPECT_TRUE(c.failed);
}

// Issue 31: a link present on one side only was skipped without a row, so a port that went down
// after the change passed. Now it is a FAIL row naming the side it is missing in, both ways.
TEST(CompareTrials, ALinkMissingOnOneSideIsAFailRow) {
  std::vector<json> before, after;
  for (int i = 0; i < 3; ++i) {
    before.push_back(result(200, 100, 100));
    json r = result(200, 100, 100);
    r["nodes"][0]["links"].erase(1);  // eth1 gone
    after.push_back(r);
  }
  const auto c = compare_trial_sets(set(before, "before"), set(after, "after"), {});
  const auto& m = metric(c, "link", "n1/eth1");
  EXPECT_EQ(m.missing_in, "after");
  EXPECT_TRUE(m.fails);
  EXPECT_EQ(m.d.n_a, 3u);
  EXPECT_DOUBLE_EQ(m.d.mean_a, 100.0);
  EXPECT_TRUE(c.failed);
  EXPECT_FALSE(metric(c, "link", "n1/eth0").fails);
  const std::string t = render_trial_comparison_text(c);
  EXPECT_NE(t.find("n1/eth1"), std::string::npos) << t;
  EXPECT_NE(t.find("missing in after  <-- FAIL"), std::string::npos) << t;
  EXPECT_NE(t.find("result: FAIL"), std::string::npos) << t;
  EXPECT_EQ(render_trial_comparison_json(c)["metrics"].back()["missing_in"], "after");
  // A link only after the change (a new port, or one that was down before) is said the same way.
  const auto r = compare_trial_sets(set(after, "before"), set(before, "after"), {});
  EXPECT_EQ(metric(r, "link", "n1/eth1").missing_in, "before");
  EXPECT_TRUE(r.failed);
}

TEST(CompareTrials, TooFewTrialsForManyLinksIsSaid) {
  // 3 vs 3 trials: 0.1 at best, never below 0.025 for two links.
  std::vector<json> a, b;
  for (int i = 0; i < 3; ++i) {
    a.push_back(result(100 + i, 50 + i, 50 + i));
    b.push_back(result(150 + i, 75 + i, 75 + i));
  }
  const auto c = compare_trial_sets(set(a), set(b), {});
  EXPECT_EQ(metric(c, "aggregate", "").d.direction, stats::Direction::no_difference);
  bool noted = false;
  for (const auto& n : c.notes) noted = noted || n.find("2 links are judged at p < 0.025") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(CompareTrials, LoadsResultsPlanResultsAndAbPlans) {
  const std::string single = temp_file(result(100, 50, 50).dump());
  // `run --repeat 3`: a one-test plan, every trial a step.
  std::string lines = plan_record({{"hosts", json::array()}}).dump() + "\n";
  for (int i = 0; i < 3; ++i)
    lines += step_record(i, fmt::format("bond/0#{}", i + 1), "", i + 1, result(100 + i, 50, 50), "done").dump() + "\n";
  const std::string trials = temp_file(lines);
  auto s = load_trial_sets(single);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].trials.size(), 1u);
  s = load_trial_sets(trials);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].trials.size(), 3u);
  s = load_trial_sets(single + "," + trials);
  EXPECT_EQ(s[0].trials.size(), 4u);
  EXPECT_EQ(s[0].trials[3].trial, 4u);  // a joined set numbers its trials
  // JSON Lines of bare results (what `run --repeat --json` wrote before it was a plan): refused, named.
  const std::string bare = temp_file(result(1, 1, 1).dump() + "\n" + result(2, 1, 1).dump() + "\n");
  try {
    (void)load_trial_sets(bare);
    ADD_FAILURE() << "JSON Lines without a plan record were taken";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(bare + ": neither a result nor a plan's results"), std::string::npos)
        << e.what();
  }
  std::remove(bare.c_str());

  // An A/B plan's results: A and B sets named by the plan, nodes renamed to plan host names,
  // the last record of a step id counts, steps not done are left out.
  const json plan = plan_record({{"hosts", json::array({{{"name", "h1"}, {"address", "10.0.0.1:6668"}}})},
                                 {"ab",
                                  {{"a_name", "balance-alb"},
                                   {"b_name", "802.3ad"},
                                   {"expect", {"h1/eth0=+80%"}},
                                   {"expect_rest", "unchanged"}}}});
  auto step = [](int index, const std::string& id, const std::string& config, int trial, double mb,
                 const std::string& status) {
    json r = result(mb, 10, 10);
    r["nodes"][0]["node"] = "10.0.0.1:6668";
    return step_record(index, id, config, trial, r, status);
  };
  std::string ab = plan.dump() + "\n";
  ab += step(0, "bond/0@A1", "A", 1, 50, "failed").dump() + "\n";
  ab += step(0, "bond/0@A1", "A", 1, 51, "done").dump() + "\n";
  ab += step(1, "bond/0@B1", "B", 1, 90, "done").dump() + "\n";
  ab += step(2, "bond/0@A2", "A", 2, 52, "done").dump() + "\n";
  ab += step(3, "bond/0@B2", "B", 2, 91, "interrupted").dump() + "\n";
  ab += json{{"type", "hook"}, {"config", "A"}}.dump() + "\n";
  const std::string abf = temp_file(ab);
  s = load_trial_sets(abf);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].label, "balance-alb");
  EXPECT_EQ(s[1].label, "802.3ad");
  ASSERT_EQ(s[0].trials.size(), 2u);
  EXPECT_EQ(s[0].trials[0].result.aggregate.mb_per_s, 51);
  EXPECT_EQ(s[0].trials[0].step, "bond/0");
  EXPECT_EQ(s[0].trials[0].result.nodes[0].name, "h1");
  EXPECT_EQ(s[1].trials.size(), 1u);
  // The plan's [ab] expectations come with the sets, for compare and the plan's own verdict.
  EXPECT_EQ(s[1].planned.links, (std::vector<std::pair<std::string, double>>{{"h1/eth0", 80.0}}));
  EXPECT_EQ(s[1].planned.rest, LinkExpectations::Rest::unchanged);
  ASSERT_EQ(s[1].excluded.size(), 1u);  // B's second trial was interrupted: listed, not counted
  EXPECT_EQ(s[1].excluded[0], "step bond/0@B2: interrupted");
  const auto c = compare_trial_sets(s[0], s[1], {});
  EXPECT_EQ(c.a_label, "balance-alb");
  EXPECT_EQ(metric(c, "link", "h1/eth0").step, "bond/0");

  const std::string bad = temp_file("{\"schema\":\"other\"}");
  EXPECT_THROW(load_trial_sets(bad), UsageError);
  EXPECT_THROW(load_trial_sets("/nonexistent/x.json"), UsageError);
  EXPECT_THROW(load_trial_sets(single + ","), UsageError);
  for (const auto& f : {single, trials, abf, bad}) std::remove(f.c_str());
}

// Issue 31: after Ctrl-C in `run --repeat 5` the interrupted 0 MB/s trial stayed in the file and
// compare counted it (2 trials, mean halved), and a last line cut off was refused where `report`
// skipped it. Only complete, uninterrupted trials count; the rest are listed with their reason.
TEST(CompareTrials, InterruptedIncompleteAndCutOffTrialsAreExcludedAndSaid) {
  std::string lines = plan_record({{"hosts", json::array()}}).dump() + "\n";
  for (int i = 0; i < 3; ++i)
    lines += step_record(i, fmt::format("t/0#{}", i + 1), "", i + 1, result(100, 50, 50), "done").dump() + "\n";
  json interrupted = result(0, 0, 0);
  interrupted["interrupted"] = true;
  json lost = result(40, 20, 20);
  lost["complete"] = false;
  lost["findings"] = json::array({"node n2 lost: connection reset"});
  lines += step_record(3, "t/0#4", "", 4, interrupted, "interrupted").dump() + "\n";
  lines += step_record(4, "t/0#5", "", 5, lost, "done").dump() + "\n";
  lines += step_record(5, "t/0#6", "", 6, result(100, 50, 50), "done").dump().substr(0, 40);
  const std::string f = temp_file(lines);
  const auto s = load_trial_sets(f);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].trials.size(), 3u);
  ASSERT_EQ(s[0].excluded.size(), 3u);
  EXPECT_EQ(s[0].excluded[0], f + ":7: cut off (the run stopped while writing it)");
  EXPECT_EQ(s[0].excluded[1], "step t/0#4: interrupted");
  EXPECT_EQ(s[0].excluded[2], "step t/0#5: incomplete: node n2 lost: connection reset");
  std::string after = plan_record({{"hosts", json::array()}}).dump() + "\n";
  for (int i = 0; i < 3; ++i)
    after += step_record(i, fmt::format("t/0#{}", i + 1), "", i + 1, result(100, 50, 50), "done").dump() + "\n";
  const std::string af = temp_file(after);
  auto b = load_trial_sets(af).at(0);
  b.label = "after";
  std::remove(af.c_str());
  const auto c = compare_trial_sets(s[0], b, {});
  EXPECT_DOUBLE_EQ(metric(c, "aggregate", "").d.mean_a, 100.0);  // the 0 MB/s trial is not in it
  EXPECT_EQ(metric(c, "aggregate", "").d.n_a, 3u);
  EXPECT_NE(std::find(c.notes.begin(), c.notes.end(), "excluded from before: step t/0#4: interrupted"), c.notes.end());
  // A bad line with more after it is still a corrupt file.
  const std::string corrupt = temp_file("{nope\n" + result(1, 1, 1).dump() + "\n");
  EXPECT_THROW(load_trial_sets(corrupt), UsageError);
  // A single interrupted result has no trial to compare, and says why.
  const std::string single = temp_file(interrupted.dump());
  try {
    (void)load_trial_sets(single);
    ADD_FAILURE() << "an interrupted single result was taken";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("(excluded: " + single + ": interrupted by the user)"), std::string::npos)
        << e.what();
  }
  for (const auto& x : {f, corrupt, single}) std::remove(x.c_str());
}

// Issue 31, with trials: eth0 re-speeded (+150%), eth1 untouched. Per-link expectations pass the
// change as it should be and fail an untouched link that moved.
TEST(CompareTrials, PerLinkExpectations) {
  std::vector<json> before, after, both;
  for (int i = 0; i < 5; ++i) {
    const double j = 0.1 * i;  // a little noise, so ranks are decided
    before.push_back(result(200 + j, 100 + j, 100 + j));
    after.push_back(result(350 + j, 250 + j, 100 + j));
    both.push_back(result(500 + j, 250 + j, 250 + j));
  }
  TrialCompareOptions o;
  o.expect = parse_expectations({"n1/eth0=+150"}, "unchanged", "");
  auto c = compare_trial_sets(set(before, "before"), set(after, "after"), o);
  EXPECT_FALSE(c.failed) << render_trial_comparison_text(c);
  EXPECT_EQ(metric(c, "link", "n1/eth0").expectation, "--expect n1/eth0=+150%");
  EXPECT_EQ(metric(c, "link", "n1/eth1").expectation, "--expect-rest unchanged");
  c = compare_trial_sets(set(before, "before"), set(both, "after"), o);
  EXPECT_TRUE(c.failed);
  EXPECT_FALSE(metric(c, "link", "n1/eth0").fails);
  EXPECT_TRUE(metric(c, "link", "n1/eth1").fails);
  EXPECT_NE(render_trial_comparison_text(c).find("expected: n1/eth1: +0.0% (--expect-rest unchanged) <-- FAIL"),
            std::string::npos)
      << render_trial_comparison_text(c);
}

// `run --repeat N` (and a plan with repeat) ends with each step's trials: mean, spread, extremes;
// a step with a single finished trial has no spread to show.
TEST(CompareTrials, TrialSpreadIsALinePerStepWithTwoTrialsOrMore) {
  const std::string out = render_trial_spread({{"t/0", 100}, {"t/1", 50}, {"t/0", 110}, {"t/0", 90}});
  EXPECT_EQ(out, "t/0: 3 trials: mean 100.0 MB/s, run-to-run cv 10.0%, min 90.0, max 110.0\n");
  EXPECT_EQ(render_trial_spread({}), "");
}
