// A result document read back, typed: what plans (KPIs, isolation, step figures, --resume),
// `fabperf report`, `compare` and trial sets read of a `fabperf.result` (render_json's output, in
// memory or from a file). The types the writer writes too are read through its field lists
// (report/result_json.hpp); consumers read fields, so a renamed key is a compile error there and a
// failing round trip in tests/unit/test_report.cpp (ResultDoc.*).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <fabperf/report/report.hpp>

namespace fabperf {

// The report's latency figures, and the histogram's non-empty buckets when there is one.
struct ResultLatency : LatencySummary {
  struct Bucket {
    double lo_us{0}, hi_us{0};
    std::uint64_t count{0};
  };
  std::vector<Bucket> buckets;  // sorted by lo_us
};
struct ResultCounters {
  std::map<std::string, double> categories;                // pause, discard, fec_uncorrected, ecn -> window sum
  std::map<std::string, std::vector<CounterMove>> movers;  // category -> its top counters
  std::vector<Dip> dips;
};
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
// Links, bonds and pairs read back as the report's types: unknown figures (null) as their defaults.
struct ResultNode {
  std::uint64_t index{0};
  std::string node, role, status;
  double tx_mb_per_s{0}, rx_mb_per_s{0}, cpu_busy_pct{0};
  std::int64_t retrans_segs{-1};                // -1: not counted
  std::optional<ResultLatency> latency, delay;  // rpc latency; ping delay under load
  std::optional<ResultCounters> counters;       // absent (older results): no counters were sampled
  std::vector<LinkReport> links;
  std::vector<IntervalPoint> intervals;
  std::vector<BondReport> bonds;
};
struct ResultDoc {
  int schema_version{0};                               // 0: the document names none
  std::string test;                                    // settings.test
  nlohmann::json settings = nlohmann::json::object();  // the spec as the document encodes it
  std::string summary;
  bool complete{true};
  bool interrupted{false};  // the user stopped it (Ctrl-C) before the window closed
  std::uint64_t clients{0}, servers{0};
  double aggregate_mb_per_s{0}, aggregate_gbit_per_s{0}, aggregate_msg_per_s{0}, window_s{0};
  std::optional<ResultLatency> latency, delay;
  std::vector<std::string> findings;
  std::vector<ResultNode> nodes;
  std::vector<PairReport> pairs;
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
