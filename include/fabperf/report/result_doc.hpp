// A result document read back, typed: what plans (KPIs, isolation, step figures, --resume),
// `fabperf report`, `compare` and trial sets read of a `fabperf.result` (render_json's output, in
// memory or from a file). One decoder names every key once; consumers read fields, so a renamed
// key is a compile error there and a failing round trip in tests/unit/test_report.cpp (ResultDoc.*).
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

struct ResultLatency {
  std::uint64_t count{0};
  double mean_us{0}, min_us{0}, p50_us{0}, p90_us{0}, p99_us{0}, p999_us{0}, max_us{0};
  struct Bucket {
    double lo_us{0}, hi_us{0};
    std::uint64_t count{0};
  };
  std::vector<Bucket> buckets;  // sorted by lo_us
};
struct ResultCounterTop {
  std::string source, name;
  double delta{0};
};
struct ResultDip {
  std::string subject;
  double t0_s{0}, t1_s{0};
  std::string text;
};
struct ResultCounters {
  std::map<std::string, double> categories;                     // pause, discard, fec_uncorrected, ecn -> window sum
  std::map<std::string, std::vector<ResultCounterTop>> movers;  // category -> its top counters
  std::vector<ResultDip> dips;
};
struct ResultLink {
  std::string link, kind;
  double tx_mb_per_s{0}, rx_mb_per_s{0};  // the interface's counters
  double payload_tx_mb_per_s{0}, payload_rx_mb_per_s{0};
  std::optional<double> speed_mbps, utilization_pct, efficiency_pct;  // null in the document: unknown
  double tx_errors{0}, rx_errors{0}, tx_dropped{0}, rx_dropped{0};
  std::vector<IntervalPoint> intervals;
  [[nodiscard]] double payload_mb_per_s() const { return std::max(payload_tx_mb_per_s, payload_rx_mb_per_s); }
  [[nodiscard]] std::int64_t speed() const { return speed_mbps ? static_cast<std::int64_t>(*speed_mbps) : -1; }
  [[nodiscard]] std::uint64_t errors() const { return static_cast<std::uint64_t>(tx_errors + rx_errors); }
  [[nodiscard]] std::uint64_t drops() const { return static_cast<std::uint64_t>(tx_dropped + rx_dropped); }
};
struct ResultBondMember {
  std::string member;
  double tx_mb_per_s{0}, rx_mb_per_s{0}, tx_share_pct{0}, rx_share_pct{0};
  std::uint64_t link_failures{0};
};
struct ResultBond {
  std::string bond, mode, hash_policy;
  double tx_mb_per_s{0}, rx_mb_per_s{0}, tx_members_used{0}, rx_members_used{0};
  double capacity_used_pct{-1};  // null in the document: -1, unknown
  std::vector<ResultBondMember> members;
};
struct ResultNode {
  std::uint64_t index{0};
  std::string node, role, status;
  double tx_mb_per_s{0}, rx_mb_per_s{0}, cpu_busy_pct{0};
  std::int64_t retrans_segs{-1};                // -1: not counted
  std::optional<ResultLatency> latency, delay;  // rpc latency; ping delay under load
  std::optional<ResultCounters> counters;       // absent (older results): no counters were sampled
  std::vector<ResultLink> links;
  std::vector<IntervalPoint> intervals;
  std::vector<ResultBond> bonds;
};
struct ResultPair {
  std::uint64_t client{0}, server{0}, connections{0};
  double mb_per_s{0}, retrans{0};
  std::uint32_t rtt_us{0};
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
  std::vector<ResultPair> pairs;
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
