// Shared by the CLI's option parsers: parsing with cxxopts' errors and stray arguments as one-line
// UsageErrors, and a typed option value whose conversion error names the option.
#pragma once

#include <fabperf/error.hpp>

#include <fmt/format.h>
#include <cxxopts.hpp>
#include <string>

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

}  // namespace fabperf::cli
