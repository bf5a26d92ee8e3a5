// A/B hooks: a shell command run on the coordinator's host (never on an agent), bounded in
// time, its output kept (docs/statistics.md).
#pragma once

#include <string>

namespace fabperf::plan {

struct HookRun {
  int exit_code{-1};  // the command's status; 128+N when killed by signal N; -1 when it could not start
  double duration_s{0};
  bool timed_out{false};  // killed (with its process group) after the timeout
  std::string output;     // the last kOutputTail bytes of stdout and stderr together
  std::string error;      // why it could not start
};
inline constexpr std::size_t kOutputTail = 4096;

// Runs `/bin/sh -c command` in its own process group (a Child) with stdin at end of file.
HookRun run_hook(const std::string& command, double timeout_s);

}  // namespace fabperf::plan
