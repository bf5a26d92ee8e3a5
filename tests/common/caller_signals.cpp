// The library leaves SIGPIPE to the program that embeds it (fabperf/core/stop.hpp): these test
// programs run agents, coordinators and engines in-process, so they ignore it as fabperf's main
// does. A write to a closed socket then fails with EPIPE instead of ending the test run.
#include <csignal>

namespace {
const int kSigpipeIgnored = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return 0;
}();
}  // namespace
