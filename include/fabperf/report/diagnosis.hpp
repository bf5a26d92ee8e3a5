// What the wire saw, per node: the named counters over the window (every sample), the intervals
// whose throughput fell well below the median with the counters that rose in them, and the top
// movers per category. Pure functions over an AgentResult (compute_report calls them);
// renderers only format the result. docs/counters.md.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fabperf/proto/agent_result.hpp>
#include <fabperf/sysinfo/counters.hpp>

namespace fabperf {

// An interval whose throughput is more than this many percent below the median of its link's
// (or node's) intervals is a dip.
inline constexpr double kDipPct = 25.0;
// Links whose median interval moves less than this are not judged (idle, control traffic only).
inline constexpr double kDipMinMedianMbPerS = 0.1;
// Counters named per dip, at most.
inline constexpr std::size_t kDipMaxCounters = 6;

struct CounterMove {
  std::string source;  // "eth0", "host", "rxe0:1" (in cross-node lists: "node/eth0")
  std::string name;    // as the source names it: "rx_prio3_pause", "Tcp.RetransSegs"
  std::uint64_t delta{0};
  CounterCategory category{CounterCategory::other};
  std::string label;  // counter_label(): "PFC, priority 3", "discard"; "" for unclassified
};

// One source's named counters over the window: the values at the first sample and, for every
// counter that changed, its increase in each interval (between consecutive samples).
struct CounterSeries {
  std::string source;
  std::vector<double> t_s;  // sample instants from the window's open
  CounterValues first;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> moved;
};

struct Dip {
  std::string subject;  // the link's name, or "node" for a node without sampled links
  double t0_s{0}, t1_s{0};
  double mb_per_s{0}, median_mb_per_s{0};
  double change_pct{0};           // negative: -41 is 41% below the median
  std::vector<CounterMove> rose;  // symptoms first (symptom_categories order, largest first), then unclassified
  std::size_t rose_unlisted{0};   // counters that rose but are not in `rose` (the cap)
  std::string text;               // "eth2 2.1-2.6 s: -41%; rx_prio3_pause +12,400 (PFC, priority 3)"
};

struct CategoryMovers {
  CounterCategory category{CounterCategory::other};
  std::uint64_t total{0};        // sum of every counter of the category over the window
  std::vector<CounterMove> top;  // largest first
};

struct CounterReport {
  std::vector<CounterSeries> series;
  std::vector<Dip> dips;
  std::vector<CategoryMovers> categories;  // symptom categories that moved, in symptom order
  [[nodiscard]] std::uint64_t total(CounterCategory c) const;
};

// The node's counter report. dip_pct: kDipPct unless a caller chooses otherwise.
CounterReport counter_report(const AgentResult& r, double dip_pct = kDipPct);

// Top movers per symptom category over several nodes (node name, its report); sources are
// prefixed with the node's name.
std::vector<CategoryMovers> top_movers(const std::vector<std::pair<std::string, const CounterReport*>>& nodes,
                                       std::size_t per_category = 3);

// 12400 -> "12,400".
std::string format_count(std::uint64_t v);

}  // namespace fabperf
