#include "agent/result_fit.hpp"

#include <fabperf/core/error.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace fabperf {
namespace {

std::size_t encoded_size(const AgentResult& r) {
  return to_json(r).dump().size();
}

std::size_t all_counter_cells(const AgentResult& r) {
  std::size_t n = counter_cells(r.host_counters);
  for (const auto& l : r.links) n += counter_cells(l.stats);
  return n;
}

// Every other sample dropped, the first and the last kept (totals over the window do not change);
// true when there were more than two.
template <typename Sample>
bool halve_keeping_ends(std::vector<Sample>& samples) {
  if (samples.size() <= 2) return false;
  std::vector<Sample> kept;
  kept.reserve(samples.size() / 2 + 2);
  for (std::size_t i = 0; i + 1 < samples.size(); i += 2) kept.push_back(std::move(samples[i]));
  kept.push_back(std::move(samples.back()));
  samples = std::move(kept);
  return true;
}

// True when there was something left to halve.
bool halve_time_series(AgentResult& r) {
  bool changed = false;
  if (r.intervals.size() > 1) {
    std::vector<IntervalSample> merged;
    merged.reserve((r.intervals.size() + 1) / 2);
    for (std::size_t i = 0; i < r.intervals.size(); i += 2) {
      IntervalSample m = r.intervals[i];
      if (i + 1 < r.intervals.size()) {
        m.t_ns = r.intervals[i + 1].t_ns;
        m.tx_bytes += r.intervals[i + 1].tx_bytes;
        m.rx_bytes += r.intervals[i + 1].rx_bytes;
      }
      merged.push_back(m);
    }
    r.intervals = std::move(merged);
    changed = true;
  }
  // The named counters (driver statistics, qdisc, the host's MIB) are series too, often the
  // largest: a NIC lists hundreds of counters at every sample.
  for (auto& l : r.links) {
    changed = halve_keeping_ends(l.samples) || changed;
    changed = halve_keeping_ends(l.stats) || changed;
  }
  changed = halve_keeping_ends(r.host_counters) || changed;
  return changed;
}

}  // namespace

int fit_result(AgentResult& r, std::size_t max_bytes) {
  int halvings = 0;
  // The frame cap, and the named counters' size once a coordinator makes every sample whole.
  for (std::size_t size = encoded_size(r); size > max_bytes || all_counter_cells(r) > kMaxCounterCells;
       size = encoded_size(r)) {
    if (!halve_time_series(r)) {
      throw Error(
          ExitCode::infrastructure,
          fmt::format("RESULT of {} bytes exceeds the {} byte limit even without a time series", size, max_bytes));
    }
    ++halvings;
    // The warning travels in the RESULT, so it is counted before the next size check.
    std::string w = fmt::format(
        "time series downsampled {} time(s), each interval now covers {} of the requested ones: "
        "the full RESULT would have exceeded the {} MiB message limit or the named counters' {} values",
        halvings, std::uint64_t{1} << std::min(halvings, 62), max_bytes >> 20, kMaxCounterCells);
    if (halvings == 1) r.warnings.emplace_back();  // later halvings update the same warning
    r.warnings.back() = std::move(w);
  }
  return halvings;
}

}  // namespace fabperf
