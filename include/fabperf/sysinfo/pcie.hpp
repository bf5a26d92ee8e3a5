// The PCIe link behind a network interface or RDMA device: how it trained against what both of
// its ends support, the bandwidth that leaves, the ports that share it, its NUMA node and where
// its interrupts are served. Read from sysfs and procfs under a root prefix ("" = this host),
// like links.hpp, so tests run on captured trees. docs/methodology.md "The slot's ceiling".
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace fabperf {

// One end's view of a link: per-lane rate and lanes (0 = unknown).
struct PcieLinkState {
  double gts{0};  // 2.5, 5, 8, 16, 32, 64 GT/s
  int width{0};   // lanes
  friend bool operator==(const PcieLinkState&, const PcieLinkState&) = default;
};

// A port (an interface, or an InfiniBand port that has none) on a function behind the link.
struct PciePort {
  std::string name;             // "eth2", "mlx5_0:1"
  std::int64_t speed_mbps{-1};  // negotiated; -1 unknown (down, or a driver that says none)
};

// Where the function's interrupts are served. `served*` count since boot (/proc/interrupts);
// `remote_affinity` counts IRQs whose smp_affinity_list (where it may go) or effective affinity
// (where it goes now) holds no CPU of the device's NUMA node.
struct IrqPlacement {
  int irqs{0};                    // the function's IRQs found in /proc/interrupts
  std::uint64_t served{0};        // interrupts on any CPU
  std::uint64_t served_local{0};  // on the CPUs local to the device (its local_cpulist)
  int remote_affinity{0};
  std::string local_cpus;      // the device's local_cpulist ("0-15"); "" unknown
  bool all_cpus_local{false};  // local_cpus holds every CPU: placement cannot be wrong
};

struct PcieInfo {
  std::string address;     // the function: "0000:3b:00.0"
  std::string port;        // its upstream port (root port or switch downstream port); "" none
  PcieLinkState link;      // as trained (current_link_speed/width)
  PcieLinkState max;       // what the device itself supports (max_link_speed/width)
  PcieLinkState port_max;  // what the port, i.e. the slot, supports; 0 unknown
  std::string limit_at;    // a link further up that is narrower (a switch's uplink): its device
  PcieLinkState limit;     // that link as trained; 0 when none is narrower
  int max_payload{0};      // Device Control's Max_Payload_Size from config space; 0 unread
  int numa_node{-1};
  std::vector<PciePort> ports;  // every port behind the same link, this device's included
  IrqPlacement irq;
};

// Line-code efficiency of a per-lane rate: 8b/10b to 5 GT/s, 128b/130b from 8 GT/s, and at
// 64 GT/s (FLIT mode) the 236 TLP bytes of each 256-byte flit. 0 for an unknown rate.
double pcie_line_code(double gts);
// PCIe generation of a per-lane rate (2.5 -> 1 ... 64 -> 6); 0 unknown.
int pcie_generation(double gts);
// GT/s x lanes x line code: the link's raw data rate, Gbit/s.
double pcie_raw_gbps(const PcieLinkState& s);
// The payload size assumed when config space cannot be read (needs root): 256 bytes, what most
// server root complexes allow.
inline constexpr int kPcieAssumedPayload = 256;
// Bytes each TLP adds to its payload: framing/STP token 4 + sequence number 2 + 4-DW header
// (64-bit address) 16 + LCRC 4.
inline constexpr int kPcieTlpOverhead = 26;
// Raw rate less the TLP overhead at `max_payload` bytes (kPcieAssumedPayload when 0): the
// ceiling for bulk DMA. DLLPs and descriptor traffic take a few percent more: an upper bound.
double pcie_usable_gbps(const PcieLinkState& s, int max_payload);
// The link data can actually use: the trained link, or a narrower one further up.
PcieLinkState pcie_effective_link(const PcieInfo& p);
double pcie_ceiling_gbps(const PcieInfo& p);
// Sum of the ports' known speeds (Mb/s); 0 when none is known.
std::int64_t pcie_ports_mbps(const PcieInfo& p);
// "x4 Gen3 (8 GT/s)"; "?" for an unknown state.
std::string pcie_link_text(const PcieLinkState& s);
// "2 x 56 Gbit/s" when the known speeds are equal, else "56+40 Gbit/s"; "" when none is known.
std::string pcie_ports_text(const PcieInfo& p);
// One link, however many of its ports are listed: the device's port when it has one.
std::string pcie_link_key(const PcieInfo& p);

// What is wrong with a link (a PCIe link here, a bond in bonding.hpp) and what to do about it.
struct LinkFinding {
  std::string what;
  std::string fix;
  std::string level;  // "error" or "warning"
};
// `who` names the link in the text (the port names). Errors: trained below what the device
// supports. Warnings: the ceiling below the ports' total; interrupts mostly served by CPUs
// outside the device's NUMA node.
std::vector<LinkFinding> pcie_link_findings(const PcieInfo& p, const std::string& who);
// The function's own interrupts (each function of a multi-function card has its own).
std::vector<LinkFinding> pcie_irq_findings(const PcieInfo& p, const std::string& who);

// `device`: a path to the device (a /sys/class/net/NAME/device or /sys/class/infiniband/NAME/device
// link, or the device's directory) under `root`. nullopt when no PCI function is behind it.
std::optional<PcieInfo> read_pcie(const std::string& device, const std::string& root = "");

nlohmann::json to_json(const PcieInfo& p);         // with the derived figures and findings
PcieInfo pcie_from_json(const nlohmann::json& j);  // throws ProtocolError; derived figures ignored

}  // namespace fabperf
