// Before/after comparison of two saved results (`fabperf compare`): matches links, nodes and
// pairs by name, computes each change, the change the link speeds predict, the interval noise,
// and a verdict per link. Pure: results in, a Comparison out; renderers only format.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <fabperf/core/stats.hpp>
#include <fabperf/report/result_doc.hpp>

namespace fabperf {

// What each link should have done between two results, and why (docs/statistics.md). A link
// with an expectation fails when it did not meet it; one without is only described.
struct Expectation {
  double pct{0};       // the change expected; 0 = unchanged
  std::string reason;  // "--expect h4/eth0=+150%", "--expect-rest unchanged", "speed 1000 -> 2500 Mb/s"
};
struct LinkExpectations {
  // --expect LINK=PCT: LINK is NODE/LINK (one node's) or LINK (that interface on every node).
  std::vector<std::pair<std::string, double>> links;
  // --expect-rest: what every other link should do: nothing said, stay unchanged, or change as
  // its speeds before and after say (unchanged when they are equal).
  enum class Rest { none, unchanged, speeds } rest{Rest::none};
  // --expect-gain PCT: every link (and the aggregate) must gain at least this; alone only.
  std::optional<double> gain_pct;
  bool empty() const { return links.empty() && rest == Rest::none && !gain_pct; }
  // What --expect, --expect-rest or else --expect-gain expect of the link; nullopt: nothing.
  std::optional<Expectation> for_link(const std::string& node, const std::string& link, std::int64_t before_speed,
                                      std::int64_t after_speed) const;
  std::optional<Expectation> gain() const;  // --expect-gain's, for every link and the aggregate
};
// "40", "+150%", "-5": a percentage strictly between lo and hi; UsageError naming --option and the
// text otherwise.
double parse_percent(const std::string& text, const std::string& option, double lo, double hi);
// compare's --expect LINK=PCT (each), --expect-rest and --expect-gain ("" = not given), checked
// together; the same words in an A/B plan's [ab]. UsageError naming the option otherwise.
LinkExpectations parse_expectations(const std::vector<std::string>& links, const std::string& rest,
                                    const std::string& gain);

struct Delta {  // its fields are its JSON keys (compare.cpp)
  std::string name;
  double before_mb_per_s{0}, after_mb_per_s{0};
  double change_pct{0};
  bool matched{true};  // false: present in only one of the runs
};

enum class LinkVerdict { as_expected, less_than_expected, improved, no_change, regressed, missing };
std::string_view to_string(LinkVerdict v);

struct LinkDelta {  // its fields are its JSON keys, the verdict added in words (compare.cpp)
  std::string node, link;
  double before_mb_per_s{0}, after_mb_per_s{0};  // payload MB/s on the link (busier direction)
  double change_pct{0};
  std::int64_t before_speed_mbps{-1}, after_speed_mbps{-1};
  std::optional<double> expected_pct;              // from the speeds, --expect-gain or --expect
  std::optional<std::string> expectation;          // what was expected and why (none: nothing)
  double noise_before_pct{0}, noise_after_pct{0};  // coefficient of variation of the interval samples
  LinkVerdict verdict{LinkVerdict::no_change};
  bool fails{false};
};

// One bond in one run, as its saved result shows it.
struct BondSide : BondReport {
  bool present{false};
  std::string summary;  // one plain line
};

struct BondDelta {
  std::string node, bond;
  BondSide before, after;
  std::string verdict;  // plain language: which side moved more, which spread better, why
};

struct Comparison {
  std::string before_file, after_file;
  Delta aggregate;
  std::vector<Delta> nodes, pairs;
  std::vector<LinkDelta> links;
  std::vector<BondDelta> bonds;
  std::vector<std::string> notes;
  bool failed{false};  // a link regressed or fell short of the expected gain
};

// A saved result `compare` can read: schema fabperf.result, a version this build reads, the
// aggregate, nodes and pairs present; UsageError naming the file otherwise.
void check_result_schema(const nlohmann::json& doc, const std::string& file);
// Judged against `expect` (--expect, --expect-rest, --expect-gain). Throws UsageError naming the
// files when the runs are unrelated (no node in common).
Comparison compare_results(const ResultDoc& before, const ResultDoc& after, const std::string& before_file,
                           const std::string& after_file, const LinkExpectations& expect);
// "settings differ: buffsize ..." for each setting that makes two results incomparable.
std::vector<std::string> settings_differ(const ResultDoc& before, const ResultDoc& after);

// Bonds matched by (node, bond name) between the two results.
std::vector<BondDelta> compare_bonds(const ResultDoc& before, const ResultDoc& after);

std::string render_comparison_text(const Comparison& c);
nlohmann::json render_comparison_json(const Comparison& c);

// ---- sets of trials (src/report/compare_trials.cpp; docs/statistics.md) ----
struct Trial {
  std::string step;  // a plan's step (TEST/K); "" for a plain run
  std::uint32_t trial{1};
  ResultDoc result;  // the step's or run's result (schema fabperf.result)
};
struct TrialSet {
  std::string label;  // "before", "after", or an A/B plan's configuration names
  std::string file;
  std::vector<Trial> trials;
  // What the file holds but the statistics leave out, each with its reason: a trial interrupted
  // by the user or missing a node's result, a plan step that did not finish, a last line cut off.
  std::vector<std::string> excluded;
  // An A/B plan's expectations of B against A (its [ab] expect, expect-rest, expect-gain).
  LinkExpectations planned;
};
// Reads one side: a single result (`run --json`) or a plan's results file (its done steps; with
// `repeat` or `run --repeat N`, every trial).
// FILE,FILE,... joins several into one set. An A/B plan's results file gives two sets (A, B).
// UsageError naming the file on any problem.
std::vector<TrialSet> load_trial_sets(const std::string& paths);

struct TrialMetric {
  std::string step;     // "" for a plain run
  std::string kind;     // "aggregate", "link", "member"
  std::string subject;  // "", "NODE/LINK", "NODE/BOND/MEMBER"
  stats::Decision d;
  double alpha{0.05};  // the level this metric was judged at (Bonferroni over its kind)
  std::optional<double> expected_pct;
  std::string expectation;  // why expected_pct (--expect, --expect-rest, --expect-gain)
  bool fails{false};
  // The label of the side on which this link or member never appeared ("" when both have it):
  // a port that went down after a change, or one that is new. Not judged; it fails.
  std::string missing_in;
};
struct TrialComparison {
  std::string a_label, b_label, a_file, b_file;
  std::vector<TrialMetric> metrics;
  std::vector<std::string> verdicts;  // one sentence per step's aggregate: the headline
  std::vector<std::string> notes;
  bool unreplicated{false};
  bool failed{false};  // a significant regression, or an expected gain not shown
};
struct TrialCompareOptions {
  LinkExpectations expect;
  stats::VerdictOptions verdict;
};
// Every quantity present on both sides (each step's aggregate, every link's payload MB/s, every
// bond member's MB/s) judged with stats::decide; links and members at alpha / their count.
TrialComparison compare_trial_sets(const TrialSet& a, const TrialSet& b, const TrialCompareOptions& o);
std::string render_trial_comparison_text(const TrialComparison& c);
// Each step's trials (step, aggregate MB/s, in the order run): their mean and run-to-run spread,
// a line per step with two trials or more.
std::string render_trial_spread(const std::vector<std::pair<std::string, double>>& trials);
nlohmann::json render_trial_comparison_json(const TrialComparison& c);

}  // namespace fabperf
