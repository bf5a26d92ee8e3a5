// Reading figures out of a step's result document (the JSON report) for KPIs and isolation: a
// field that is missing or not a number reads as 0, so a node without the figure adds nothing.
#pragma once

#include <nlohmann/json.hpp>

namespace fabperf::plan {

inline double num(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace fabperf::plan
