// Units, parsing of user-supplied sizes and durations, and the one place where report column
// keys, headers and units are defined (text, JSON and CSV renderers all take them from here).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fabperf {

// fabperf's MB is 10^6 bytes, like nsdperf's (perftest's "MB" is 2^20: docs/methodology.md).
inline constexpr double kBytesPerMB = 1e6;

// "4M" -> 4194304. Suffixes K, M, G (binary, as nsdperf reads them), optional "iB"/"B"; a plain
// number is bytes. Throws UsageError naming `what` ("--buffsize '4Q': unknown size suffix 'Q'").
std::uint64_t parse_size(std::string_view text, std::string_view what);

// "10", "2.5", "500ms", "1m", "1h" -> duration. Throws UsageError naming `what`.
std::chrono::nanoseconds parse_duration(std::string_view text, std::string_view what);

// Parses a whole number in [lo, hi]; throws UsageError naming `what`.
std::int64_t parse_int(std::string_view text, std::string_view what, std::int64_t lo, std::int64_t hi);

// The items of a list separated by sep, empty ones included ("" is one empty item).
std::vector<std::string> split_list(std::string_view text, char sep);

// 4194304 -> "4M"; sizes that are not whole multiples print in bytes.
std::string format_size(std::uint64_t bytes);

inline double mb_per_s(std::uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / kBytesPerMB / seconds : 0.0;
}
inline double gbit_per_s(std::uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) * 8.0 / 1e9 / seconds : 0.0;
}

// A report column: the JSON key, the text table header and the unit.
struct Column {
  std::string_view key;
  std::string_view header;
  std::string_view unit;
};
// A column's key as a JSON object key (the renderers' documents are keyed by std::string).
inline std::string json_key(const Column& c) {
  return std::string(c.key);
}

namespace col {
inline constexpr Column node{"node", "node", ""};
inline constexpr Column role{"role", "role", ""};
inline constexpr Column status{"status", "status", ""};
inline constexpr Column mb_per_s{"mb_per_s", "MB/s", "10^6 B/s"};
inline constexpr Column gbit_per_s{"gbit_per_s", "Gbit/s", "10^9 bit/s"};
inline constexpr Column msg_per_s{"msg_per_s", "msg/s", "1/s"};
inline constexpr Column tx_mb_per_s{"tx_mb_per_s", "tx MB/s", "10^6 B/s"};
inline constexpr Column rx_mb_per_s{"rx_mb_per_s", "rx MB/s", "10^6 B/s"};
inline constexpr Column cpu_busy_pct{"cpu_busy_pct", "CPU %", "%"};
inline constexpr Column retrans_segs{"retrans_segs", "retrans", "segments"};
inline constexpr Column clock_offset_us{"clock_offset_us", "clock off us", "us"};
inline constexpr Column clock_uncertainty_us{"clock_uncertainty_us", "+-us", "us"};
inline constexpr Column rtt_us{"rtt_us", "rtt us", "us"};
inline constexpr Column snd_mss{"snd_mss", "mss", "B"};
inline constexpr Column retrans{"retrans", "retrans", "segments"};
inline constexpr Column p50_us{"p50_us", "p50 us", "us"};
inline constexpr Column p90_us{"p90_us", "p90 us", "us"};
inline constexpr Column p99_us{"p99_us", "p99 us", "us"};
inline constexpr Column p999_us{"p999_us", "p99.9 us", "us"};
inline constexpr Column max_us{"max_us", "max us", "us"};
inline constexpr Column mean_us{"mean_us", "mean us", "us"};
inline constexpr Column count{"count", "count", ""};
inline constexpr Column link{"link", "link", ""};
inline constexpr Column kind{"kind", "kind", ""};
inline constexpr Column speed_mbps{"speed_mbps", "speed Mb/s", "10^6 bit/s"};
inline constexpr Column mtu{"mtu", "mtu", "B"};
inline constexpr Column payload_mb_per_s{"payload_mb_per_s", "payload MB/s", "10^6 B/s"};
inline constexpr Column utilization_pct{"utilization_pct", "util %", "%"};
inline constexpr Column efficiency_pct{"efficiency_pct", "eff %", "%"};
inline constexpr Column wire_check{"wire_audit", "wire check", "payload / interface bytes"};
inline constexpr Column errors{"errors", "errors", "packets"};
inline constexpr Column drops{"drops", "drops", "packets"};
// fabperf report (plan results)
inline constexpr Column client{"client", "client", ""};
inline constexpr Column server{"server", "server", ""};
// Bonds.
inline constexpr Column member{"member", "member", ""};
inline constexpr Column tx_share_pct{"tx_share_pct", "tx %", "%"};
inline constexpr Column rx_share_pct{"rx_share_pct", "rx %", "%"};
inline constexpr Column predicted_tx_share_pct{"predicted_tx_share_pct", "pred tx %", "%"};
inline constexpr Column predicted_flows{"predicted_flows", "flows", ""};
inline constexpr Column mii_status{"mii_status", "MII", ""};
inline constexpr Column link_failures{"link_failures", "failures", ""};
// RDMA ports.
inline constexpr Column rdma_port{"rdma_port", "port", ""};
inline constexpr Column link_layer{"link_layer", "layer", ""};
inline constexpr Column rate{"rate", "rate", ""};
inline constexpr Column active_mtu{"active_mtu", "mtu", "B"};
inline constexpr Column tx_packets{"tx_packets", "tx pkts", "packets"};
inline constexpr Column rx_packets{"rx_packets", "rx pkts", "packets"};
inline constexpr Column data_packets{"data_packets", "data pkts", "packets"};
inline constexpr Column error_counters{"error_counters", "errors", ""};
}  // namespace col

}  // namespace fabperf
