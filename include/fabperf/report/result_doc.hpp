// A result document read back, typed: what plans (KPIs, isolation, step figures, --resume),
// `fabperf report`, `compare` and trial sets read of a `fabperf.result` (render_json's output, in
// memory or from a file). The types the writer writes too are read through its field lists
// (report/result_json.hpp); consumers read fields, so a renamed key is a compile error there and a
// failing round trip in tests/unit/test_report.cpp (ResultDoc.*).
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <fabperf/report/report.hpp>

namespace fabperf {

// A link's busier direction of payload, and its errors and drops both ways.
inline double payload_mb_per_s_of(const LinkReport& l) {
  return std::max(l.payload_tx_mb_per_s, l.payload_rx_mb_per_s);
}
inline std::uint64_t errors_of(const LinkReport& l) {
  return l.tx_errors + l.rx_errors;
}
inline std::uint64_t drops_of(const LinkReport& l) {
  return l.tx_dropped + l.rx_dropped;
}
// The report read back, with what only the document says. Unknown figures (null) read as their
// defaults; the spec, connections and histograms are not read (`settings` holds the spec).
struct ResultDoc : Report {
  int schema_version{0};                               // 0: the document names none
  std::string test;                                    // settings.test
  nlohmann::json settings = nlohmann::json::object();  // the spec as the document encodes it
  std::string summary;
};

// strict: every field a result of this version always carries must be there (a step just
// measured, a --resume'd step), "step result: field 'nodes[1].tx_mb_per_s' missing". Otherwise a
// missing or null field reads as not measured (files from older versions, hand-made fixtures).
// Either way a field of the wrong type is refused, naming it after `what`.
enum class ReadMode { strict, lenient };
ResultDoc read_result_doc(const nlohmann::json& doc, ReadMode mode, const std::string& what = "step result");
// "" when `doc` is a result this build reads: schema fabperf.result, a schema_version it knows, the
// aggregate, nodes and pairs there. Otherwise what is wrong, to follow the document's name:
// "schema 'other', expected 'fabperf.result'".
std::string result_doc_problem(const nlohmann::json& doc);

}  // namespace fabperf
