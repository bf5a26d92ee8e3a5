// Subcommands and run variants that live in their own files under src/cli/.
#pragma once

#include <cstddef>
#include <string>

#include <fabperf/coordinator.hpp>

namespace fabperf {

// `fabperf run --per-link sequential`: one test step per link (every host restricted to its
// link i), each step reported, then the steps compared. Returns the exit code.
int run_per_link_sequential(const RunRequest& base, std::size_t n_links, const std::string& json_path, bool quiet,
                            bool verbose);

}  // namespace fabperf
