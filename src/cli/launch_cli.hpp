// `fabperf run --launch ssh|slurm`: the options and the glue between them and launch.hpp; --local.
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
// --local N: N agents on this host (2..64); key becomes their one-time key unless one was given.
std::unique_ptr<LocalAgents> start_local_agents(int n, const std::string& key_file, auth::Key& key);
// Started agents into req: the first n_servers serve, the rest are clients.
void assign_endpoints(RunRequest& req, const std::vector<HostPort>& eps, std::size_t n_servers);

}  // namespace fabperf::cli
