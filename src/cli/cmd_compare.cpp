// `fabperf compare`: a single result on each side is compared as before (link verdicts against
// the interval noise) and called unreplicated; sets of trials (plans with repeat, run --repeat,
// an A/B plan's results) are judged with statistics (docs/statistics.md).
#include "cli/options.hpp"

#include <fabperf/report/compare.hpp>

#include <fstream>
#include <iostream>

namespace fabperf::cli {
namespace {

// --json -: the JSON on stdout alone; otherwise the text, and the JSON to the --json FILE if given.
void print(const std::string& json_path, const std::string& text, const nlohmann::json& j) {
  if (json_path == "-") {
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << text;
  if (json_path.empty()) return;
  std::ofstream out(json_path);
  out << j.dump(2) << "\n";
  if (!out) throw SystemError("write comparison to", json_path, errno);
}

}  // namespace

int cmd_compare(int argc, char** argv) {
  cxxopts::Options o(
      "fabperf compare",
      "Compare results: fabperf compare BEFORE AFTER (each a result, the results of a plan or of run --repeat, "
      "or FILE,FILE,...), or fabperf compare AB-RESULTS.jsonl (an A/B plan's results)");
  o.add_options()("expect-gain", "every link must gain at least PCT percent (e.g. 40 for 40GbE -> 56GbE)",
                  cxxopts::value<std::string>())(
      "expect", "LINK=PCT: this link (NODE/LINK, or LINK on every node) must change by PCT (0: unchanged); repeat",
      cxxopts::value<std::vector<std::string>>())(
      "expect-rest", "every other link: 'unchanged', or 'speeds' (as its speeds before and after say)",
      cxxopts::value<std::string>())("min-effect", "trials: a change smaller than PCT percent is no difference",
                                     cxxopts::value<std::string>()->default_value("2"))(
      "json", "also write the comparison as JSON to FILE ('-' = stdout only)", cxxopts::value<std::string>())(
      // Strings, not a list: cxxopts splits a list's values at commas, and FILE,FILE,... is one side.
      "before", "", cxxopts::value<std::string>())("after", "", cxxopts::value<std::string>())("h,help", "this help");
  const auto r = cli::parse_options(o, argc, argv, {"before", "after"}, "BEFORE AFTER | AB-RESULTS");
  std::vector<std::string> files;
  for (const char* side : {"before", "after"}) {
    if (r.count(side)) files.push_back(get<std::string>(r, side));
  }
  if (files.empty()) {
    throw UsageError("compare: give BEFORE AFTER (results or plan results), or one A/B plan's results file");
  }
  const double min_effect = parse_percent(get<std::string>(r, "min-effect"), "min-effect", -1e-9, 100);
  LinkExpectations expectations =
      parse_expectations(get_or<std::vector<std::string>>(r, "expect"), get_or<std::string>(r, "expect-rest"),
                         get_or<std::string>(r, "expect-gain"));
  const auto json_path = get_or<std::string>(r, "json");

  std::vector<TrialSet> sides;
  if (files.size() == 1) {
    sides = load_trial_sets(files[0]);
    if (sides.size() != 2) {
      throw UsageError(fmt::format("compare: {} is not an A/B plan's results: give BEFORE and AFTER", files[0]));
    }
    // The plan's own expectations ([ab] expect...), unless the command line states others.
    if (expectations.empty()) expectations = sides[1].planned;
  } else {
    for (const auto& f : files) {
      auto s = load_trial_sets(f);
      if (s.size() != 1) throw UsageError(fmt::format("compare: {} holds both sides of an A/B plan: give it alone", f));
      sides.push_back(std::move(s.front()));
    }
    sides[0].label = "before";
    sides[1].label = "after";
  }
  // One plain result on each side: the link-by-link comparison against the interval noise, as
  // ever, and a word that it is unreplicated.
  const bool single = sides[0].trials.size() == 1 && sides[1].trials.size() == 1 && sides[0].trials[0].step.empty() &&
                      sides[1].trials[0].step.empty();
  if (single) {
    const Comparison c =
        compare_results(sides[0].trials[0].result, sides[1].trials[0].result, files[0], files[1], expectations);
    const auto d = stats::decide({c.aggregate.before_mb_per_s}, {c.aggregate.after_mb_per_s}, "after");
    auto j = render_comparison_json(c);
    j["unreplicated"] = true;
    j["verdict"] = d.sentence;
    print(json_path, render_comparison_text(c) + "note: " + d.sentence + "\n", j);
    return c.failed ? static_cast<int>(ExitCode::kpi_failed) : 0;
  }
  TrialCompareOptions opts;
  opts.expect = expectations;
  opts.verdict.min_effect_pct = min_effect;
  const TrialComparison c = compare_trial_sets(sides[0], sides[1], opts);
  print(json_path, render_trial_comparison_text(c), render_trial_comparison_json(c));
  return c.failed ? static_cast<int>(ExitCode::kpi_failed) : 0;
}

}  // namespace fabperf::cli
