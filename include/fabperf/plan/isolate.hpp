// Naming the slow node and link (`--isolate`, plan `isolate = true`; docs/statistics.md).
// When a test of all-to-all, each-vs-rest, incast or all-pairs fails a KPI or shows a large
// spread, its own results rank the nodes: those well below the median are suspects, those near
// the top are known good. Each round then retests the worse half of the suspects, every one
// against a good peer of its own in both directions (suspect -> peer and peer -> suspect, at
// once), beside a pair of good nodes that sets the round's baseline. Suspects that keep up are
// cleared and become references; if the half had slow ones they are the new suspects, otherwise
// the other half is. A lone suspect gets a confirmation round against up to four good peers,
// one at a time, and is named with that evidence: "h7 eth0: 3.7 MB/s against 4 good peers,
// whose median is 11.9". Pure: the executor runs the steps and hands back the measured rates.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <fabperf/plan/plan.hpp>

namespace fabperf::plan {

// A node below this fraction of the good nodes' rate is slow (suspects: of the test's median).
inline constexpr double kSlowFraction = 0.8;
// A node at or above this fraction of the median counts as known good.
inline constexpr double kGoodFraction = 0.9;
// A test's node spread (slowest / fastest client) below this triggers isolation.
inline constexpr double kSpreadTrigger = 0.8;
// Confirmation peers.
inline constexpr std::size_t kConfirmPeers = 4;

// What a test's results say about each node (plan host indexes).
struct Suspicion {
  std::vector<std::uint32_t> suspects;    // worst first
  std::vector<std::uint32_t> good;        // best first
  std::map<std::uint32_t, double> score;  // min over roles of (node's rate / the role's median)
  double spread{1};                       // slowest / fastest client value over the test
  std::vector<std::string> trace;         // how they were chosen, one line each
};
// `names` maps result node names (host:port) to plan host indexes; `failing` are the test's
// failing KPI checks (their subjects become suspects). `test` is the test kind ("write", ...).
Suspicion find_suspects(const std::vector<StepOutcome>& steps, const std::map<std::string, std::uint32_t>& names,
                        const std::vector<std::string>& host_names, const std::string& test,
                        const std::vector<KpiCheck>& failing);

struct IsoPair {
  std::uint32_t client{0}, server{0};  // plan host indexes
  std::string role;                    // "out" (suspect sends), "in" (suspect receives), "base" (good-good)
  std::uint32_t subject{0};            // the suspect measured (for base: the client)
};
struct IsoStep {
  std::vector<IsoPair> pairs;  // run at once
};
struct IsoRound {
  std::size_t number{0};  // 1-based
  std::string kind;       // "halving" or "confirm"
  std::vector<IsoStep> steps;
};

// The JSON keys are the field names.
struct IsoFinding {
  std::string node, link;
  double mb_per_s{0};                      // the suspect's rate (min of both directions) against its peers
  double out_mb_per_s{0}, in_mb_per_s{0};  // medians of each direction
  double peers_median_mb_per_s{0};         // the good peers' median among themselves
  std::size_t peers{0};
  bool slow{false};
  std::string text;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(IsoFinding, node, link, slow, mb_per_s, out_mb_per_s, in_mb_per_s, peers,
                                   peers_median_mb_per_s, text)

class Isolator {
 public:
  Isolator(std::vector<std::uint32_t> suspects, std::vector<std::uint32_t> good, std::vector<std::string> host_names,
           std::size_t max_rounds);
  // The next round to run, or nothing when done (every suspect named, cleared or out of rounds).
  std::optional<IsoRound> next_round();
  // The round's measured rates: rates[s][k] is the MB/s of pair k of step s (nullopt: not
  // measured, e.g. the step failed). `links` names each host's busiest link in the round.
  void record(const std::vector<std::vector<std::optional<double>>>& rates,
              const std::map<std::uint32_t, std::string>& links);
  [[nodiscard]] const std::vector<std::string>& trace() const { return trace_; }
  [[nodiscard]] const std::vector<IsoFinding>& findings() const { return findings_; }
  [[nodiscard]] std::size_t rounds() const { return round_; }

 private:
  std::vector<std::uint32_t> cand_, deferred_, good_;
  std::vector<std::string> names_;
  std::size_t max_rounds_{0}, round_{0};
  std::optional<IsoRound> current_;
  std::vector<std::string> trace_;
  std::vector<IsoFinding> findings_;
  bool done_{false};
};

// The rounds a single slow node among n suspects needs at most: ceil(log2 n) halvings and a
// confirmation.
std::size_t isolation_round_bound(std::size_t suspects);

}  // namespace fabperf::plan
