#include <fabperf/core/error.hpp>
#include <fabperf/core/fields.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/sysinfo/bonding.hpp>
#include "sysinfo/file_read.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace fs = std::filesystem;

namespace fabperf {
namespace {

using sysfs::read_all;
using sysfs::read_line;
using sysfs::to_i64;
using sysfs::to_int;
using sysfs::trim;

std::string first_word(std::string_view s) {
  const std::string t = trim(s);
  return t.substr(0, t.find(' '));
}

// The 32-bit words the kernel xors, as an x86 (little-endian) kernel reads network-order bytes.
std::uint32_t le32(const std::uint8_t* b) {
  return std::uint32_t{b[0]} | std::uint32_t{b[1]} << 8 | std::uint32_t{b[2]} << 16 | std::uint32_t{b[3]} << 24;
}

// flow_get_u32_src/dst: the IPv4 address, or ipv6_addr_hash (xor of the four words).
struct Addr {
  bool v6{false};
  std::uint32_t word{0};
};
Addr addr_word(const std::string& ip) {
  in_addr a4{};
  in6_addr a6{};
  if (inet_pton(AF_INET, ip.c_str(), &a4) == 1) {
    return {false, le32(reinterpret_cast<const std::uint8_t*>(&a4.s_addr))};
  }
  if (inet_pton(AF_INET6, ip.c_str(), &a6) == 1) {
    const auto* b = a6.s6_addr;
    return {true, le32(b) ^ le32(b + 4) ^ le32(b + 8) ^ le32(b + 12)};
  }
  throw UsageError(fmt::format("bond hash: '{}' is not a numeric IPv4 or IPv6 address", ip));
}

// bond_eth_hash: last bytes of both MACs and the EtherType in host order.
std::uint32_t eth_hash(const FlowHeaders& h, bool v6) {
  const std::uint32_t proto = v6 ? 0x86DD : 0x0800;
  return std::uint32_t{h.dst_mac[5]} ^ std::uint32_t{h.src_mac[5]} ^ proto;
}

// bond_ip_hash: xor both addresses in, fold, and for the L4 policies drop the lowest bit.
std::uint32_t ip_hash(std::uint32_t hash, std::uint32_t src, std::uint32_t dst, bool l4) {
  hash ^= dst ^ src;
  hash ^= hash >> 16;
  hash ^= hash >> 8;
  return l4 ? hash >> 1 : hash;
}

// Short mode name for the kernel's long one ("IEEE 802.3ad Dynamic link aggregation" -> "802.3ad");
// "" when unknown.
std::string bond_mode_short(std::string_view long_name) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"load balancing (round-robin)", "balance-rr"},
      {"fault-tolerance (active-backup)", "active-backup"},
      {"load balancing (xor)", "balance-xor"},
      {"fault-tolerance (broadcast)", "broadcast"},
      {"IEEE 802.3ad Dynamic link aggregation", "802.3ad"},
      {"transmit load balancing", "balance-tlb"},
      {"adaptive load balancing", "balance-alb"},
  };
  for (const auto& [l, s] : kNames) {
    if (long_name.substr(0, std::string_view(l).size()) == l) return s;
  }
  return "";
}

}  // namespace

BondInfo parse_proc_bonding(std::string_view text, const std::string& name) {
  BondInfo b;
  b.name = name;
  enum class Block { master, active_agg, slave, actor_pdu, partner_pdu };
  static const std::map<std::string_view, Block> kHeads = {{"Active Aggregator Info:", Block::active_agg},
                                                           {"details actor lacp pdu:", Block::actor_pdu},
                                                           {"details partner lacp pdu:", Block::partner_pdu}};
  // The keys of a pdu and of the active aggregator block; any other key ends the block.
  static const std::set<std::string_view> kPduKeys = {"port state", "system priority", "system mac address", "port key",
                                                      "oper key",   "port priority",   "port number"};
  static const std::set<std::string_view> kAggKeys = {"Aggregator ID", "Number of ports", "Actor Key", "Partner Key",
                                                      "Partner Mac Address"};
  Block block = Block::master;
  BondMember* m = nullptr;
  for (const auto& raw : split_list(text, '\n')) {
    const std::string line = trim(raw);
    if (const auto h = kHeads.find(line); h != kHeads.end()) {
      if (m || h->second == Block::active_agg) block = h->second;  // pdus belong to a slave
      continue;
    }
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    const std::string val = trim(std::string_view(line).substr(colon + 1));
    if (key == "Slave Interface") {
      m = &b.members.emplace_back();
      m->name = val;
      block = Block::slave;
      continue;
    }
    if (block == Block::actor_pdu || block == Block::partner_pdu) {
      if (key == "port state")
        (block == Block::actor_pdu ? m->actor_port_state : m->partner_port_state) = to_int(val, -1);
      if (kPduKeys.count(key)) continue;  // the other pdu fields are not used
      block = Block::slave;
    }
    if (block == Block::slave && m) {
      if (key == "MII Status") m->mii_status = val;
      if (key == "Speed") m->speed_mbps = val.rfind("Unknown", 0) == 0 ? -1 : to_i64(val, -1);
      if (key == "Duplex") m->duplex = val;
      if (key == "Link Failure Count")
        m->link_failures = static_cast<std::uint64_t>(std::max<std::int64_t>(0, to_i64(val, 0)));
      if (key == "Permanent HW addr") m->perm_hwaddr = val;
      if (key == "Aggregator ID") m->aggregator_id = to_int(val, -1);
      continue;
    }
    if (block == Block::active_agg) {
      if (key == "Aggregator ID") b.active_aggregator = to_int(val, -1);
      if (key == "Number of ports") b.aggregator_ports = to_int(val, 0);
      if (key == "Partner Mac Address") b.partner_mac = val;
      if (kAggKeys.count(key)) continue;
      block = Block::master;
    }
    if (key == "MII Polling Interval (ms)") b.miimon_ms = to_int(val, 0);
    if (key == "Up Delay (ms)") b.updelay_ms = to_int(val, 0);
    if (key == "Down Delay (ms)") b.downdelay_ms = to_int(val, 0);
    if (key == "ARP Polling Interval (ms)") b.arp_interval_ms = to_int(val, 0);
    if (key == "Bonding Mode") b.mode = bond_mode_short(val);
    if (key == "Transmit Hash Policy") b.hash_policy = first_word(val);
    if (key == "MII Status") b.mii_status = val;
    if (key == "LACP rate") b.lacp_rate = val;
    if (key == "Aggregator selection policy (ad_select)") b.ad_select = val;
    if (key == "Currently Active Slave") b.active_slave = val == "None" ? "" : val;
    if (key == "ARP IP target/s (n.n.n.n form)") b.arp_targets = sysfs::words(val, ", \t");
  }
  return b;
}

std::optional<BondInfo> read_bond(const std::string& name, const std::string& root) {
  if (name.empty() || name.find('/') != std::string::npos) return std::nullopt;
  const std::string sys = root + "/sys/class/net/" + name;
  std::error_code ec;
  if (!fs::exists(sys + "/bonding", ec)) return std::nullopt;
  BondInfo b = parse_proc_bonding(read_all(root + "/proc/net/bonding/" + name), name);
  const std::string bs = sys + "/bonding/";
  // sysfs is authoritative where it answers (and the only source when /proc is not mounted for
  // this namespace); /proc keeps what sysfs does not show per member.
  const auto sysfs_word = [&](const char* file, std::string& to) {
    if (auto v = first_word(read_line(bs + file)); !v.empty()) to = v;
  };
  // An empty or unparsable file leaves a number as it was (to_int's fallback).
  const auto sysfs_int = [&](const char* file, int& to) { to = sysfs::read_int(bs + file, to); };
  sysfs_word("mode", b.mode);
  if (bond_hashes(b)) {
    sysfs_word("xmit_hash_policy", b.hash_policy);
  } else {
    b.hash_policy.clear();  // only the hashing modes use it
  }
  sysfs_int("miimon", b.miimon_ms);
  sysfs_int("arp_interval", b.arp_interval_ms);
  if (b.mode == "balance-alb" || b.mode == "balance-tlb") sysfs_int("tlb_dynamic_lb", b.tlb_dynamic_lb);
  if (b.mode == "802.3ad") {
    sysfs_word("lacp_rate", b.lacp_rate);
    sysfs_word("ad_select", b.ad_select);
    sysfs_int("ad_aggregator", b.active_aggregator);
    sysfs_int("ad_num_ports", b.aggregator_ports);
    sysfs_word("ad_partner_mac", b.partner_mac);
  }
  b.mtu = sysfs::read_int(sys + "/mtu", 0);
  b.mac = read_line(sys + "/address");
  if (b.mii_status.empty()) b.mii_status = read_line(sys + "/operstate") == "up" ? "up" : "down";
  // The slave list in sysfs is the kernel's order; members /proc did not list are added.
  std::vector<BondMember> ordered;
  for (const auto& s : sysfs::words(read_line(bs + "slaves"))) {
    auto it = std::find_if(b.members.begin(), b.members.end(), [&](const BondMember& x) { return x.name == s; });
    BondMember x = it != b.members.end() ? *it : BondMember{};
    x.name = s;
    const std::string ms = fmt::format("{}/sys/class/net/{}", root, s);
    const std::string sl = ms + "/bonding_slave/";
    if (x.mii_status.empty()) x.mii_status = read_line(sl + "mii_status");
    if (x.link_failures == 0) x.link_failures = sysfs::read_u64(sl + "link_failure_count").value_or(0);
    if (x.perm_hwaddr.empty()) x.perm_hwaddr = read_line(sl + "perm_hwaddr");
    if (x.aggregator_id < 0 && b.mode == "802.3ad") x.aggregator_id = sysfs::read_int(sl + "ad_aggregator_id", -1);
    if (x.actor_port_state < 0) x.actor_port_state = sysfs::read_int(sl + "ad_actor_oper_port_state", -1);
    if (x.partner_port_state < 0) x.partner_port_state = sysfs::read_int(sl + "ad_partner_oper_port_state", -1);
    if (x.speed_mbps < 0) x.speed_mbps = sysfs::read_speed(ms + "/speed");
    if (x.duplex.empty()) x.duplex = read_line(ms + "/duplex");
    x.mtu = sysfs::read_int(ms + "/mtu", 0);
    x.operstate = read_line(ms + "/operstate");
    ordered.push_back(std::move(x));
  }
  if (!ordered.empty()) b.members = std::move(ordered);
  for (auto& x : b.members) x.duplex = x.duplex.empty() ? "unknown" : x.duplex;
  return b;
}

bool is_zero_mac(std::string_view mac) {
  return std::all_of(mac.begin(), mac.end(), [](char c) { return c == '0' || c == ':'; });
}

bool bond_hashes(const BondInfo& b) {
  return b.mode == "802.3ad" || b.mode == "balance-xor";
}

std::vector<std::string> usable_members(const BondInfo& b) {
  std::vector<std::string> out;
  for (const auto& m : b.members) {
    if (m.mii_status != "up") continue;
    if (b.mode == "802.3ad" && (b.active_aggregator < 0 || m.aggregator_id != b.active_aggregator)) continue;
    out.push_back(m.name);
  }
  return out;
}

std::vector<LinkFinding> bond_checks(const BondInfo& b, int peers) {
  std::vector<LinkFinding> f;
  const std::string who = fmt::format("bond {} ({})", b.name, b.mode.empty() ? "unknown mode" : b.mode);
  const std::string proc = fmt::format("/proc/net/bonding/{}", b.name);
  if (b.members.empty()) {
    f.push_back({fmt::format("{}: has no members", who),
                 fmt::format("enslave its links (ip link set LINK master {})", b.name), "error"});
    return f;
  }
  std::set<std::int64_t> speeds;
  for (const auto& m : b.members) {
    if (m.mii_status != "up") {
      f.push_back(
          {fmt::format("{}: member {} is {} (MII status), {} link failures so far", who, m.name,
                       m.mii_status.empty() ? "in an unknown state" : m.mii_status, m.link_failures),
           fmt::format("bring {} up (ip link set {} up; check its cable, transceiver and switch port), then check {}",
                       m.name, m.name, proc),
           "error"});
    }
    if (m.speed_mbps > 0) speeds.insert(m.speed_mbps);
    if (b.mtu > 0 && m.mtu > 0 && m.mtu != b.mtu) {
      f.push_back({fmt::format("{}: MTU mismatch: bond {} but member {} has {}", who, b.mtu, m.name, m.mtu),
                   fmt::format("set the MTU on the bond, which passes it to every member: ip link set {} mtu {}",
                               b.name, b.mtu),
                   "warning"});
    }
  }
  if (speeds.size() > 1) {
    std::string list;
    for (const auto& m : b.members)
      list += fmt::format("{}{} {}", list.empty() ? "" : ", ", m.name,
                          m.speed_mbps > 0 ? fmt::format("{} Mb/s", m.speed_mbps) : "?");
    f.push_back(
        {fmt::format("{}: members run at different speeds ({}): hashing spreads flows, not bytes, evenly", who, list),
         "check the slower member's negotiated speed (ethtool), cable, transceiver and switch port; bond members of "
         "one speed",
         "warning"});
  }
  if (b.mode == "802.3ad") {
    const std::string lacp =
        "configure the switch ports of every member as one LACP (802.3ad) port-channel, mode active";
    if (b.active_aggregator < 0) {
      f.push_back(
          {fmt::format("{}: no active aggregator: LACP has not come up", who), lacp + ", then check " + proc, "error"});
    } else {
      if (is_zero_mac(b.partner_mac)) {
        f.push_back(
            {fmt::format("{}: no LACP partner (partner MAC {}): the switch side does not run LACP on these ports", who,
                         b.partner_mac.empty() ? "unknown" : b.partner_mac),
             lacp, "error"});
      }
      for (const auto& m : b.members) {
        if (m.aggregator_id != b.active_aggregator) {
          f.push_back(
              {fmt::format("{}: member {} is outside the active aggregator ({} vs {}): it carries no traffic", who,
                           m.name, m.aggregator_id < 0 ? std::string("none") : std::to_string(m.aggregator_id),
                           b.active_aggregator),
               fmt::format("put {}'s switch port in the same LACP port-channel (same switch or MLAG pair, same "
                           "speed) as the other members, then check {}",
                           m.name, proc),
               "error"});
        }
      }
    }
  }
  if (bond_hashes(b) && (b.hash_policy == "layer2" || b.hash_policy.empty()) && peers >= 0 &&
      peers < static_cast<int>(b.members.size()) * 2) {
    f.push_back(
        {fmt::format("{}: xmit_hash_policy layer2 hashes by MAC only: with {} peer(s) at most {} of {} members "
                     "carry this host's transmit traffic",
                     who, peers, std::min<std::size_t>(static_cast<std::size_t>(std::max(peers, 1)), b.members.size()),
                     b.members.size()),
         fmt::format("hash by addresses and ports: echo layer3+4 > /sys/class/net/{}/bonding/xmit_hash_policy "
                     "(and the same policy in the host's network configuration)",
                     b.name),
         "warning"});
  }
  return f;
}

std::vector<std::string> bond_findings(const BondInfo& b, int peers) {
  std::vector<std::string> out;
  for (auto& c : bond_checks(b, peers)) out.push_back(std::move(c.what));
  return out;
}

// ---- transmit hash -------------------------------------------------------------------------

// The policies' kernel names.
using PolicyName = std::pair<HashPolicy, std::string_view>;
constexpr PolicyName kPolicyNames[] = {{HashPolicy::layer2, "layer2"},    {HashPolicy::layer23, "layer2+3"},
                                       {HashPolicy::layer34, "layer3+4"}, {HashPolicy::encap23, "encap2+3"},
                                       {HashPolicy::encap34, "encap3+4"}, {HashPolicy::vlan_srcmac, "vlan+srcmac"}};

std::optional<HashPolicy> parse_hash_policy(std::string_view s) {
  const auto* it = std::ranges::find(kPolicyNames, s, &PolicyName::second);
  return it == std::end(kPolicyNames) ? std::nullopt : std::optional(it->first);
}

std::optional<Mac> parse_mac(std::string_view s) {
  Mac m{};
  unsigned v[6];
  if (s.size() != 17 ||
      std::sscanf(std::string(s).c_str(), "%2x:%2x:%2x:%2x:%2x:%2x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) {
    return std::nullopt;
  }
  for (int i = 0; i < 6; ++i) m[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v[i]);
  return m;
}

std::optional<std::uint32_t> bond_xmit_hash(HashPolicy p, const FlowHeaders& h) {
  if (p == HashPolicy::vlan_srcmac) {
    // bond_vlan_srcmac_hash, untagged: vendor half xor device half of the source MAC.
    const std::uint32_t vendor = std::uint32_t{h.src_mac[0]} << 16 | std::uint32_t{h.src_mac[1]} << 8 | h.src_mac[2];
    const std::uint32_t dev = std::uint32_t{h.src_mac[3]} << 16 | std::uint32_t{h.src_mac[4]} << 8 | h.src_mac[5];
    return vendor ^ dev;
  }
  // Locally sent TCP carries the socket's random flow hash, which encap3+4 uses as is.
  if (p == HashPolicy::encap34) return std::nullopt;
  const Addr src = addr_word(h.src_ip);
  const Addr dst = addr_word(h.dst_ip);
  if (p == HashPolicy::layer2) return eth_hash(h, src.v6);
  if (p == HashPolicy::layer23 || p == HashPolicy::encap23) {
    return ip_hash(eth_hash(h, src.v6), src.word, dst.word, false);
  }
  // layer3+4: the 32 bits of the two ports as they sit in the TCP header.
  const std::uint8_t ports[4] = {
      static_cast<std::uint8_t>(h.src_port >> 8), static_cast<std::uint8_t>(h.src_port & 0xff),
      static_cast<std::uint8_t>(h.dst_port >> 8), static_cast<std::uint8_t>(h.dst_port & 0xff)};
  return ip_hash(le32(ports), src.word, dst.word, true);
}

std::optional<int> predict_member(HashPolicy p, const FlowHeaders& h, int member_count) {
  if (member_count <= 0) return std::nullopt;
  const auto hash = bond_xmit_hash(p, h);
  if (!hash) return std::nullopt;
  return static_cast<int>(*hash % static_cast<std::uint32_t>(member_count));
}

bool policy_uses_ports(HashPolicy p) {
  return p == HashPolicy::layer34;
}

std::optional<std::uint16_t> port_for_member(HashPolicy p, FlowHeaders h, int member, int member_count,
                                             std::uint16_t first, std::uint16_t last,
                                             const std::vector<std::uint16_t>& taken) {
  if (!policy_uses_ports(p) || member_count <= 0 || member < 0 || member >= member_count || first > last) {
    return std::nullopt;
  }
  for (std::uint32_t port = first; port <= last; ++port) {
    if (std::find(taken.begin(), taken.end(), port) != taken.end()) continue;
    h.src_port = static_cast<std::uint16_t>(port);
    if (predict_member(p, h, member_count) == member) return h.src_port;
  }
  return std::nullopt;
}

// ---- JSON: the keys are the field names --------------------------------------------------

static void fields(auto& v, BondMember& m) {
  v("name", m.name, 64);
  v("mii_status", m.mii_status, 32);
  v("speed_mbps", m.speed_mbps, &sysfs::mbps_field);
  v("duplex", m.duplex, 16);
  v("link_failures", m.link_failures, 0, ~0ULL);
  v("perm_hwaddr", m.perm_hwaddr, 32);
  v("aggregator_id", m.aggregator_id, -1, 1 << 16);
  v("actor_port_state", m.actor_port_state, -1, 255);
  v("partner_port_state", m.partner_port_state, -1, 255);
  v("mtu", m.mtu, 0, 1 << 20);
  v("operstate", m.operstate, 32);
}

static void fields(auto& v, BondInfo& b) {
  v("name", b.name, 64);
  v("mode", b.mode, 32);
  v("hash_policy", b.hash_policy, 32);
  v("mii_status", b.mii_status, 32);
  v("miimon_ms", b.miimon_ms, 0, 1 << 30);
  v("updelay_ms", b.updelay_ms, 0, 1 << 30);
  v("downdelay_ms", b.downdelay_ms, 0, 1 << 30);
  v("arp_interval_ms", b.arp_interval_ms, 0, 1 << 30);
  v("arp_targets", b.arp_targets, 16, 64);
  v("lacp_rate", b.lacp_rate, 16);
  v("ad_select", b.ad_select, 16);
  v("active_slave", b.active_slave, 64);
  v("active_aggregator", b.active_aggregator, -1, 1 << 16);
  v("aggregator_ports", b.aggregator_ports, 0, 1 << 16);
  v("partner_mac", b.partner_mac, 32);
  v("mtu", b.mtu, 0, 1 << 20);
  v("mac", b.mac, 32);
  v.opt("tlb_dynamic_lb", b.tlb_dynamic_lb, -1, 1);  // absent in results written before it was read
  v("members", b.members, 64);
}

nlohmann::json to_json(const BondInfo& b) {
  nlohmann::json j = JsonOut::encode(b);
  for (auto& m : j["members"]) {
    if (m["speed_mbps"] < 0) m["speed_mbps"] = nullptr;  // unknown
  }
  return j;
}

BondInfo bond_from_json(const nlohmann::json& j) {
  return JsonIn::decode<BondInfo>(j, "bond");
}

}  // namespace fabperf
