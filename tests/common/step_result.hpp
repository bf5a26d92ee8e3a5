// A step's result for the plan's unit tests: the test writes the keys it is about, the rest get
// the values render_json writes for an empty measurement (test "write", complete, no pairs or
// links, 0 MB/s, nothing unknown measured), and the document goes through read_result_doc.
#pragma once

#include <fabperf/plan/plan.hpp>

#include <nlohmann/json.hpp>

namespace fabperf::testutil {

inline void fill(nlohmann::json& j, const nlohmann::json& defaults) {
  for (const auto& [k, v] : defaults.items()) {
    if (!j.contains(k)) j[k] = v;
  }
}

inline ResultDoc step_result(nlohmann::json doc) {
  using nlohmann::json;
  fill(doc, {{"settings", {{"test", "write"}}},
             {"complete", true},
             {"clients", 0},
             {"servers", 0},
             {"aggregate", {{"mb_per_s", 0.0}}},
             {"pairs", json::array()}});
  std::uint64_t index = 0;
  for (auto& n : doc["nodes"]) {
    fill(n, {{"index", index++}, {"tx_mb_per_s", 0.0}, {"rx_mb_per_s", 0.0}, {"links", json::array()}});
    for (auto& l : n["links"]) {
      fill(l, {{"kind", "ethernet"},
               {"payload_tx_mb_per_s", 0.0},
               {"payload_rx_mb_per_s", 0.0},
               {"speed_mbps", nullptr},
               {"efficiency_pct", nullptr},
               {"tx_errors", 0},
               {"rx_errors", 0},
               {"tx_dropped", 0},
               {"rx_dropped", 0}});
    }
  }
  return read_result_doc(doc, ReadMode::strict);
}

}  // namespace fabperf::testutil
