// The report's JSON writers' helpers, and the pieces of a `fabperf.result` document
// (render_json.cpp): render_json() assembles them in memory; ResultStream (result_stream.cpp)
// writes them to the file as nodes' results arrive. Together the header and summary objects hold
// every top-level key but nodes, pairs and connections.
#pragma once

#include <fabperf/report/report.hpp>

#include <nlohmann/json.hpp>
#include <optional>

// std::optional as a JSON value: null when empty (nlohmann 3.11.2 does not convert it).
template <typename T>
struct nlohmann::adl_serializer<std::optional<T>> {
  static void to_json(nlohmann::json& j, const std::optional<T>& v) {
    j = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  }
  static void from_json(const nlohmann::json& j, std::optional<T>& v) {
    v = j.is_null() ? std::nullopt : std::optional(j.get<T>());
  }
};

// j[#f] = v.f for each field f named: the encoding half of nlohmann's NLOHMANN_DEFINE_TYPE_* field
// lists, for the report's types (written here, read back by result_doc.cpp into its own types). A
// type's to_json lists the fields written under their own names, then sets those it renames or
// writes as null when unknown.
#define FABPERF_JSON_FIELDS(j, v, ...)                                         \
  do {                                                                         \
    auto& fabperf_j = (j);                                                     \
    const auto& fabperf_v = (v);                                               \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(FABPERF_JSON_FIELD, __VA_ARGS__)) \
  } while (false)
#define FABPERF_JSON_FIELD(f) fabperf_j[#f] = fabperf_v.f;

namespace fabperf {

namespace jsonu {
// The list's elements, each through f.
template <class T, class F>
nlohmann::json array_json(const std::vector<T>& xs, F&& f) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& x : xs) out.push_back(f(x));
  return out;
}
// A figure whose source marks "unknown" by a negative value (nonneg) or by 0 (positive): null.
template <class T>
nlohmann::json nonneg(T v) {
  return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
}
template <class T>
nlohmann::json positive(T v) {
  return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
}
}  // namespace jsonu

nlohmann::json node_json(const NodeReport& n);
nlohmann::json pair_json(const PairReport& p);
nlohmann::json connection_json(const ConnReport& c);
// What is known before any result: schema, versions, test id, start time, settings, role counts.
nlohmann::json result_header_json(const Report& r);
// What needs every node: complete, interrupted, aggregate, CPU, latency, verify, findings, summary.
nlohmann::json result_summary_json(const Report& r);

}  // namespace fabperf
