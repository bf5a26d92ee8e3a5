// The report model. A RunRecord is what the coordinator collected (raw agent results and what
// happened to each node); compute_report() turns it into a Report once; renderers (text, JSON)
// only format a Report. Nothing downstream of compute_report() does arithmetic on counters.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include <fabperf/agent_result.hpp>
#include <fabperf/clock.hpp>
#include <fabperf/spec.hpp>

namespace fabperf {

inline constexpr int kResultSchemaVersion = 1;
// A data thread busier than this in the window means the host may be the limit, not the fabric.
inline constexpr double kHostLimitedPct = 90.0;
inline constexpr const char* kResultSchema = "fabperf.result";

enum class NodeStatus { ok, lost, stalled, failed };
std::string_view to_string(NodeStatus s);

struct NodeRecord {
  std::uint32_t index{0};
  std::string name;     // as the user gave it (host:port)
  std::string address;  // numeric address the coordinator reached
  std::string hostname; // as the agent reported it
  std::vector<std::string> links;  // per-link data addresses, when given
  bool is_server{false};
  bool is_client{false};
  NodeStatus status{NodeStatus::ok};
  std::string error;
  ClockEstimate clock;
  // Agent's wall clock minus the coordinator's (CLOCK_REALTIME), from the clock exchange with the
  // smallest round trip; unset when the agent does not report its wall clock (pre-flight).
  std::optional<double> wall_offset_s;
  std::vector<std::string> setup_warnings;
  std::optional<AgentResult> result;
};

struct RunRecord {
  TestSpec spec = TestSpec::make({});
  std::string test_id;
  std::string started_at;  // ISO 8601 UTC, coordinator's wall clock (informational)
  bool interrupted{false};
  std::vector<NodeRecord> nodes;
  // --socksize auto: how the size in spec was chosen (speed, round trip, BDP); empty otherwise.
  std::string socksize_basis;
};

struct LatencySummary {
  std::uint64_t count{0};
  double mean_us{0}, stddev_us{0}, min_us{0}, p50_us{0}, p90_us{0}, p99_us{0}, p999_us{0}, max_us{0};
};
LatencySummary summarize(const LatencyHistogram& h);

struct Throughput {
  std::uint64_t bytes{0};
  double mb_per_s{0};
  double gbit_per_s{0};
  std::uint64_t msgs{0};
  double msg_per_s{0};
};

struct IntervalPoint {
  double t_s{0};  // end of the interval, from the window's open
  double tx_mb_per_s{0};
  double rx_mb_per_s{0};
};

struct LinkReport {
  std::string name;
  std::string kind;
  std::string driver;
  int mtu{0};
  std::int64_t speed_mbps{-1};
  std::string duplex;
  double window_s{0};          // between the first and last counter sample
  double tx_mb_per_s{0};       // interface counters: everything on the wire, headers included
  double rx_mb_per_s{0};
  double payload_tx_mb_per_s{0};  // fabperf's own bytes on flows leaving on this link
  double payload_rx_mb_per_s{0};
  double utilization_pct{-1};  // busier direction's wire bits / negotiated speed; -1 unknown
  double best_goodput_mb_per_s{0};  // framing arithmetic for this speed and MTU
  double efficiency_pct{-1};   // busier direction's payload / best goodput; -1 unknown
  std::uint64_t tx_errors{0}, rx_errors{0}, tx_dropped{0}, rx_dropped{0};
  std::vector<IntervalPoint> intervals;
  bool vanished{false};
  std::uint32_t min_sender_mss{0};  // smallest send MSS of connections this node mainly sends on
  bool jumbo_mismatch{false};
};

struct NodeReport {
  std::uint32_t index{0};
  std::string name;
  std::string hostname;
  std::string role;  // "server", "client" or "server+client"
  NodeStatus status{NodeStatus::ok};
  std::string error;
  bool aborted{false};
  double window_s{0};
  double tx_mb_per_s{0};
  double rx_mb_per_s{0};
  double cpu_busy_pct{0};
  std::int64_t retrans_segs{-1};
  double process_cpu_s{0};
  double bytes_per_cpu_s{0};  // payload moved per second of this agent's CPU time (tx+rx)
  std::string busiest_thread;  // the data thread that used the most CPU in the window
  double busiest_thread_pct{0};
  bool host_limited{false};    // a data thread was busy >= kHostLimitedPct of the window
  double clock_offset_us{0};
  double clock_uncertainty_us{0};
  std::optional<LatencySummary> latency;
  std::optional<LatencyHistogram> histogram;
  std::optional<LatencySummary> delay;  // ping round trips to the servers, under load (clients)
  std::optional<LatencyHistogram> delay_histogram;
  std::vector<IntervalPoint> intervals;
  std::vector<LinkReport> links;
  std::vector<std::string> warnings;
};

struct PairReport {
  std::uint32_t client{0};
  std::uint32_t server{0};
  std::string measured_by;  // "client", or "server" when the client's result was lost
  Throughput tput;
  std::uint32_t connections{0};
  std::uint64_t retrans{0};
  std::uint32_t rtt_us{0};    // largest rtt among the pair's connections
  std::uint32_t snd_mss{0};   // smallest send MSS among the pair's connections
  std::uint64_t server_bytes{0};  // the same window as the server counted it
};

struct ConnReport {
  std::uint32_t node{0};
  std::uint32_t peer{0};
  FlowRole role{FlowRole::client};
  FlowOp op{FlowOp::write};
  std::string local, remote;
  std::uint64_t tx_bytes_window{0}, rx_bytes_window{0};
  std::uint64_t tx_bytes_total{0}, rx_bytes_total{0};
  double mb_per_s{0};
  std::uint64_t retrans{0};
  TcpSample tcp;
  std::string error;
};

struct Report {
  std::string fabperf_version;
  std::string test_id;
  std::string started_at;
  TestSpec spec = TestSpec::make({});
  bool interrupted{false};
  bool complete{true};  // every node reported a full, unaborted result
  int servers{0};
  int clients{0};
  Throughput aggregate;
  double window_s{0};
  double cli_cpu_pct{0};
  double srv_cpu_pct{0};
  std::optional<LatencySummary> latency;  // all clients merged (rpc mode)
  std::optional<LatencyHistogram> histogram;
  std::optional<LatencySummary> delay;  // all clients merged
  std::optional<LatencyHistogram> delay_histogram;
  std::vector<NodeReport> nodes;
  std::vector<PairReport> pairs;
  std::vector<ConnReport> connections;
  std::vector<std::string> findings;  // problems a reader must see: lost nodes, failed flows, clamps
  double max_clock_uncertainty_us{0};
  std::uint64_t verify_errors{0};  // --verify: mismatching chunks over all flows
};

Report compute_report(const RunRecord& run);

// Renderers: only formatting. `verbose` adds the per-connection table.
std::string render_text(const Report& r, bool verbose);
std::string render_summary_line(const Report& r);  // nsdperf's one-line result
nlohmann::json render_json(const Report& r);

}  // namespace fabperf
