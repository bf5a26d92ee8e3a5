#include "plan/hooks.hpp"

#include <fabperf/core/child.hpp>
#include <fabperf/core/clock.hpp>

#include <poll.h>
#include <csignal>

namespace fabperf::plan {

HookRun run_hook(const std::string& command, double timeout_s) {
  HookRun h;
  const std::int64_t t0 = mono_now_ns();
  const std::int64_t deadline = t0 + static_cast<std::int64_t>(timeout_s * 1e9);
  try {
    Child c("hook", {"/bin/sh", "-c", command}, Child::Stderr::merged);
    c.close_in();  // end of file at once, as from /dev/null
    while (c.out >= 0) {
      const std::int64_t left_ms = (deadline - mono_now_ns()) / 1'000'000;
      if (left_ms <= 0) {
        h.timed_out = true;
        c.signal(SIGKILL);  // its process group: everything the hook started
        break;
      }
      pollfd p{c.out, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left_ms, 1000))) <= 0) continue;
      if (!read_some(c.out, h.output, SIZE_MAX)) c.close_out();
      if (h.output.size() > 2 * kOutputTail) h.output.erase(0, h.output.size() - kOutputTail);
    }
    // The output closed: the shell is ending (or a background child kept the pipe and went away).
    // Wait for the shell within what is left of the timeout.
    if (!c.reap(static_cast<int>(std::max<std::int64_t>(0, (deadline - mono_now_ns()) / 1'000'000)))) {
      h.timed_out = true;
      c.signal(SIGKILL);
      c.reap(5000);
    }
    h.exit_code = c.exit_code();
  } catch (const std::exception& e) {
    h.error = e.what();
  }
  if (h.output.size() > kOutputTail) h.output.erase(0, h.output.size() - kOutputTail);
  h.duration_s = static_cast<double>(mono_now_ns() - t0) / 1e9;
  return h;
}

}  // namespace fabperf::plan
