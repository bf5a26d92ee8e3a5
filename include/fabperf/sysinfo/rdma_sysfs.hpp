// RDMA device inventory and port counters, read from /sys/class/infiniband (no verbs calls), so
// `fabperf links` lists RDMA ports on hosts built without rdma-core and tests run on captured
// trees. Readers take a root prefix ("" = this host), like links.hpp.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fabperf/sysinfo/pcie.hpp>

namespace fabperf {

struct RdmaGid {
  int index{0};
  std::string gid;     // as sysfs prints it: "fe80:0000:...": normalised to inet_ntop text
  std::string type;    // "IB", "RoCE v1" or "RoCE v2" (gid_attrs/types)
  std::string netdev;  // gid_attrs/ndevs: the interface a RoCE GID belongs to ("" for IB)
};

struct RdmaPort {
  int port{1};
  int state_num{0};
  std::string state;  // "ACTIVE", "DOWN", ... (sysfs "4: ACTIVE")
  int phys_state_num{0};
  std::string phys_state;  // "LinkUp", "Disabled", ...
  std::string link_layer;  // "InfiniBand" or "Ethernet"
  std::string rate;        // sysfs text: "100 Gb/sec (4X EDR)"
  double rate_gbps{0};     // 100
  std::string width;       // "4X"
  std::string speed;       // "EDR"
  int active_mtu{0};       // bytes; 0 unknown
  // Where active_mtu came from: "verbs" (ibv_query_port), "netdev" (RoCE: the largest IB MTU that
  // fits the interface MTU less the RoCE headers; sysfs has no MTU file) or "" (unknown).
  std::string mtu_source;
  std::uint32_t lid{0};
  std::uint32_t sm_lid{0};
  std::string netdev;         // RoCE: the interface under the port ("" for InfiniBand)
  std::vector<RdmaGid> gids;  // the non-empty entries of the GID table
  int gid_table_len{0};       // entries in gids/, empty ones included
};

struct RdmaDevice {
  std::string name;       // "mlx5_0", "rxe0"
  std::string node_type;  // "CA", ...
  std::string fw_ver;
  std::string node_guid;
  std::string hca_type;
  std::string board_id;
  std::string parent;  // Soft-RoCE: the interface it was added on
  std::vector<RdmaPort> ports;
  std::optional<PcieInfo> pcie;  // the HCA's PCIe link; none for Soft-RoCE
};

// Counter values of one port at one instant: "counters/NAME" and "hw_counters/NAME" keys, sorted.
struct RdmaPortCounters {
  bool present{false};  // false when the port (or device) has gone
  std::vector<std::pair<std::string, std::uint64_t>> values;
  std::vector<std::string> unreadable;  // files that exist but could not be read as a number
};

std::vector<RdmaDevice> read_rdma_devices(const std::string& root = "");
std::optional<RdmaDevice> read_rdma_device(const std::string& name, const std::string& root = "");
RdmaPortCounters read_rdma_port_counters(const std::string& device, int port, const std::string& root = "");
// This host's devices with the active MTU from ibv_query_port where this build has rdma-core.
std::vector<RdmaDevice> read_local_rdma_devices();

// "4: ACTIVE" -> {4, "ACTIVE"}; "100 Gb/sec (4X EDR)" -> {100, "4X", "EDR"}.
std::pair<int, std::string> parse_numbered_state(const std::string& text);
struct RdmaRate {
  double gbps{0};
  std::string width, speed;
};
RdmaRate parse_rdma_rate(const std::string& text);
// RoCE: the largest IB MTU (256..4096) that fits an interface MTU (less 96 bytes of RoCE v2
// headers, the kernel's iboe_get_mtu rule); 0 when none fits.
int roce_mtu_for_netdev_mtu(int netdev_mtu);

// Counters whose growth is a problem worth a finding (errors, retries, NAKs, drops, link downs).
bool is_rdma_error_counter(const std::string& key);
// Files in hw_counters that are settings, not counters (rxe's "lifespan").
bool is_rdma_counter_setting(const std::string& key);

nlohmann::json to_json(const RdmaDevice& d);
nlohmann::json to_json(const RdmaPort& p);
RdmaDevice rdma_device_from_json(const nlohmann::json& j);  // throws ProtocolError
RdmaPort rdma_port_from_json(const nlohmann::json& j);      // throws ProtocolError

}  // namespace fabperf
