// Test harness for integration tests: real fabperf processes (agents, coordinators), started by
// PID and stopped by PID, with bounded waits everywhere.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <fabperf/core/spec.hpp>

namespace fabperf::test {

// The fabperf binary under test.
const char* fabperf_bin();

// A fabperf agent child process on 127.0.0.1 (port chosen by the kernel).
class AgentProcess {
 public:
  // stderr_path: where the agent's log goes (empty: inherited).
  explicit AgentProcess(std::vector<std::string> extra_args = {}, const std::string& stderr_path = {});
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;
  [[nodiscard]] std::string address() const { return endpoint_.str(); }
  [[nodiscard]] const HostPort& endpoint() const { return endpoint_; }
  [[nodiscard]] int pid() const { return pid_; }
  void kill(int sig);
  // True when the process exited (reaped) within the timeout.
  bool wait_exit(std::chrono::milliseconds timeout, int* status = nullptr);

 private:
  int pid_{-1};
  bool reaped_{false};
  HostPort endpoint_;
};

struct CommandResult {
  int exit_code{-1};  // -1: killed by the timeout
  std::string out;
  std::string err;
  double seconds{0};
};

// Runs fabperf with args, capturing stdout/stderr; killed (by PID) after timeout.
CommandResult run_fabperf(const std::vector<std::string>& args,
                          std::chrono::seconds timeout = std::chrono::seconds(60));

// Starts fabperf in the background (e.g. a coordinator to kill); returns its PID.
int spawn_fabperf(const std::vector<std::string>& args, const std::string& stdout_path, const std::string& stderr_path);

std::string temp_path(const std::string& name);
std::string read_file(const std::string& path);
// A results file (JSON lines), one value per complete non-empty line (a last line still being
// written, with no newline yet, is not one).
std::vector<nlohmann::json> read_lines(const std::string& path);
// Key files made once per test program by `fabperf keygen`: `which` 0, 1 or 2 are three different
// keys (a coordinator and agents with different keys).
const std::string& key_file(int which = 1);

}  // namespace fabperf::test
