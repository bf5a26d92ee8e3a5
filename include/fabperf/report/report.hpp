// The report model. A RunRecord is what the coordinator collected (raw agent results and what
// happened to each node); compute_report() turns it into a Report once; renderers (text, JSON)
// only format a Report. Nothing downstream of compute_report() does arithmetic on counters.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include <fabperf/core/clock.hpp>
#include <fabperf/core/spec.hpp>
#include <fabperf/proto/agent_result.hpp>
#include <fabperf/report/diagnosis.hpp>
#include <fabperf/sysinfo/bonding.hpp>

namespace fabperf {

// 2: every figure is what arrived (pairs from the receivers' counts, tx from what the peer
// acknowledged), the sender's count beside it (pairs[].sender_bytes), links[].wire_audit.
// Version 1 files (the sender's count) still load in `compare` and `report`.
inline constexpr int kResultSchemaVersion = 2;
inline constexpr int kOldestResultSchemaVersion = 1;
// A data thread busier than this in the window means the host may be the limit, not the fabric.
inline constexpr double kHostLimitedPct = 90.0;
inline constexpr const char* kResultSchema = "fabperf.result";

enum class NodeStatus { ok, lost, stalled, failed };
std::string_view to_string(NodeStatus s);

struct NodeRecord {
  std::uint32_t index{0};
  std::string name;                // as the user gave it (host:port)
  std::string address;             // numeric address the coordinator reached
  std::string hostname;            // as the agent reported it
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
// The latency figures and the histogram's non-empty buckets, as the result document carries them.
struct ResultLatency : LatencySummary {
  struct Bucket {
    double lo_us{0}, hi_us{0};
    std::uint64_t count{0};
  };
  std::vector<Bucket> buckets;  // sorted by lo_us
};

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

// Every run audits itself: fabperf's payload on a link against the bytes its interface counted
// over the same window (docs/methodology.md, "The wire audit"). Payload can only be below the
// wire (headers); above it by more than the resolution means fabperf's count is wrong.
struct WireAudit {
  std::string verdict;  // "ok", "payload above wire", or why not audited ("no counters", "vanished")
  std::uint64_t payload_tx_bytes{0}, wire_tx_bytes{0}, payload_rx_bytes{0}, wire_rx_bytes{0};
  std::optional<double> tx_ratio, rx_ratio;  // payload / wire (rates over each's own window); null: no wire bytes
  // What the comparison cannot resolve, in bytes either way: the counters' read instants apart
  // from the flows' and one round trip of the link's flows (data in flight or not yet read at an
  // edge), both at the wire's rate; one 64 KiB segment per flow (interfaces count whole GSO/GRO
  // segments); and 1% for what sits between the interface and the socket.
  std::uint64_t resolution_bytes{0};
};

struct LinkReport {
  std::string name;
  std::string kind;
  std::string driver;
  int mtu{0};
  std::int64_t speed_mbps{-1};
  std::int64_t shaped_mbps{-1};  // a root tbf's or htb's limit on this host; -1 when none
  std::string duplex;
  double window_s{0};     // between the first and last counter sample
  double tx_mb_per_s{0};  // interface counters: everything on the wire, headers included
  double rx_mb_per_s{0};
  double payload_tx_mb_per_s{0};  // fabperf's payload on this link's flows that the peers acknowledged
  double payload_rx_mb_per_s{0};  // ... and that arrived here
  WireAudit wire_audit;
  double utilization_pct{-1};       // busier direction's wire bits / negotiated speed; -1 unknown
  double best_goodput_mb_per_s{0};  // framing arithmetic for this speed and MTU
  double efficiency_pct{-1};        // busier direction's payload / best goodput; -1 unknown
  std::uint64_t tx_errors{0}, rx_errors{0}, tx_dropped{0}, rx_dropped{0};
  std::vector<IntervalPoint> intervals;
  bool vanished{false};
  std::uint32_t min_sender_mss{0};  // smallest send MSS of connections this node mainly sends on
  bool jumbo_mismatch{false};
};

// One bond member over the window, from its own counters.
struct BondMemberReport {
  std::string name;
  std::int64_t speed_mbps{-1};
  std::string state_open, state_close;  // MII status at the window's open and close
  std::uint64_t link_failures{0};       // new link failures during the test
  double tx_mb_per_s{0}, rx_mb_per_s{0};
  double tx_share_pct{0}, rx_share_pct{0};           // of the bond's member bytes, each direction
  int predicted_flows{-1};                           // flows the hash puts on this member; -1 not predicted
  double predicted_tx_share_pct{-1};                 // of the predicted flows' payload bytes; -1 not predicted
  double first_tx_mb_per_s{0}, last_tx_mb_per_s{0};  // first and last interval (traffic moved?)
  double first_rx_mb_per_s{0}, last_rx_mb_per_s{0};
  std::vector<IntervalPoint> intervals;
};

// A flow that left on a bond, with the member the kernel's hash puts it on.
struct BondFlowReport {
  std::string local, remote;
  std::uint64_t tx_bytes_window{0};
  int member_index{-1};  // into the usable members; -1 not predictable
  std::string member;
};

// How one node's bond spread the test's traffic (compute_report; renderers only format).
struct BondReport {
  std::string name, mode, hash_policy;
  int peers{0};  // distinct peer addresses of the test's flows on this bond
  std::vector<BondMemberReport> members;
  double tx_mb_per_s{0}, rx_mb_per_s{0};          // sum over members
  double member_speed_sum_mbps{0};                // sum of the members' negotiated speeds; 0 unknown
  double best_goodput_mb_per_s{0};                // framing arithmetic over the member speeds
  double capacity_used_pct{-1};                   // busier direction / best goodput; -1 unknown
  double tx_jain{0}, rx_jain{0};                  // Jain's fairness over members: 1 = even, 1/n = one member
  double tx_members_used{0}, rx_members_used{0};  // (sum x)^2 / sum x^2: "1.6 of 2 links used"
  double tx_max_min{0}, rx_max_min{0};            // max/min member share; 0 when a member carried nothing
  std::string prediction;                         // "", "agrees", "differs", or why none was made
  std::vector<BondFlowReport> flows;
  std::vector<std::string> notes;  // plain-language explanations
  BondInfo inventory;              // at the window's open
};

// One RDMA device port over the window, from its counters/ and hw_counters/ (compute_report).
struct RdmaCounterDelta {
  std::string name;  // "counters/port_xmit_data", "hw_counters/sent_pkts"
  std::uint64_t delta{0};
  bool error{false};  // an error/retry counter (is_rdma_error_counter)
};
struct RdmaPortReport {
  std::string port;  // "rxe0:1"
  std::string link_layer, rate, netdev;
  int active_mtu{0};
  double window_s{0};                      // between the two counter samples
  std::vector<RdmaCounterDelta> counters;  // every readable counter, zero deltas included
  std::vector<std::string> unreadable;     // files present but unreadable
  bool have_counters{false};               // two samples of a present port
  // Data counters: port_xmit_data/port_rcv_data count 4-byte words (IB PMA): bytes = words * 4.
  std::int64_t tx_bytes{-1}, rx_bytes{-1};      // -1: the port has no data counters
  std::int64_t tx_packets{-1}, rx_packets{-1};  // port_*_packets, else hw sent_pkts/rcvd_pkts
  double tx_mb_per_s{-1}, rx_mb_per_s{-1};
  // fabperf's own bytes on queue pairs of this port (this node's flows), and what they need on
  // the wire: blocks split into packets of the active MTU, each with its headers.
  std::uint64_t payload_tx_bytes{0}, payload_rx_bytes{0};
  std::uint64_t data_packets_tx{0}, data_packets_rx{0};  // ceil(block / MTU) per block
  std::uint64_t header_bytes_per_packet{0};              // link-layer headers counted by the data counters
  double tx_bytes_per_payload{-1};                       // counter bytes / payload bytes (>= 1: headers); -1 unknown
};

// A PCIe link behind this node's test interfaces over the window: how close its ports' traffic
// came to the link's usable bandwidth (compute_report; docs/methodology.md "The slot's ceiling").
inline constexpr double kPcieCeilingPct = 90.0;  // at or above: the slot may be what bounded the node
struct PcieSlotReport {
  std::string address;               // the card's function (first of its ports)
  std::string link;                  // "x8 Gen3 (8 GT/s)": the link data can use
  std::vector<std::string> ports;    // this node's test links behind it
  std::int64_t ports_speed_mbps{0};  // every port behind the link, test links or not; 0 unknown
  double usable_gbps{0};
  double tx_gbps{0}, rx_gbps{0};  // the ports' interface counters over the window
  double used_pct{0};             // busier direction / usable
  bool at_ceiling{false};         // used_pct >= kPcieCeilingPct
  // What bounded the node when something did: "slot", "slot or host" (both at their limit), or
  // "host" (a data thread at its limit, the slot below its ceiling); "" when neither.
  std::string bound_by;
};

// A choice the agent settled by measurement during the warm-up (--send-method auto): each
// candidate's rate and CPU cost there, and a sentence saying what ran and why.
struct TrialArmReport {
  std::string name;
  double mb_per_s{0};
  double cpu_s_per_gb{0};  // the data threads' CPU seconds per 10^9 bytes moved; 0 unknown
};
struct TrialReport {
  std::string what;
  std::string chosen;
  std::string reason;
  std::vector<TrialArmReport> arms;
  std::string summary;  // "send method write: write 2150 MB/s (0.41 CPU-s/GB), sendfile 1420 ...: higher throughput"
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
  double window_open_unix_s{0};  // the agent's wall clock at the window's open; 0 unknown
  double tx_mb_per_s{0};
  double rx_mb_per_s{0};
  double cpu_busy_pct{0};
  std::int64_t retrans_segs{-1};
  double process_cpu_s{0};
  double bytes_per_cpu_s{0};   // payload moved per second of this agent's CPU time (tx+rx)
  std::string busiest_thread;  // the data thread that used the most CPU in the window
  double busiest_thread_pct{0};
  bool host_limited{false};  // a data thread was busy >= kHostLimitedPct of the window
  double clock_offset_us{0};
  double clock_uncertainty_us{0};
  double late_ms{0};  // the most this agent kept the schedule late (flows' release, window's edges)
  // The histograms are shared, not inline: a plan report keeps the nodes (read back, without
  // histograms) of up to a million steps.
  std::optional<ResultLatency> latency;
  std::shared_ptr<const LatencyHistogram> histogram;
  std::optional<ResultLatency> delay;  // ping round trips to the servers, under load (clients)
  std::shared_ptr<const LatencyHistogram> delay_histogram;
  std::vector<IntervalPoint> intervals;
  std::vector<LinkReport> links;
  std::vector<BondReport> bonds;
  std::vector<RdmaPortReport> rdma_ports;
  std::vector<TrialReport> trials;
  std::vector<PcieSlotReport> pcie_slots;
  std::vector<std::string> warnings;
  // Named counters, dips and what rose in them (diagnosis.hpp); absent in a result read back from
  // a version before named counters.
  std::optional<CounterReport> counters;
};

struct PairReport {
  std::uint32_t client{0};
  std::uint32_t server{0};
  // Whose counts tput holds: "receivers" (each direction as the receiving end read it), or,
  // when one end's result was lost, "client (acknowledged)" / "server (acknowledged)".
  std::string measured_by;
  Throughput tput;
  std::uint64_t sender_bytes{0};  // the same window as the senders counted what they wrote
  std::uint32_t connections{0};
  std::uint64_t retrans{0};
  std::uint32_t rtt_us{0};   // largest rtt among the pair's connections
  std::uint32_t snd_mss{0};  // smallest send MSS among the pair's connections
};

// A flow as its node reported it, with the report's names for its ends and its rate.
struct ConnReport : FlowResult {
  std::uint32_t node{0}, peer{0};
  double mb_per_s{0};  // delivered tx + rx
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
  std::optional<ResultLatency> latency;  // all clients merged (rpc mode)
  // Shared, as the nodes' are: a plan keeps every step's report (StepOutcome), and two inline
  // histograms would add 4 KB to each.
  std::shared_ptr<const LatencyHistogram> histogram;
  std::optional<ResultLatency> delay;  // all clients merged
  std::shared_ptr<const LatencyHistogram> delay_histogram;
  std::vector<NodeReport> nodes;
  std::vector<PairReport> pairs;
  std::vector<ConnReport> connections;
  std::vector<std::string> findings;  // problems a reader must see: lost nodes, failed flows, clamps
  double max_clock_uncertainty_us{0};
  std::uint64_t verify_errors{0};              // --verify: mismatching chunks over all flows
  std::string socksize_basis;                  // --socksize auto: how spec.socksize() was chosen
  std::vector<CategoryMovers> counter_movers;  // per symptom category, the top counters over all nodes
};

Report compute_report(const RunRecord& run);
// The name of the node with this index in the report ("node7" when it is not there).
std::string node_name(const Report& r, std::uint32_t index);
// compute_report() one node at a time, for a coordinator that writes each node out as its result
// arrives (result_stream.hpp). `order` places the node in the report (its index); the Report is
// the same whatever order nodes are added in. compute_report(run) is add() over run.nodes, finish().
class ReportBuilder {
 public:
  explicit ReportBuilder(const RunRecord& run);  // the run's header; of run.nodes only their roles are read
  ~ReportBuilder();
  [[nodiscard]] const Report& header() const;  // the run's header and role counts, before any node
  // The node's report; its connections are appended to conns (the builder keeps none).
  const NodeReport& add(const NodeRecord& n, std::size_t order, std::vector<ConnReport>& conns);
  // Nodes in order, pairs, aggregate, merged latency, findings; `connections` is left empty.
  Report finish(bool interrupted) &&;

 private:
  struct State;
  std::unique_ptr<State> s_;
};
// A link's interface counters between its first and last sample that has them, the window every
// link figure covers, and each interval between consecutive ones (link and bond member figures).
struct CounterWindow {
  std::vector<const LinkSample*> ok;  // the samples that have counters
  double window_s{0};
  std::uint64_t tx_bytes{0}, rx_bytes{0};
  std::vector<IntervalPoint> intervals;
};
CounterWindow counter_window(const LinkResult& l);
// A node's bond figures from its raw result (src/report/bonds.cpp); findings get what a reader
// must see (members outside the aggregator, link failures during the test, prediction mismatch).
BondReport bond_report(const BondResult& b, const AgentResult& a, const std::string& node,
                       std::vector<std::string>& findings);
// balance-alb receive side: which member each of a bond's addresses reaches, by the MACs the
// peers' ARP tables hold for it (their bond results carry them); a note on the bond's report.
// `nodes`: the run's nodes, or any subset holding every node that has a bond.
void explain_alb_receive(const std::vector<NodeRecord>& nodes, Report& r);
// A node's RDMA port figures from its raw result (src/report/rdma_ports.cpp); findings get the
// error counters that grew.
RdmaPortReport rdma_port_report(const RdmaPortResult& p, const AgentResult& a, std::uint64_t block_size,
                                const std::string& node, std::vector<std::string>& findings);
// RDMA headers the data counters see per packet (beyond the payload), by link layer: RoCE v2 =
// Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4; InfiniBand = LRH 8 + BTH 12 + ICRC 4
// + VCRC 2. WRITE's first packet adds RETH 16, WRITE_WITH_IMM's last ImmDt 4 (not included).
std::uint64_t rdma_header_bytes(const std::string& link_layer);
std::string render_rdma_ports_text(const Report& r);
// `fabperf links`: RDMA devices, their ports and GID tables ("" when there are none).
std::string render_rdma_inventory_text(const std::vector<RdmaDevice>& devices);
nlohmann::json rdma_ports_json(const std::vector<RdmaPortReport>& ports);
// A node's PCIe links from its raw result and its link figures (src/report/pcie_slots.cpp); a
// finding says when a slot's ceiling, or the node's CPU, bounded the node's figure.
std::vector<PcieSlotReport> pcie_slot_reports(const AgentResult& a, const std::vector<LinkReport>& links,
                                              const NodeReport& node, std::vector<std::string>& findings);
// `fabperf links`: one line per PCIe link behind the interfaces and RDMA devices, their IRQ
// placement, then the findings ("" when none is backed by a PCIe device).
std::string render_pcie_inventory_text(const std::vector<LinkInfo>& links, const std::vector<RdmaDevice>& rdma);
// Jain's fairness index of xs: (sum x)^2 / (n * sum x^2); 0 for an empty or all-zero list.
double jain_index(const std::vector<double>& xs);

// Renderers: only formatting. `verbose` adds the per-connection table.
std::string render_text(const Report& r, bool verbose);
std::string render_summary_line(const Report& r);  // nsdperf's one-line result
nlohmann::json render_json(const Report& r);
// The bonds section of the text report ("" when no bond carried the test).
std::string render_bonds_text(const Report& r);
// `fabperf links`: each bond's settings and members, then its sanity findings.
std::string render_bond_inventory_text(const std::vector<BondInfo>& bonds);

}  // namespace fabperf
