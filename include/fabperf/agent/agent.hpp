// The node agent: a daemon that accepts control connections from coordinators and runs one test
// at a time on their behalf.
#pragma once

#include <chrono>
#include <string>

#include <fabperf/core/spec.hpp>
#include <fabperf/proto/auth.hpp>

namespace fabperf {

struct AgentOptions {
  std::string listen_host{"::"};  // dual-stack by default
  std::uint16_t listen_port{kDefaultAgentPort};
  int ready_fd{-1};  // when >= 0: write "LISTENING host:port\n" there once listening, then close
  std::chrono::seconds max_duration{3600};
  std::size_t max_sessions{64};
  // Shared key (auth.hpp). Empty: only loopback coordinators are accepted, unless insecure.
  auth::Key key;
  std::string key_source;  // where the key came from, for the start-up line
  bool insecure{false};    // no key, yet listen on and accept from any address
  // Buffers a test may make this agent allocate (send buffer + one receive buffer per flow).
  std::uint64_t max_buffer_memory{1ull << 30};
  // SHUTDOWN from a coordinator (the shell's kill/killall) is obeyed; see docs/usage.md (fabperf agent).
  bool allow_remote_kill{true};
  // Launched agents (ssh, srun: launch.hpp) stop when their launcher goes away: the launcher holds
  // the agent's stdin open, so end of file on stdin means it is gone (or asked us to stop).
  bool exit_on_stdin_eof{false};
};

// Runs until SIGINT/SIGTERM; returns the process exit code.
int run_agent(const AgentOptions& options);

}  // namespace fabperf
