// Linux bonding: inventory (/proc/net/bonding/BOND and /sys/class/net/BOND/bonding), sanity
// findings, and the kernel's transmit hash (drivers/net/bonding/bond_main.c, bond_xmit_hash) so a
// test can predict, and choose, the member each flow leaves on. Parsers are pure functions over
// text; readers take a root prefix so tests can point them at a captured tree.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fabperf/sysinfo/pcie.hpp>

namespace fabperf {

struct BondMember {
  std::string name;
  std::string mii_status;       // "up", "down", "going down", "going back"
  std::int64_t speed_mbps{-1};  // -1: unknown
  std::string duplex;           // "full", "half", "unknown"
  std::uint64_t link_failures{0};
  std::string perm_hwaddr;
  int aggregator_id{-1};     // 802.3ad; -1 when not in one (N/A) or not 802.3ad
  int actor_port_state{-1};  // 802.3ad LACP port state bits (61 = in sync, collecting, distributing)
  int partner_port_state{-1};
  int mtu{0};             // sysfs; 0 unknown
  std::string operstate;  // sysfs
};

struct BondInfo {
  std::string name;
  std::string mode;         // kernel's short name: balance-rr, active-backup, balance-xor, broadcast,
                            // 802.3ad, balance-tlb, balance-alb
  std::string hash_policy;  // layer2, layer2+3, layer3+4, encap2+3, encap3+4, vlan+srcmac; "" n/a
  std::string mii_status;
  int miimon_ms{0};
  int updelay_ms{0};
  int downdelay_ms{0};
  int arp_interval_ms{0};
  std::vector<std::string> arp_targets;
  std::string lacp_rate;      // 802.3ad: slow, fast
  std::string ad_select;      // 802.3ad: stable, bandwidth, count
  std::string active_slave;   // active-backup, tlb, alb
  int tlb_dynamic_lb{-1};     // balance-tlb/alb: 1 = transmit by load, re-placed every 10 s; 0 = by
                              // xmit hash; -1 unknown or another mode
  int active_aggregator{-1};  // 802.3ad; -1: none
  int aggregator_ports{0};
  std::string partner_mac;  // 802.3ad active aggregator's partner; "" or zero MAC: no partner
  int mtu{0};
  std::string mac;
  std::vector<BondMember> members;  // in the kernel's slave order (the order the hash indexes)
};

// /proc/net/bonding/BOND text -> BondInfo (pure). Unknown lines are ignored; a text without a
// "Bonding Mode:" line gives an empty `mode`.
BondInfo parse_proc_bonding(std::string_view text, const std::string& name);

// Reads /proc/net/bonding/NAME, then fills or overrides from sysfs (mode, xmit_hash_policy,
// miimon, lacp_rate, ad_select, slaves order, member MTU/operstate). nullopt: not a bond.
std::optional<BondInfo> read_bond(const std::string& name, const std::string& root = "");

// True for a zero or empty MAC (802.3ad without a partner shows 00:00:00:00:00:00).
bool is_zero_mac(std::string_view mac);

// Modes that pick the member by hash: 802.3ad and balance-xor.
bool bond_hashes(const BondInfo& b);

// Members the hash indexes: for 802.3ad those up in the active aggregator, otherwise those up,
// in slave order (the kernel's usable_slaves array).
std::vector<std::string> usable_members(const BondInfo& b);

// Sanity findings before a test: members of different speeds, members down, MTU mismatch between
// bond and members, 802.3ad without a partner or with members outside the active aggregator,
// layer2 policy with few peers (`peers`: distinct peer addresses the test uses on this bond;
// <0 unknown).
std::vector<std::string> bond_findings(const BondInfo& b, int peers = -1);

// The same checks with what to do about each (pre-flight names the node, the bond and the fix).
// "error": the bond would carry less than it should (a member down or not aggregated, no LACP
// partner), so a test on it measures the fault, not the fabric.
std::vector<LinkFinding> bond_checks(const BondInfo& b, int peers = -1);

// ---- transmit hash -------------------------------------------------------------------------

enum class HashPolicy { layer2, layer23, layer34, encap23, encap34, vlan_srcmac };
std::optional<HashPolicy> parse_hash_policy(std::string_view s);  // "layer3+4" ...; nullopt unknown

using Mac = std::array<std::uint8_t, 6>;
std::optional<Mac> parse_mac(std::string_view s);

// One flow's packet headers as the bond sees them when it transmits.
struct FlowHeaders {
  std::string src_ip, dst_ip;  // numeric IPv4 or IPv6
  std::uint16_t src_port{0}, dst_port{0};
  Mac src_mac{}, dst_mac{};  // only layer2, layer2+3, encap2+3, vlan+srcmac use them
};

// The kernel's bond_xmit_hash for a TCP segment of this flow. nullopt when the kernel does not
// use header fields: encap3+4 takes the socket's random flow hash (skb->l4_hash) for locally
// sent TCP, so no prediction is possible. Throws UsageError on an unparsable address.
std::optional<std::uint32_t> bond_xmit_hash(HashPolicy p, const FlowHeaders& h);

// The member index (into usable_members) the flow leaves on: hash % count.
std::optional<int> predict_member(HashPolicy p, const FlowHeaders& h, int member_count);

// True when the policy's hash depends on the L4 ports (so source ports can steer flows).
bool policy_uses_ports(HashPolicy p);

// The first source port in [first, last], not in `taken`, that puts the flow (h with its src_port
// replaced) on `member`; nullopt when none does or the policy ignores ports. Pure: the caller
// still has to bind the port (and ask again, with it taken, on EADDRINUSE).
std::optional<std::uint16_t> port_for_member(HashPolicy p, FlowHeaders h, int member, int member_count,
                                             std::uint16_t first, std::uint16_t last,
                                             const std::vector<std::uint16_t>& taken);

nlohmann::json to_json(const BondInfo& b);
BondInfo bond_from_json(const nlohmann::json& j);  // throws ProtocolError

}  // namespace fabperf
