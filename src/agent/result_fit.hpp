// Keeps an agent's RESULT within the control protocol's frame cap (proto::kMaxBody), so any test
// the agent accepts returns its results. The rule (docs/results-format.md): while the encoded
// RESULT is too large, halve the time series' resolution: adjacent intervals are merged in
// pairs (bytes added, the later end kept) and every other sample of the link counters and of the
// named counter series (link and host) is dropped (the first and the last are always kept, so
// totals over the window do not change). Every sample
// carries its own time, so what is left stays self-describing. Each halving is named in the
// result's warnings. Pure, so it can be tested at the largest settings without running them.
#pragma once

#include <fabperf/proto/agent_result.hpp>

#include <cstddef>

namespace fabperf {

// Returns how many halvings were needed (0: it fitted as it was). Throws Error when the result
// does not fit even with no time series left to halve (e.g. an extreme number of connections).
int fit_result(AgentResult& r, std::size_t max_bytes);

}  // namespace fabperf
