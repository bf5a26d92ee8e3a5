// Acceptance plans: traffic patterns (who loads whom, step by step), plan files (TOML), KPIs with
// verdicts, and the JSON Lines results file (docs/plans.md, docs/results-format.md).
// Everything here is pure except load_plan (reads a file): the executor is plan_run.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fabperf/core/spec.hpp>
#include <fabperf/report/plan_report.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/report/result_doc.hpp>

namespace fabperf::plan {

// ---- patterns ----
enum class Pattern { bipartite, pairs, each_vs_rest, halves, all_pairs, ring, incast, broadcast, all_to_all };
std::string_view to_string(Pattern p);
Pattern parse_pattern(std::string_view s);  // throws UsageError listing the names

struct Flow {
  std::uint32_t client{0};  // index into the node list the pattern was given
  std::uint32_t server{0};
  friend bool operator==(const Flow&, const Flow&) = default;
};
// The flows of one step run at once, as one coordinated test.
struct Step {
  std::vector<Flow> flows;
};

struct PatternParams {
  Pattern pattern{Pattern::bipartite};
  std::vector<std::uint32_t> clients;  // bipartite
  std::vector<std::uint32_t> servers;  // bipartite
  std::vector<Flow> pairs;             // pairs
  std::uint32_t concurrent_pairs{1};   // all-pairs: disjoint pairs per step
  std::uint32_t k{1};                  // ring: node i loads node i+k
  std::uint32_t target{0};             // incast: the receiver; broadcast: the sender
};

// The steps of a pattern over n nodes (indexes 0..n-1); throws UsageError when the parameters do
// not fit (too few nodes, k out of range, ...).
std::vector<Step> make_steps(std::size_t n, const PatternParams& p);

// ---- hosts with several links ----
// `bind-dev` (plan) and --bind-dev: "auto" | DEV[+DEV...], one device per link or one for all;
// throws UsageError naming the text (the caller names the field or option).
std::vector<std::string> parse_bind_devs(const std::string& text, std::size_t n_links);

// ---- KPIs ----
// Every KPI once: its KpiSet member; its name in plans and --kpi (also the "kpi" field of results);
// what one check covers (node, pair, link: per step unless the comment says otherwise); how a value
// meets the threshold; the unit; the range of a threshold. The counter KPIs sum every counter of
// one category over a node's window (docs/counters.md).
#define FABPERF_KPIS(X)                                                                                              \
  X(min_node_mbps, "min-node-mbps", "node", ">=", "MB/s", 0, 1e9)            /* each client node's payload */        \
  X(min_pair_mbps, "min-pair-mbps", "pair", ">=", "MB/s", 0, 1e9)            /* each client->server pair */          \
  X(min_aggregate_mbps, "min-aggregate-mbps", "step", ">=", "MB/s", 0, 1e12) /* each step's aggregate */             \
  X(min_spread, "min-spread", "aggregate", ">=", "min/max", 0, 1)            /* of node values over the test */      \
  X(max_p99_latency_us, "max-p99-latency-us", "node", "<=", "us", 0, 1e12)   /* rpc latency, else ping delay */      \
  X(max_retransmits, "max-retransmits", "pair", "<=", "segments", 0, 1e15)                                           \
  X(max_nic_errors, "max-nic-errors", "link", "<=", "packets", 0, 1e15)          /* errors + drops over the test */  \
  X(min_link_mbps, "min-link-mbps", "link", ">=", "MB/s", 0, 1e9)                /* best payload in the test */      \
  X(min_efficiency_pct, "min-efficiency-pct", "link", ">=", "%", 0, 100)         /* best, vs its negotiated speed */ \
  X(max_pause_frames, "max-pause-frames", "node", "<=", "frames", 0, 1e15)       /* PFC, pause, IB credit waits */   \
  X(max_discards, "max-discards", "node", "<=", "packets", 0, 1e15)              /* NIC, qdisc and softnet drops */  \
  X(max_fec_uncorrected, "max-fec-uncorrected", "node", "<=", "blocks", 0, 1e15) /* not repaired */                  \
  X(max_ecn_marks, "max-ecn-marks", "node", "<=", "packets", 0, 1e15)            /* CE marks (NIC, IP, TCP) */

#define FABPERF_KPI_MEMBER(member, ...) std::optional<double> member;
struct KpiSet {
  FABPERF_KPIS(FABPERF_KPI_MEMBER)
  [[nodiscard]] bool empty() const;
  friend bool operator==(const KpiSet&, const KpiSet&) = default;
};
#undef FABPERF_KPI_MEMBER
// KPI names as written in plans and --kpi (also the "kpi" field of results).
const std::vector<std::string>& kpi_names();
// Sets one KPI by name; throws UsageError naming it when unknown or out of range.
void set_kpi(KpiSet& k, std::string_view name, double value);
// Named profiles: "ibm-readiness". Throws UsageError for an unknown name.
KpiSet kpi_profile(std::string_view name);
// Fields of `over` replace those of `base`.
KpiSet merge(const KpiSet& base, const KpiSet& over);
nlohmann::json to_json(const KpiSet& k);

// ---- plans ----
struct PlanHost {
  std::string name;
  HostPort hp;
  bool client{true};  // roles; bipartite uses them
  bool server{true};
};

struct PlanTest {
  std::string name;
  PatternParams pattern;
  std::vector<std::uint32_t> hosts;  // indexes into Plan::hosts, in the order the pattern sees them
  TestSpec spec = TestSpec::make({});
  std::chrono::nanoseconds interval{std::chrono::seconds(1)};
  KpiSet kpis;
  // Hosts with several links: "sequential" runs each step once per link, every host restricted to
  // that link; bind_devs pins client flows to a device (one per link, one for all, or "auto").
  bool per_link_sequential{false};
  std::vector<std::string> bind_devs;
  nlohmann::json normalized;  // the test as written, with defaults applied (results file)
};

// Unattended A/B (docs/statistics.md): before every round of configuration A the coordinator
// runs hook `a` on its own host (never on an agent), before every round of B hook `b`; the plan's
// steps run after each, A B A B ... `repeat` times each, so slow drift hits both alike.
struct AbHooks {
  std::string a, b;                      // shell commands (/bin/sh -c), run on the coordinator host
  std::string a_name{"A"}, b_name{"B"};  // what the configurations are called in verdicts
  double timeout_s{300};                 // a hook still running then is killed and counts as failed
  // What B should do against A, in compare's words (--expect LINK=PCT each, --expect-rest,
  // --expect-gain; "" not given): when stated, the plan ends with compare's verdict.
  std::vector<std::string> expect;
  std::string expect_rest, expect_gain;
  friend bool operator==(const AbHooks&, const AbHooks&) = default;
};

struct Plan {
  std::string name;
  std::string file;
  std::vector<PlanHost> hosts;
  std::vector<PlanTest> tests;
  KpiSet kpis;               // plan-wide: evaluated once over every step of the plan
  double clock_warn_s{1.0};  // preflight: warn when two nodes' clocks differ by more
  std::uint32_t repeat{1};   // trials of every step (per configuration with `ab`)
  std::optional<AbHooks> ab;
  bool isolate{false};  // retest the suspects of a failing test and name the slow link
};

// Parses a TOML plan; every mistake is a UsageError "FILE:LINE: field 'x': problem".
Plan parse_plan(std::string_view text, const std::string& file);
Plan load_plan(const std::string& path);
// The test of `fabperf run --pattern` over every host of `p`: its pattern and the pattern's fields
// (pairs "A->B,C->D", "" when not given) read and checked as a plan file's, each mistake named by
// its option ("--target: no host named 'x'"). The caller sets the rest and normalizes it.
PlanTest pattern_test(const Plan& p, const std::string& pattern, const std::string& pairs, const std::string& target,
                      std::uint32_t concurrent_pairs, std::uint32_t k);
// Checks the test's pattern against its hosts (throws UsageError) and fills t.normalized.
void normalize(const Plan& p, PlanTest& t);
// The "plan" object of the results file's first line.
nlohmann::json plan_json(const Plan& p);

// One step of a plan, ready to run.
struct PlannedStep {
  std::size_t index{0};                // plan-wide, 0-based
  std::string id;                      // TESTNAME/K, with repeats TESTNAME/K#T, with A/B TESTNAME/K@A3
  std::string base_id;                 // TESTNAME/K: the same step in every trial and configuration
  std::uint32_t trial{1};              // 1..repeat
  std::string config;                  // "", "A" or "B"
  std::size_t block{0};                // A/B: the round-and-configuration block (its hook runs before its first step)
  std::size_t test{0};                 // index into Plan::tests
  std::vector<std::uint32_t> clients;  // plan host indexes, in first-appearance order
  std::vector<std::uint32_t> servers;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;  // (index into clients, index into servers)
  std::optional<std::uint32_t> link;                           // per-link sequential: the one link used
};
std::vector<PlannedStep> expand(const Plan& p);
// The step's flows by host name: "n1->n2 n3->n4".
std::string flow_names(const Plan& p, const PlannedStep& s);
// Set-up and collection around each step's test time (connect, clock sync, set-up, start).
inline constexpr double kStepOverheadS = 0.7;
double estimate_seconds(const Plan& p, const std::vector<PlannedStep>& steps);
// What `plan check` prints: hosts, tests, steps and durations.
std::string describe_plan(const Plan& p, const std::vector<PlannedStep>& steps);

// Figures that read a step against line rate: bus bandwidth as nccl-tests define it (incast,
// all-to-all) and bisection bandwidth (halves). `n` is the number of nodes the pattern saw.
// Null when the pattern has no such figure.
nlohmann::json step_figures(Pattern p, std::size_t n, const ResultDoc& result);
std::string render_step_figures(const nlohmann::json& figures);  // "" when null

// ---- KPI evaluation (over the step results exactly as the results file holds them) ----
struct StepOutcome {
  std::string id;
  std::string test;
  ResultDoc result;
};

// A node's payload in the direction of test ("write", ...): a client drives it (write: sends), a
// server takes the other end (write: receives); rw counts both.
double role_mbps(const NodeReport& node, const std::string& test, bool client);
// The result's node names (host:port) -> plan host names.
std::map<std::string, std::string> node_names(const Plan& p);
// A result's node name as `names` (node_names) calls it; unchanged when not a plan host.
std::string label_of(const std::map<std::string, std::string>& names, const std::string& node);
// `names` maps the result's node names (host:port) to plan host names.
std::vector<KpiCheck> evaluate_kpis(const KpiSet& k, const std::vector<StepOutcome>& steps,
                                    const std::map<std::string, std::string>& names,
                                    const std::optional<std::string>& test);
// A per-link sequential test's steps compared, each against the best link of its sweep (the same
// pattern step, trial and configuration): the results file's "per_link" record and its table.
struct LinkSweep {
  nlohmann::json record;
  std::string text;
};
LinkSweep compare_link_steps(const Plan& p, std::size_t test, const std::vector<PlannedStep>& steps,
                             const std::vector<StepOutcome>& outcomes);
// A figure as verdicts, traces and step lines print it: whole at 100 and above (and whole numbers),
// else three significant digits.
std::string figure(double v);
// The verdict table printed at the end of a run: failures first, then a count of passes.
std::string render_verdicts(const std::vector<KpiCheck>& checks);

// ---- pre-flight ----
struct Finding {
  std::string level;  // "error" (the plan would measure something wrong or fail), "warning", "ok"
  std::string node;   // plan host name, "a->b", "a/eth0" or "" (fabric-wide)
  std::string what;
  std::string fix;
};
struct PreflightLimits {
  std::uint64_t socksize{0};  // the largest socksize the plan asks for (0: OS default)
  double clock_warn_s{1.0};
};
// Judges a short all-to-all probe test: data connections, MTU per test interface, MSS per pair
// against the MTUs, link speeds, socket buffer limits, wall-clock offsets. `names` maps the
// report's node names (host:port) to plan host names.
std::vector<Finding> preflight_findings(const RunRecord& probe, const Report& report,
                                        const std::map<std::string, std::string>& names, const PreflightLimits& lim);
// Bond sanity (bond_checks) of every bond the probe's flows used, on every agent: one finding per
// problem naming the node and the bond ("n1/bond0"), what is wrong and the fix; serious ones (a
// member down or outside the aggregator, no LACP partner) are errors. Part of preflight_findings.
std::vector<Finding> preflight_bond_findings(const RunRecord& probe, const std::map<std::string, std::string>& names);
// The fix for an agent the probe could not use, from the error that says why (a name that does
// not resolve, no key or another key, a refused or silent port, a busy agent, a relay).
std::string agent_error_fix(std::string_view error);
// PCIe links behind each agent's test interfaces (pcie.hpp): a link trained below what its card
// supports is an error; a ceiling below the ports' total and interrupts served off the card's
// NUMA node are warnings. Part of preflight_findings.
std::vector<Finding> preflight_pcie_findings(const RunRecord& probe, const std::map<std::string, std::string>& names);
std::string render_findings(const std::vector<Finding>& f);

}  // namespace fabperf::plan
