// Launchers: start fabperf agents on a list of hosts through the engines clusters already run
// (the system OpenSSH client, Slurm's srun) or on this host (--local), hand back the endpoints
// ready for run_test(), and stop them all again. One call each way, so `fabperf run` and plan runs
// share it.
//
// Every launched agent gets a one-time key generated here and written to the launcher's stdin
// (never a command line, never a file); the launcher's stdin then stays open and the agent
// (--exit-on-stdin-eof) stops when it closes. So agents go away when we close it (the set is
// destroyed), when ssh/srun dies, or when this process dies (the launchers get PR_SET_PDEATHSIG).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fabperf/core/spec.hpp>
#include <fabperf/proto/auth.hpp>

namespace fabperf::launch {

struct SshOptions {
  // Program and leading arguments (e.g. {"ssh", "-F", "cfg"}); fabperf adds -T, BatchMode=yes,
  // ConnectTimeout and LogLevel=ERROR, then `extra`, then the host and the remote command.
  std::vector<std::string> ssh_command{"ssh"};
  std::vector<std::string> extra;  // more arguments for ssh, placed before the host
  std::string agent_path{"fabperf"};
  // Address the remote agent listens on; empty: the address the ssh connection arrived at
  // (SSH_CONNECTION's server address), so the agent is reachable where ssh reached the host.
  std::string agent_listen;
  std::uint16_t agent_port{0};               // 0: the agent picks a free port and reports it
  std::size_t fanout{32};                    // ssh sessions being set up at once
  std::chrono::milliseconds timeout{30000};  // per host: ssh connect + agent ready
};

// The agents (ssh's and srun's) log at warn level.
struct SlurmOptions {
  std::string agent_path;  // empty: this very binary's path (same on every node)
  std::uint16_t agent_port{0};
  std::chrono::milliseconds timeout{60000};  // the whole step: all agents ready
};

// A set of started agents. Destroying it stops them: it closes every launcher's stdin, waits up to
// 5 s for the agents (and ssh/srun) to exit, then terminates and kills what is left.
class Agents {
 public:
  virtual ~Agents() = default;
  Agents() = default;
  Agents(const Agents&) = delete;
  Agents& operator=(const Agents&) = delete;
  // One per requested host, in the order asked for, ready to connect to with key().
  [[nodiscard]] virtual const std::vector<HostPort>& endpoints() const = 0;
  [[nodiscard]] virtual const auth::Key& key() const = 0;
};

// Starts one agent per host (hosts[i].host is the ssh destination; .port is ignored, .links are
// kept). Throws Error(infrastructure) naming every host that failed with ssh's own error text
// (everything already started is stopped first), or when interrupted (SIGINT/SIGTERM since the
// caller's stop::mark()).
std::unique_ptr<Agents> start_ssh(const std::vector<HostPort>& hosts, const SshOptions& options);

// N agents of this very binary on 127.0.0.1, each on a free port (`run --local N`). They prove
// key_file, or (none given) the set's one-time key, so no other local user can drive or stop
// them; their stderr is ours.
std::unique_ptr<Agents> start_local(int count, const std::string& key_file);

// Inside a Slurm allocation: one agent on each of `nodes` (node names; empty: every node of
// SLURM_JOB_NODELIST) in one overlapping srun step. Endpoints are NodeAddr:port, in `nodes` order.
std::unique_ptr<Agents> start_slurm(const std::vector<std::string>& nodes, const SlurmOptions& options);

// The allocation's node names (`scontrol show hostnames $SLURM_JOB_NODELIST`). Throws UsageError
// outside an allocation.
std::vector<std::string> slurm_allocation_nodes();

// ---- pure helpers (unit-tested) ----
// POSIX sh single-quoting.
std::string shell_quote(std::string_view s);
// The remote sh command ssh runs on every host.
std::string ssh_remote_command(const SshOptions& options);
// The full ssh argv for one host.
std::vector<std::string> ssh_argv(const SshOptions& options, const std::string& host);
// The last few non-empty lines of a launcher's stderr, on one line (for error messages).
std::string stderr_summary(std::string_view text);
// Port from an agent's "LISTENING host:port" line; nullopt-like 0 when the line is not one.
std::uint16_t ready_port(std::string_view line);
// `scontrol -o show node` output -> NodeName -> NodeAddr.
std::map<std::string, std::string> parse_node_addrs(std::string_view scontrol_output);
// One srun --label line: "  3: text" -> {3, "text"}; task -1 when unlabelled.
struct LabelledLine {
  int task{-1};
  std::string text;
};
LabelledLine parse_labelled(std::string_view line);

}  // namespace fabperf::launch
