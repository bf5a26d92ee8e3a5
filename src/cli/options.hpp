// Shared by the CLI's option parsers: a typed option value, whose conversion error names the option.
#pragma once

#include <fabperf/error.hpp>

#include <cxxopts.hpp>
#include <fmt/format.h>
#include <string>

namespace fabperf::cli {

template <typename T>
T get(const cxxopts::ParseResult& r, const std::string& name) {
  try {
    return r[name].as<T>();
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(fmt::format("--{}: {}", name, e.what()));
  }
}

}  // namespace fabperf::cli
