// Shared by the CLI's option parsers: parsing with cxxopts' errors and stray arguments as one-line
// UsageErrors, a typed option value whose conversion error names the option, and the options
// several commands take (options.cpp).
#pragma once

#include <fabperf/core/error.hpp>

#include <fmt/format.h>
#include <chrono>
#include <cxxopts.hpp>
#include <string>
#include <string_view>
#include <vector>

#include <fabperf/core/spec.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/proto/auth.hpp>

namespace fabperf::cli {

inline cxxopts::ParseResult parse_options(cxxopts::Options& opts, int argc, char** argv) {
  try {
    auto r = opts.parse(argc, argv);
    if (!r.unmatched().empty()) throw UsageError(fmt::format("unexpected argument '{}'", r.unmatched().front()));
    return r;
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(e.what());
  }
}

template <typename T>
T get(const cxxopts::ParseResult& r, const std::string& name) {
  try {
    return r[name].as<T>();
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(fmt::format("--{}: {}", name, e.what()));
  }
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

// --help: prints the options' help; true when it did (the command then ends with 0).
bool help_printed(const cxxopts::Options& o, const cxxopts::ParseResult& r);
// --log-level: spdlog's default logger on stderr at that level.
void setup_logging(const std::string& level);
// The options of every command that talks to agents, declared once (one help text each):
// --key-file, and where asked --connect-timeout (default 5 s) and --log-level (default warn).
enum AgentOption { kKeyFile = 1, kConnectTimeout = 2, kLogLevel = 4 };
void add_agent_options(cxxopts::Options& o, int which, const std::string& group = "");
// --key-file, else FABPERF_KEY_FILE; empty path: no key.
std::string key_file_option(const cxxopts::ParseResult& r);
// That key file loaded (an empty key when there is none).
auth::Key key_option(const cxxopts::ParseResult& r);
// --connect-timeout; at_least_100ms: a shorter one is refused.
std::chrono::milliseconds connect_timeout_option(const cxxopts::ParseResult& r, bool at_least_100ms);
// Agents as host[:port],...: each resolved now (a typo fails before anything starts), none twice.
std::vector<HostPort> host_list(const std::string& text, const char* what);

}  // namespace fabperf::cli
