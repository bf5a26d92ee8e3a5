// Clock offset estimation between the coordinator and each agent, NTP-style, over the control
// channel. Both sides use their own monotonic clock (CLOCK_MONOTONIC): nothing assumes the hosts'
// clocks are synchronized, and a wall-clock step during a test cannot move the window.
#pragma once

#include <cstdint>
#include <ctime>
#include <span>
#include <string>

namespace fabperf {

// Nanoseconds on one of clock_gettime(2)'s clocks (CLOCK_THREAD_CPUTIME_ID: this thread's CPU time).
std::int64_t clock_now_ns(clockid_t clock) noexcept;
// Monotonic nanoseconds on this host.
inline std::int64_t mono_now_ns() noexcept {
  return clock_now_ns(CLOCK_MONOTONIC);
}
// Wall-clock (CLOCK_REALTIME) nanoseconds since the epoch: only for comparing hosts' clocks.
inline std::int64_t wall_now_ns() noexcept {
  return clock_now_ns(CLOCK_REALTIME);
}
// The wall clock now, formatted by strftime(3) in UTC or in local time.
std::string wall_clock_text(const char* strftime_format, bool utc);
// ISO 8601 UTC to the second ("2026-11-30T01:52:03Z"): result and plan records.
inline std::string iso8601_utc_now() {
  return wall_clock_text("%Y-%m-%dT%H:%M:%SZ", true);
}

// One exchange: coordinator sends at t0, agent receives at t1 and replies at t2 (agent clock),
// coordinator receives at t3 (coordinator clock).
struct ClockSample {
  std::int64_t t0, t1, t2, t3;
};

struct ClockEstimate {
  std::int64_t offset_ns{0};       // agent_clock - coordinator_clock
  std::int64_t uncertainty_ns{0};  // half the best round trip: the true offset is within +-this
  std::int64_t rtt_ns{0};
  int samples{0};  // usable exchanges; 0 means no estimate at all
};

// Uses the sample with the smallest round trip (least queueing), as NTP's clock filter does.
ClockEstimate estimate_clock_offset(std::span<const ClockSample> samples) noexcept;

}  // namespace fabperf
