#include <fabperf/core/clock.hpp>

#include <ctime>

namespace fabperf {

std::int64_t clock_now_ns(clockid_t clock) noexcept {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string wall_clock_text(const char* strftime_format, bool utc) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  (void)(utc ? gmtime_r(&t, &tm) : localtime_r(&t, &tm));
  char buf[64];
  return std::strftime(buf, sizeof buf, strftime_format, &tm) > 0 ? buf : "";
}

ClockEstimate estimate_clock_offset(std::span<const ClockSample> samples) noexcept {
  ClockEstimate best;
  for (const auto& s : samples) {
    const std::int64_t rtt = (s.t3 - s.t0) - (s.t2 - s.t1);
    if (rtt < 0) continue;  // impossible sample: agent reports more processing than round trip
    if (++best.samples == 1 || rtt < best.rtt_ns) {
      best.rtt_ns = rtt;
      best.offset_ns = ((s.t1 - s.t0) + (s.t2 - s.t3)) / 2;
      best.uncertainty_ns = rtt / 2;
    }
  }
  return best;
}

}  // namespace fabperf
