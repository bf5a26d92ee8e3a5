// What one agent measured in one test: raw counters, never derived figures (the coordinator
// computes those once, in report/compute). It is the body of the RESULT control message.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fabperf/core/histogram.hpp>
#include <fabperf/sysinfo/bonding.hpp>
#include <fabperf/sysinfo/counters.hpp>
#include <fabperf/sysinfo/links.hpp>
#include <fabperf/sysinfo/rdma_sysfs.hpp>

namespace fabperf {

enum class FlowRole { client, server };
// The direction data moves on a flow, seen from the client: write = client sends, read =
// server sends; rpc flows carry requests both ways.
// probe: a connection that carries only zero-length pings (network delay under load).
enum class FlowOp { write, read, rpc, probe };
std::string_view to_string(FlowRole r);
std::string_view to_string(FlowOp o);

// TCP_INFO at the close of the window (valid=false for transports without it).
struct TcpSample {
  bool valid{false};
  std::uint64_t total_retrans{0};
  std::uint32_t rtt_us{0};
  std::uint32_t rttvar_us{0};
  std::uint32_t snd_mss{0};
  std::uint32_t rcv_mss{0};
  std::uint32_t pmtu{0};
  std::uint32_t snd_cwnd{0};
};

struct FlowResult {
  std::uint32_t id{0};
  FlowRole role{FlowRole::client};
  FlowOp op{FlowOp::write};
  std::uint32_t peer_node{0};
  std::string local;   // address:port
  std::string remote;  // address:port
  std::uint64_t tx_bytes_total{0};
  std::uint64_t rx_bytes_total{0};
  std::uint64_t tx_bytes_window{0};  // what this end wrote (the sender's count)
  std::uint64_t rx_bytes_window{0};  // what arrived and was read: the receiver's count
  // Payload the peer acknowledged inside the window (Flow::edge): what crossed, counted
  // on this side. Every tx figure of a report uses it, never what was written into a buffer.
  std::uint64_t tx_delivered_window{0};
  // What arrived but was not counted yet gained over the window (Flow::edge at both edges;
  // 0 where unknown): rx_bytes_window plus this is what arrived, the wire audit's rx side (the
  // interface counts arrivals; a reader starved of CPU at an edge reads them in another window).
  std::int64_t rx_queued_delta{0};
  std::uint64_t msgs_window{0};     // completed RPCs (client side, rpc mode)
  std::uint64_t retrans_window{0};  // TCP_INFO total_retrans delta over the window
  TcpSample tcp;
  std::string error;               // empty when the flow ended cleanly
  std::string iface;               // local interface the flow leaves on ("" unknown)
  std::uint64_t verify_errors{0};  // --verify: received chunks that differed from the pattern
  std::string rdma_port;           // RDMA: the local device port ("rxe0:1"); "" for TCP
};

// Raw counters of one interface at one instant; t_ns from the window's open.
struct LinkSample {
  std::int64_t t_ns{0};
  LinkCounters counters;
};

// An interface that carried test traffic: its inventory and counter samples at the window's
// open, each interval and the close. A link that disappears mid-test keeps the samples it had.
struct LinkResult {
  LinkInfo info;
  std::vector<LinkSample> samples;
  bool vanished{false};
  // Named counters at the same instants as `samples`: the driver's statistics (ethtool -S), the
  // root qdisc ("qdisc.*") and carrier losses ("if.carrier_down_count"). counters.hpp.
  std::vector<CounterSample> stats;
};

// An RDMA port that carried test traffic: its inventory when the test started and its
// counters (counters/ and hw_counters/) at the window's open and close.
struct RdmaPortSample {
  std::int64_t t_ns{0};
  RdmaPortCounters counters;
};
struct RdmaPortResult {
  std::string device;
  RdmaPort info;
  std::vector<RdmaPortSample> samples;
};

// A bond that carried test traffic: its inventory when the test started and when it ended (link
// failures, members that went down), and the MACs of the flows' peers (for the layer2 hashes).
// Its members' counters are in AgentResult::links, like any link's.
struct BondResult {
  BondInfo at_open;
  BondInfo at_close;
  std::vector<std::pair<std::string, std::string>> neighbors;  // peer IP -> MAC (ARP table)
};

// Node totals over one sampling interval; t_ns is the interval's end, from the window's open.
struct IntervalSample {
  std::int64_t t_ns{0};
  std::uint64_t tx_bytes{0};
  std::uint64_t rx_bytes{0};
};

// CPU time one data thread used inside the window (host-limit detection).
struct ThreadCpu {
  std::string label;  // e.g. "send-3", "recv-0", "rpc-2"
  double cpu_s{0};
};

// A host-dependent choice the agent settled by measurement during the warm-up (send method,
// receive chunk): what each candidate moved, in how long, at what CPU cost to the threads.
struct TrialArm {
  std::string name;
  std::uint64_t bytes{0};
  double seconds{0};
  double cpu_s{0};  // the data threads' own CPU time in those slices
};
struct TrialResult {
  std::string what;    // "send method", "receive chunk"
  std::string chosen;  // one of arms[].name
  std::string reason;
  std::vector<TrialArm> arms;  // empty when not tried (reason says why)
};

struct AgentResult {
  std::uint32_t node_index{0};
  std::string hostname;
  bool aborted{false};
  std::string abort_reason;
  double window_s{0};  // the window as this agent's clock measured it
  // The window's open on this agent's wall clock (Unix ns; 0 unknown): lets counters read
  // elsewhere (a switch, monitoring, a test) be compared over exactly fabperf's window.
  std::int64_t window_open_unix_ns{0};
  double cpu_busy_pct{0};         // whole host, /proc/stat over the window
  std::int64_t retrans_segs{-1};  // host TCP RetransSegs delta over the window; -1 unknown
  double process_cpu_s{0};        // this agent's own CPU time over the window
  // How late this agent kept the schedule: released its flows after the start instant, and read
  // the window's close after its instant (a late open only shortens the window a rate is taken
  // over). A busy host runs the driver late.
  std::int64_t start_late_ns{0};
  std::int64_t close_late_ns{0};
  std::vector<FlowResult> flows;
  std::optional<LatencyHistogram> latency;  // rpc-mode clients: per-block latency
  std::optional<LatencyHistogram> delay;    // clients: ping round trips to the servers, under load
  std::vector<IntervalSample> intervals;
  std::vector<LinkResult> links;
  std::vector<BondResult> bonds;
  std::vector<RdmaPortResult> rdma_ports;
  // The host's TCP/IP MIB and softnet counters (read_host_net_counters) at the window's open,
  // each interval and the close: retransmits, RTOs, ECN marks, listen and backlog drops.
  std::vector<CounterSample> host_counters;
  std::vector<ThreadCpu> threads;
  SocketLimits socket_limits;
  std::vector<TrialResult> trials;
  std::vector<std::string> warnings;
};

nlohmann::json to_json(const AgentResult& r);
AgentResult parse_agent_result(const nlohmann::json& j);  // throws ProtocolError

}  // namespace fabperf
