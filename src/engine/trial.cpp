#include "engine/trial.hpp"

#include <fabperf/core/clock.hpp>

#include <fmt/format.h>

namespace fabperf {

ArmTrial::ArmTrial(std::string what, std::array<std::string, kArms> arm_names, std::int64_t begin_ns,
                   std::int64_t end_ns, bool settle)
    : what_(std::move(what)), names_(std::move(arm_names)), first_(begin_ns), slice_ns_(0), end_(end_ns) {
  const std::int64_t parts = kSlices + (settle ? 1 : 0);
  const std::int64_t slice = end_ns > begin_ns ? (end_ns - begin_ns) / parts : 0;
  if (slice < kMinSliceNs) {
    reason_ = fmt::format("not tried: {:.0f} ms of warm-up for this trial, {} slices of at least {} ms needed",
                          static_cast<double>(end_ns > begin_ns ? end_ns - begin_ns : 0) / 1e6, parts,
                          kMinSliceNs / 1'000'000);
    chosen_.store(0, std::memory_order_release);
    return;
  }
  slice_ns_ = slice;
  first_ = begin_ns + (settle ? slice : 0);
  end_ = first_ + kSlices * slice;
}

int ArmTrial::slice_at(std::int64_t now_ns) const noexcept {
  if (now_ns < first_) return -1;
  if (now_ns >= end_) return kSlices;
  const auto i = static_cast<int>((now_ns - first_) / slice_ns_);
  return i < kSlices ? i : kSlices - 1;
}

int ArmTrial::pick(Cursor& c, std::int64_t now_ns) noexcept {
  if (!used_.load(std::memory_order_relaxed)) used_.store(true, std::memory_order_relaxed);
  if (const int done = chosen_.load(std::memory_order_acquire); done >= 0) {
    c.slice = kSlices;  // past the trial: count() adds nothing more
    return done;
  }
  const int s = slice_at(now_ns);
  if (s != c.slice) {
    const std::int64_t cpu = clock_now_ns(CLOCK_THREAD_CPUTIME_ID);
    if (c.slice >= 0 && c.slice < kSlices)
      cpu_ns_[static_cast<std::size_t>(c.slice)].fetch_add(cpu - c.cpu_ns, std::memory_order_relaxed);
    c.slice = s;
    c.cpu_ns = cpu;
  }
  if (s >= kSlices) {
    std::call_once(once_, [this] { decide(); });
    return chosen_.load(std::memory_order_acquire);
  }
  return s < 0 ? 0 : s % kArms;
}

void ArmTrial::count(const Cursor& c, std::uint64_t bytes) noexcept {
  if (c.slice >= 0 && c.slice < kSlices)
    bytes_[static_cast<std::size_t>(c.slice)].fetch_add(bytes, std::memory_order_relaxed);
}

void ArmTrial::decide() noexcept {
  int pick = 0;
  try {
    // Every arm ran for the same time, so bytes compare as throughputs.
    const auto arms = measured();
    const double b0 = static_cast<double>(arms[0].bytes), b1 = static_cast<double>(arms[1].bytes);
    if (b0 <= 0 || b1 <= 0) {
      // An arm with no bytes was not measured (a call that began in an earlier slice outlasted
      // its slices, as on a loaded host): no comparison, so the first candidate runs.
      reason_ = b0 <= 0 && b1 <= 0
                    ? "no bytes moved during the trial: the first candidate runs"
                    : fmt::format("not compared: {} moved no bytes in its {:.0f} ms slices: the first candidate runs",
                                  names_[b0 <= 0 ? 0 : 1], static_cast<double>(slice_ns_) / 1e6);
    } else if (b1 > b0 * (1 + kMargin) || b0 > b1 * (1 + kMargin)) {
      pick = b1 > b0 ? 1 : 0;
      reason_ = fmt::format("higher throughput ({:+.0f}%)", 100.0 * (pick ? b1 / b0 : b0 / b1) - 100);
    } else {
      // Equal within the margin: what a byte costs the threads decides.
      const double c0 = arms[0].cpu_s / b0, c1 = arms[1].cpu_s / b1;
      pick = c1 < c0 ? 1 : 0;
      reason_ = fmt::format("equal throughput (within {:.0f}%), less CPU per byte ({:+.0f}%)", 100 * kMargin,
                            100.0 * (pick ? c1 / c0 : c0 / c1) - 100);
    }
  } catch (...) {
    reason_.clear();  // out of memory: the choice stands without its words
  }
  chosen_.store(pick, std::memory_order_release);
}

std::vector<TrialArm> ArmTrial::measured() const {
  std::vector<TrialArm> out;
  for (int a = 0; slice_ns_ > 0 && a < kArms; ++a) {
    TrialArm& arm = out.emplace_back();
    arm.name = names_[static_cast<std::size_t>(a)];
    for (int i = a; i < kSlices; i += kArms) {
      arm.bytes += bytes_[static_cast<std::size_t>(i)].load();
      arm.cpu_s += static_cast<double>(cpu_ns_[static_cast<std::size_t>(i)].load()) / 1e9;
      arm.seconds += static_cast<double>(slice_ns_) / 1e9;
    }
  }
  return out;
}

TrialResult ArmTrial::result() const {
  TrialResult r;
  r.what = what_;
  const int c = chosen();
  r.chosen = c >= 0 ? names_[static_cast<std::size_t>(c)] : "";
  r.reason = c >= 0 ? reason_ : "the trial had not ended";
  r.arms = measured();
  return r;
}

}  // namespace fabperf
