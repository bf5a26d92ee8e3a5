// Subcommands that live in their own files (main.cpp only dispatches to them).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <cstddef>

#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/plan/plan.hpp>
#include <fabperf/proto/auth.hpp>

namespace fabperf::cli {

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

// `fabperf run --pattern ...`: a one-test plan from the command line.
struct CliPattern {
  std::string pattern;
  std::string pairs;   // "A->B,C->D"
  std::string target;  // host name
  std::uint32_t concurrent_pairs{1};
  std::uint32_t k{1};
  std::vector<std::string> kpis;  // NAME=VALUE
  std::string kpi_profile;
  std::uint32_t repeat{1};          // --repeat
  bool isolate{false};              // --isolate
  bool per_link_sequential{false};  // --per-link sequential
  std::string bind_dev;             // --bind-dev
};
// --bind-dev auto | DEV[+DEV...] (plan::parse_bind_devs), its errors named by the option.
std::vector<std::string> bind_dev_option(const std::string& text, std::size_t n_links);
plan::Plan plan_from_cli(std::vector<plan::PlanHost> hosts, const CliPattern& c, const TestSpec& spec,
                         std::chrono::nanoseconds interval);

// `fabperf compare` (cmd_compare.cpp): one result against another, or sets of trials.
int cmd_compare(int argc, char** argv);

}  // namespace fabperf::cli
