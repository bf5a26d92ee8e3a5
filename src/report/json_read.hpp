// Lenient reads of result JSON for reports and comparisons: results come from files written by
// any fabperf version, so a missing or mistyped field reads as "not measured" (0 or "") rather
// than stopping a report that has everything else. Validation of peer input is Fields' job.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace fabperf::json_read {

inline double num(const nlohmann::json& j, const char* key, double fallback = 0.0) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

inline std::string str(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

}  // namespace fabperf::json_read
