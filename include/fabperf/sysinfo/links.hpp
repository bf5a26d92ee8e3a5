// Network interface inventory and counters, read from sysfs/procfs (the ethtool ioctl where sysfs
// has no answer). Readers take a root prefix so tests can point them at a captured tree.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fabperf/sysinfo/pcie.hpp>

namespace fabperf {

struct LinkInfo {
  std::string name;
  std::string kind;  // physical, loopback, veth, bond, bridge, vlan, virtual
  std::string driver;
  std::string operstate;
  std::string mac;
  std::vector<std::string> addresses;  // "198.18.0.1/24", "fd00::1/64"
  int mtu{0};
  std::int64_t speed_mbps{-1};       // negotiated; -1 when the link reports none (virtual, down)
  std::int64_t shaped_mbps{-1};      // root tbf's rate, root htb's top ceil; -1: none
  std::string duplex;                // full, half, unknown
  std::string master;                // bond or bridge this interface belongs to
  std::vector<std::string> members;  // a bond's slaves
  std::string vlan_parent;
  int numa_node{-1};
  std::optional<PcieInfo> pcie;  // the PCIe link behind it; none for virtual interfaces
};

struct SocketLimits {
  std::uint64_t rmem_max{0};
  std::uint64_t wmem_max{0};
  std::uint64_t tcp_rmem[3]{};  // min default max
  std::uint64_t tcp_wmem[3]{};
};

struct LinkCounters {
  bool present{false};  // false when the interface has gone
  std::uint64_t tx_bytes{0}, rx_bytes{0}, tx_packets{0}, rx_packets{0};
  std::uint64_t tx_errors{0}, rx_errors{0}, tx_dropped{0}, rx_dropped{0};
};
// The counters by their statistics file names, in the order a RESULT's link samples carry them.
inline constexpr std::pair<const char*, std::uint64_t LinkCounters::*> kLinkCounterFiles[] = {
    {"tx_bytes", &LinkCounters::tx_bytes},     {"rx_bytes", &LinkCounters::rx_bytes},
    {"tx_packets", &LinkCounters::tx_packets}, {"rx_packets", &LinkCounters::rx_packets},
    {"tx_errors", &LinkCounters::tx_errors},   {"rx_errors", &LinkCounters::rx_errors},
    {"tx_dropped", &LinkCounters::tx_dropped}, {"rx_dropped", &LinkCounters::rx_dropped}};

// `root` prefixes /sys and /proc ("" = this host).
std::vector<LinkInfo> read_links(const std::string& root = "");
std::optional<LinkInfo> read_link(const std::string& name, const std::string& root = "");
LinkCounters read_link_counters(const std::string& name, const std::string& root = "");
SocketLimits read_socket_limits(const std::string& root = "");

// The interface that owns a local address (numeric, IPv4 or IPv6; "[v6]:port" and "v4:port"
// forms accepted); empty when none does.
std::string interface_of_address(const std::string& address);

// Best possible TCP payload rate for a link, MB/s (10^6 B/s): Ethernet costs 38 bytes per frame
// beyond the IP packet (preamble+SFD 8, header 14, FCS 4, gap 12) and IPv4+TCP with timestamps
// take 52 bytes of the MTU: goodput = rate * (MTU - 52) / (MTU + 38).
double best_tcp_goodput_mb_per_s(std::int64_t speed_mbps, int mtu);
// The largest TCP MSS the MTU allows for IPv4 with timestamps (MTU - 52).
int expected_mss(int mtu);

nlohmann::json to_json(const LinkInfo& l);
nlohmann::json to_json(const SocketLimits& s);
LinkInfo link_from_json(const nlohmann::json& j);  // throws ProtocolError

}  // namespace fabperf
