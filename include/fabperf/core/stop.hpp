// The process's stop requests: SIGINT and SIGTERM. main() is their one owner: it calls
// install_stop_handlers() once at start, and nothing in the library installs a signal handler or
// changes a signal's disposition behind its caller's back. Components ask how many requests
// there have been (a coordinator compares with the count when it started: one more = stop the
// test and keep what was measured, two more = abandon collection); asio code waits with
// StopWatch (src/net/stop_watch.hpp), which sleeps on a notifier descriptor instead of polling:
// on a host with a thousand idle agents, a 50 ms poll in each was 20,000 wake-ups a second, both
// cores of a small VM (docs/performance.md, bench-scale).
//
// SIGPIPE: the data plane writes to sockets its peer may close; install_stop_handlers() ignores
// SIGPIPE for the process, and a program that embeds the library must do the same.
#pragma once

#include <cstdint>

namespace fabperf::stop {

// SIGINT and SIGTERM count requests (SA_RESTART: a blocked read carries on); SIGPIPE is ignored.
void install_stop_handlers();
// SIGINT/SIGTERM requests so far (and request() calls).
[[nodiscard]] std::uint64_t requests() noexcept;
// The signal of the latest request; 0 before any.
[[nodiscard]] int last_signal() noexcept;
// What the handler does: async-signal-safe. Also for tests and in-process callers.
void request(int sig) noexcept;
// The requests a phase (a plan, the monitor, a launch) counts start at its mark(): stopped() says
// whether one came since the latest mark, so a Ctrl-C that ended an earlier phase is not counted
// again.
void mark() noexcept;
[[nodiscard]] bool stopped() noexcept;

// A descriptor that request() makes readable (an eventfd; the handler's write() is async-signal-
// safe), drained and handed to one subscriber until release_notifier(); a released one is reused
// by the next subscriber and never closed, so the handler never writes to a stale number. At most
// 64 subscribers at once (each io_context that watches holds one); throws std::runtime_error past that.
[[nodiscard]] int acquire_notifier();
void release_notifier(int fd) noexcept;

}  // namespace fabperf::stop
