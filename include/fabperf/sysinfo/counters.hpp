// What the wire saw: named counters beside the interface statistics. Readers for the driver's
// own statistics (the ethtool ioctls, what `ethtool -S` prints), the root qdisc's drops
// (rtnetlink), the TCP/IP MIB counters that explain a dip (/proc/net/snmp, /proc/net/netstat) and
// softnet drops (/proc/net/softnet_stat); and the counter dictionary, a pure table that maps
// driver-specific names to categories (PFC pause, discards, ECN, CNP, FEC, CRC, link down, ...).
// File readers take a root prefix ("" = this host) like every sysinfo reader; the ioctl and
// netlink readers only ask this host's kernel (the calling thread's network namespace).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fabperf {

// Counter name -> value, in the order the source lists them.
using CounterValues = std::vector<std::pair<std::string, std::uint64_t>>;
// The counter of `in` named `name`, looked for at position `at` first: the samples of one source
// list their counters in one order, so only a sample that differs is searched. nullptr: none.
const CounterValues::value_type* find_counter(const CounterValues& in, std::size_t at, std::string_view name);
// Calls f(name, value in a, value in b) for every counter of b that a also holds, in b's order.
// Matched by position; at the first that differs a's names are indexed once, so the walk stays
// linear however many differ (thousands of driver counters, a sample per interval).
template <typename F>
void each_counter_pair(const CounterValues& a, const CounterValues& b, F&& f) {
  std::unordered_map<std::string_view, std::uint64_t> by_name;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const auto& [k, v] = b[i];
    if (i < a.size() && a[i].first == k) {
      f(k, a[i].second, v);
      continue;
    }
    if (by_name.empty()) {
      for (const auto& [ka, va] : a) by_name.emplace(ka, va);
    }
    if (const auto it = by_name.find(k); it != by_name.end()) f(k, it->second, v);
  }
}

// Named counters of one source (an interface's driver statistics and qdisc, or the host's MIB)
// at one instant; t_ns from the window's open, like LinkSample.
struct CounterSample {
  std::int64_t t_ns{0};
  CounterValues values;
};

// The most named counter values one agent's result may hold once every sample is whole again
// (counters x samples, over all its series). On the wire a sample carries only what changed, so
// a small RESULT could otherwise expand to gigabytes in the coordinator (8,000 names and 3,000
// empty samples: 149 KB took 964 MB). An agent halves its series to stay within it, as it does
// for the frame cap (agent/result_fit.hpp); a coordinator refuses a RESULT beyond it. About 70 MB.
inline constexpr std::size_t kMaxCounterCells = std::size_t{1} << 20;
std::size_t counter_cells(const std::vector<CounterSample>& samples);

// ETHTOOL_GSSET_INFO + GSTRINGS + GSTATS on a live interface; nullopt when the interface is gone
// or its driver exposes no statistics (loopback). Names are as the driver prints them.
std::optional<CounterValues> read_ethtool_stats(const std::string& ifname);

// The root qdisc of an interface, from an RTM_GETQDISC dump: "qdisc.drops", "qdisc.overlimits",
// "qdisc.requeues" (a shaper's drops never reach the interface's own counters); empty when the
// interface has none or is gone.
CounterValues read_qdisc_counters(const std::string& ifname);
// The rate a root token-bucket qdisc (tbf), or the highest ceil of a root htb's top classes,
// holds the interface to, in Mbit/s; -1 without one.
std::int64_t read_shaped_mbps(const std::string& ifname);

// Everything read_ethtool_stats, read_qdisc_counters and the interface's
// /sys/class/net/NAME/carrier_down_count ("if.carrier_down_count") say about one interface.
CounterValues read_link_named_counters(const std::string& ifname);

// Every "Section.Name value" pair of a /proc/net/snmp or /proc/net/netstat text (header line,
// value line, per section): "Tcp.RetransSegs", "TcpExt.TCPTimeouts", "IpExt.InCEPkts". Negative
// values (Tcp.MaxConn -1) and unparsable ones are skipped. Pure.
CounterValues parse_proc_net_mib(std::string_view text);
// /proc/net/softnet_stat summed over CPUs: "softnet.dropped" (column 2: the backlog was full) and
// "softnet.time_squeeze" (column 3: the budget ran out with work left). Pure.
CounterValues parse_softnet_stat(std::string_view text);
// The MIB counters that explain a dip (retransmits, RTOs, ECN CE, listen drops, receive-queue
// and backlog drops, UDP buffer errors) and softnet drops, under root ("" = this host's
// /proc of the calling thread's network namespace).
CounterValues read_host_net_counters(const std::string& root = "");

// ---- the counter dictionary -------------------------------------------------------------

enum class CounterCategory {
  pause,            // flow control: PFC per priority, global pause, IB credit waits
  discard,          // dropped for lack of buffer or by policy: NIC discards, out-of-buffer, qdisc, softnet
  ecn,              // ECN congestion-experienced marks
  cnp,              // RoCE congestion notification packets sent or handled
  fec_corrected,    // forward error correction repaired the data (a marginal link, still clean)
  fec_uncorrected,  // FEC could not repair: the frame is lost
  crc,              // CRC/FCS and symbol errors: damaged frames
  link_down,        // the link went down (or recovered from an error)
  retransmit,       // TCP or RDMA retransmissions, out-of-sequence packets
  timeout,          // retransmission timeouts (TCP RTO, RDMA local ACK timeout)
  error,            // other error counters (length errors, listen overflows, ...)
  traffic,          // bytes, packets, frames: load, not a symptom
  other,            // not in the dictionary: reported raw
};
std::string_view to_string(CounterCategory c);
// "pause" -> CounterCategory::pause; nullopt for an unknown name.
std::optional<CounterCategory> counter_category_from_string(std::string_view s);
// The categories whose growth is a symptom, in the order a diagnosis lists them.
const std::vector<CounterCategory>& symptom_categories();
// A few plain words per category ("PFC pause", "FEC uncorrected").
std::string_view describe(CounterCategory c);

struct CounterClass {
  CounterCategory category{CounterCategory::other};
  int priority{-1};       // PFC/CoS priority (0..7) when the name carries one
  std::string direction;  // "rx", "tx" or ""
};
// Classifies a counter name from any source: ethtool names of mlx5, ice, bnxt_en, i40e, ixgbe,
// virtio_net, veth; RDMA "counters/NAME" and "hw_counters/NAME" (mlx5_ib, rxe, the IB PMA);
// "qdisc.*", "softnet.*", the MIB's "Section.Name"; the interface's "if.*". Pure and table-driven.
CounterClass classify_counter(std::string_view name);
// "rx_prio3_pause" -> "PFC, priority 3"; "qdisc.drops" -> "discard"; empty for traffic/other.
std::string counter_label(std::string_view name);

}  // namespace fabperf
