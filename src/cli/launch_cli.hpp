// `fabperf run --launch ssh|slurm`: the options and the glue between them and launch.hpp.
#pragma once

#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/launch/launch.hpp>

#include <cxxopts.hpp>
#include <memory>
#include <string>
#include <vector>

namespace fabperf::cli {

void add_launch_options(cxxopts::Options& o);
// With --launch: starts the agents and fills req.servers, req.clients and req.key; the returned
// set stops them when destroyed. Without --launch: null, req untouched. Installs the launch
// interrupt flag (SIGINT/SIGTERM) before starting anything.
std::unique_ptr<launch::Agents> start_launch(const cxxopts::ParseResult& r, RunRequest& req);

}  // namespace fabperf::cli
