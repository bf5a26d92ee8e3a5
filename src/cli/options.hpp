// The CLI's own header. Shared by its option parsers: parsing with cxxopts' errors and stray
// arguments as one-line UsageErrors, a typed option value whose conversion error names the option,
// and the options several commands take (options.cpp). Then the subcommands that live in their own
// files (main.cpp only dispatches to them), and the glue between `fabperf run --launch ssh|slurm`
// or `--local` and launch.hpp (launch_cli.cpp).
#pragma once

#include <fmt/format.h>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cxxopts.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/settings.hpp>
#include <fabperf/core/spec.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/launch/launch.hpp>
#include <fabperf/plan/plan_run.hpp>
#include <fabperf/proto/auth.hpp>

namespace fabperf::cli {

// --help was given: its help is printed, and the command ends with 0 (main() catches this).
struct HelpShown {};
// cxxopts' errors and stray arguments as one-line UsageErrors; the bare arguments go to the
// (hidden) `positional` options, shown as `usage` in the help's first line; --help prints the help
// (of `groups` where given) and throws HelpShown.
cxxopts::ParseResult parse_options(cxxopts::Options& opts, int argc, char** argv,
                                   const std::vector<std::string>& positional = {}, const std::string& usage = "",
                                   const std::vector<std::string>& groups = {});

template <typename T>
T get(const cxxopts::ParseResult& r, const std::string& name) {
  try {
    return r[name].as<T>();
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(fmt::format("--{}: {}", name, e.what()));
  }
}

// The option's value, or T{} when it was not given.
template <typename T>
T get_or(const cxxopts::ParseResult& r, const std::string& name) {
  return r.count(name) ? get<T>(r, name) : T{};
}

// fn(), a UsageError it throws prefixed with the option it was about ("--kpi: ").
template <typename F>
auto prefix_errors(std::string_view prefix, F&& fn) {
  try {
    return fn();
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{}{}", prefix, e.what()));
  }
}

// --log-level: spdlog's default logger on stderr at that level.
void setup_logging(const std::string& level);
// -h/--help, then the options of every command that talks to agents, declared once (one help text
// each): --key-file, and where asked --connect-timeout (default 5 s) and --log-level (default warn).
enum AgentOption { kKeyFile = 1, kConnectTimeout = 2, kLogLevel = 4 };
void add_common_options(cxxopts::Options& o, int which, const std::string& group = "");
// --key-file, else FABPERF_KEY_FILE; empty path: no key.
std::string key_file_option(const cxxopts::ParseResult& r);
// That key file loaded (an empty key when there is none).
auth::Key key_option(const cxxopts::ParseResult& r);
// --connect-timeout; at_least_100ms: a shorter one is refused.
std::chrono::milliseconds connect_timeout_option(const cxxopts::ParseResult& r, bool at_least_100ms);
// Agents as host[:port],...: each resolved now (a typo fails before anything starts), none twice.
std::vector<HostPort> host_list(const std::string& text, const char* what);

// `fabperf report RESULTS --format text|json|csv|junit|html` (cmd_report.cpp)
int cmd_report(int argc, char** argv);

// `fabperf links [HOST[:PORT]...]` (cmd_links.cpp)
int cmd_links(int argc, char** argv);

// `fabperf monitor CONFIG [--once]` (cmd_monitor.cpp; docs/monitor.md)
int cmd_monitor(int argc, char** argv);

// `fabperf plan check PLAN`
int cmd_plan(int argc, char** argv);
// `fabperf preflight PLAN` or `fabperf preflight --local N | --hosts H,H...`
int cmd_preflight(int argc, char** argv);

// `fabperf run --pattern ...` (or KPIs, --results, --resume, --repeat, --per-link sequential)
// without a plan file: a one-test plan, on --hosts or on the request's servers and clients.
int run_pattern(const cxxopts::ParseResult& r, RunRequest& req, plan::RunOptions pro, std::uint32_t repeat,
                const RunParams& run);
// --bind-dev auto | DEV[+DEV...] (plan::parse_bind_devs), its errors named by the option.
std::vector<std::string> bind_dev_option(const std::string& text, std::size_t n_links);

// `fabperf compare` (cmd_compare.cpp): one result against another, or sets of trials.
int cmd_compare(int argc, char** argv);

void add_launch_options(cxxopts::Options& o);
// With --launch: starts the agents and fills req.servers, req.clients and req.key; the returned
// set stops them when destroyed. Without --launch: null, req untouched. Installs the launch
// interrupt flag (SIGINT/SIGTERM) before starting anything.
std::unique_ptr<launch::Agents> start_launch(const cxxopts::ParseResult& r, RunRequest& req);
// --local N: N agents on this host (2..64), given the --key-file (or FABPERF_KEY_FILE) if any;
// an empty key becomes their one-time key.
std::unique_ptr<launch::Agents> start_local_agents(const cxxopts::ParseResult& r, auth::Key& key);
// Started agents into req: the first n_servers serve, the rest are clients.
void assign_endpoints(RunRequest& req, const std::vector<HostPort>& eps, std::size_t n_servers);

}  // namespace fabperf::cli
