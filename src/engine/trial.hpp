// Host-dependent choices of the data plane, settled by measurement where the test runs.
//
// Which way of sending (send(2) from a buffer or sendfile(2) from a memfd) or which receive chunk
// is fastest depends on the host: on one machine of this project's kind sendfile beat send 1.5x,
// on another it lost 30%. A constant tuned on one host is wrong on the next, so an agent tries the
// candidates in alternating slices of the warm-up (which the window excludes anyway) and keeps the
// higher throughput; at equal throughput (a link, not the host, is the limit) the one that costs
// its threads less CPU per byte.
//
// All threads of one trial share its clock-based slices, so during a slice every thread uses the
// same arm and the arms' byte totals compare like for like (a shared link sees one arm at a time).
// The arms alternate A B A B so that a trend (slow start, a neighbour) does not favour one.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <fabperf/proto/agent_result.hpp>

namespace fabperf {

class ArmTrial {
 public:
  static constexpr int kArms = 2;
  // Slices after the settle slice: arms alternate 0 1 0 1.
  static constexpr int kSlices = 4;
  // Below this per slice the figures are noise: no trial, arm 0 runs (reason says so).
  static constexpr std::int64_t kMinSliceNs = 20'000'000;
  // Throughputs closer than this are equal, and CPU per byte decides.
  static constexpr double kMargin = 0.03;

  // Per-thread state: which slice the thread is in, and its CPU clock when it entered it.
  struct Cursor {
    int slice{-2};
    std::int64_t cpu_ns{0};
  };

  // [begin_ns, end_ns): the part of the warm-up this trial may use (monotonic clock); `settle`
  // puts one uncounted slice first (connections still in slow start). arm_names name the arms in
  // the result ("write", "sendfile").
  ArmTrial(std::string what, std::array<std::string, kArms> arm_names, std::int64_t begin_ns, std::int64_t end_ns,
           bool settle);

  // The arm a data thread uses for the call it starts at now_ns; moves the cursor across slices
  // and credits the thread's CPU time to the slice it leaves (the CPU clock is read only then).
  // After the trial: the chosen arm, at the cost of one atomic load.
  int pick(Cursor& c, std::int64_t now_ns) noexcept;
  // Bytes moved by the call that pick() chose the arm for.
  void count(const Cursor& c, std::uint64_t bytes) noexcept;
  // The chosen arm (valid once pick() has been called at or after end_ns, or with no trial).
  [[nodiscard]] int chosen() const noexcept { return chosen_.load(std::memory_order_acquire); }
  [[nodiscard]] bool decided() const noexcept { return chosen() >= 0; }
  // Whether any thread asked (an agent with no sender of this kind reports no trial).
  [[nodiscard]] bool used() const noexcept { return used_.load(std::memory_order_relaxed); }
  // What was tried and why the choice fell as it did (raw counters; the report derives rates).
  [[nodiscard]] TrialResult result() const;

 private:
  [[nodiscard]] int slice_at(std::int64_t now_ns) const noexcept;
  void decide() noexcept;
  // Each arm's bytes, CPU and time over its slices (none without a trial).
  [[nodiscard]] std::vector<TrialArm> measured() const;

  const std::string what_;
  const std::array<std::string, kArms> names_;
  std::int64_t first_;     // start of the first counted slice
  std::int64_t slice_ns_;  // 0: no trial
  std::int64_t end_;
  std::array<std::atomic<std::uint64_t>, kSlices> bytes_{};
  std::array<std::atomic<std::int64_t>, kSlices> cpu_ns_{};
  std::atomic<int> chosen_{-1};
  std::atomic<bool> used_{false};
  std::once_flag once_;
  std::string reason_;  // written once in decide(), read after chosen_ is published
};

// One thread's view of a two-way choice: fixed (the user chose) or decided by an ArmTrial (auto).
// While the trial runs it reads the clock per call; once the trial has decided it holds the
// choice and costs nothing more.
class ArmPicker {
 public:
  ArmPicker(ArmTrial* trial, int fixed) : trial_(trial), arm_(fixed) {}
  template <typename Clock>
  int arm(Clock&& now) noexcept {
    if (trial_ == nullptr) return arm_;
    const int a = trial_->pick(cursor_, now());
    if (trial_->decided()) {
      arm_ = a;
      trial_ = nullptr;
    }
    return a;
  }
  void count(std::uint64_t bytes) noexcept {
    if (trial_ != nullptr) trial_->count(cursor_, bytes);
  }

 private:
  ArmTrial* trial_;
  int arm_;
  ArmTrial::Cursor cursor_;
};

}  // namespace fabperf
