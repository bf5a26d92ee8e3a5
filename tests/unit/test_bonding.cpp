#include <fabperf/core/error.hpp>
#include <fabperf/plan/plan.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/sysinfo/bonding.hpp>

#include <gtest/gtest.h>
#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/unit_helpers.hpp"

using namespace fabperf;
using namespace fabperf::testutil;
namespace fs = std::filesystem;

namespace {

std::string data(const std::string& name) {
  std::ifstream in(std::string(FABPERF_TEST_DATA) + "/bonding/" + name);
  EXPECT_TRUE(in.good()) << "missing test data " << name;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

FlowHeaders flow(const std::string& s, const std::string& d, std::uint16_t sp, std::uint16_t dp) {
  FlowHeaders h;
  h.src_ip = s;
  h.dst_ip = d;
  h.src_port = sp;
  h.dst_port = dp;
  return h;
}

}  // namespace

TEST(BondParse, Lacp8023adLayer34) {
  const BondInfo b = parse_proc_bonding(data("8023ad_layer34.txt"), "bond0");
  EXPECT_EQ(b.mode, "802.3ad");
  EXPECT_EQ(b.hash_policy, "layer3+4");
  EXPECT_EQ(b.mii_status, "up");
  EXPECT_EQ(b.miimon_ms, 100);
  EXPECT_EQ(b.lacp_rate, "slow");
  EXPECT_EQ(b.ad_select, "stable");
  EXPECT_EQ(b.active_aggregator, 1);
  EXPECT_EQ(b.aggregator_ports, 2);
  EXPECT_FALSE(is_zero_mac(b.partner_mac));
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[0].name, "a0");
  EXPECT_EQ(b.members[1].name, "a1");
  for (const auto& m : b.members) {
    EXPECT_EQ(m.mii_status, "up");
    EXPECT_EQ(m.speed_mbps, 10000);
    EXPECT_EQ(m.duplex, "full");
    EXPECT_EQ(m.link_failures, 0u);
    EXPECT_EQ(m.aggregator_id, 1);
    EXPECT_EQ(m.actor_port_state, 61);
    EXPECT_EQ(m.partner_port_state, 61);
  }
  EXPECT_EQ(usable_members(b), (std::vector<std::string>{"a0", "a1"}));
  EXPECT_TRUE(bond_findings(b, 1).empty());
}

TEST(BondParse, LacpWithoutPartnerIsAFinding) {
  const BondInfo b = parse_proc_bonding(data("8023ad_nopartner.txt"), "bond0");
  EXPECT_EQ(b.mode, "802.3ad");
  EXPECT_TRUE(is_zero_mac(b.partner_mac));
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[1].aggregator_id, 2);
  EXPECT_EQ(usable_members(b), (std::vector<std::string>{"a0"}));
  const auto f = bond_findings(b, 4);
  EXPECT_TRUE(has(f, "no LACP partner")) << ::testing::PrintToString(f);
  EXPECT_TRUE(has(f, "member a1 is outside the active aggregator (2 vs 1)")) << ::testing::PrintToString(f);
}

TEST(BondParse, AlbWithAMemberDown) {
  const BondInfo b = parse_proc_bonding(data("alb.txt"), "bond1");
  EXPECT_EQ(b.mode, "balance-alb");
  EXPECT_EQ(b.hash_policy, "");
  EXPECT_EQ(b.active_slave, "a0");
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[1].mii_status, "down");
  EXPECT_EQ(b.members[1].speed_mbps, -1);
  EXPECT_EQ(b.members[1].link_failures, 1u);
  EXPECT_FALSE(bond_hashes(b));
  EXPECT_EQ(usable_members(b), (std::vector<std::string>{"a0"}));
  EXPECT_TRUE(has(bond_findings(b), "member a1 is down"));
}

TEST(BondParse, ActiveBackupArpAndMixedSpeeds) {
  const BondInfo b = parse_proc_bonding(data("active_backup_arp.txt"), "bond2");
  EXPECT_EQ(b.mode, "active-backup");
  EXPECT_EQ(b.active_slave, "eth1");
  EXPECT_EQ(b.arp_interval_ms, 1000);
  EXPECT_EQ(b.arp_targets, (std::vector<std::string>{"198.18.0.254", "198.18.0.253"}));
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[0].speed_mbps, 25000);
  EXPECT_EQ(b.members[0].link_failures, 2u);
  EXPECT_TRUE(has(bond_findings(b), "different speeds (eth1 25000 Mb/s, eth2 10000 Mb/s)"));
}

TEST(BondParse, XorLayer2WithFewPeers) {
  const BondInfo b = parse_proc_bonding(data("balance_xor_layer2.txt"), "bond3");
  EXPECT_EQ(b.mode, "balance-xor");
  EXPECT_EQ(b.hash_policy, "layer2");
  EXPECT_EQ(b.updelay_ms, 200);
  EXPECT_TRUE(bond_hashes(b));
  EXPECT_TRUE(has(bond_findings(b, 1), "layer2 hashes by MAC only"));
  EXPECT_FALSE(has(bond_findings(b, 8), "layer2"));
}

// Captured in the VM lab (tests/bonding/guest.sh, Debian's 6.1.0-57 kernel): the parser reads the
// real kernel's text field by field.
TEST(BondParseVm, Lacp8023adLayer34Settled) {
  const BondInfo b = parse_proc_bonding(data("vm-8023ad-layer34.txt"), "bond0");
  EXPECT_EQ(b.mode, "802.3ad");
  EXPECT_EQ(b.hash_policy, "layer3+4");
  EXPECT_EQ(b.mii_status, "up");
  EXPECT_EQ(b.miimon_ms, 100);
  EXPECT_EQ(b.updelay_ms, 0);
  EXPECT_EQ(b.downdelay_ms, 0);
  EXPECT_EQ(b.arp_interval_ms, 0);
  EXPECT_EQ(b.lacp_rate, "fast");
  EXPECT_EQ(b.ad_select, "stable");
  EXPECT_EQ(b.active_slave, "");
  EXPECT_EQ(b.active_aggregator, 1);
  EXPECT_EQ(b.aggregator_ports, 2);
  EXPECT_EQ(b.partner_mac, "aa:98:fd:a0:e7:54");
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[0].name, "m0");
  EXPECT_EQ(b.members[0].perm_hwaddr, "be:8d:e6:41:93:8b");
  EXPECT_EQ(b.members[1].name, "m1");
  EXPECT_EQ(b.members[1].perm_hwaddr, "d6:9f:de:12:96:e5");
  for (const auto& m : b.members) {
    EXPECT_EQ(m.mii_status, "up");
    EXPECT_EQ(m.speed_mbps, 10000);
    EXPECT_EQ(m.duplex, "full");
    EXPECT_EQ(m.link_failures, 0u);
    EXPECT_EQ(m.aggregator_id, 1);
    EXPECT_EQ(m.actor_port_state, 63);  // 61 + LACP fast timeout
    EXPECT_EQ(m.partner_port_state, 63);
  }
  EXPECT_EQ(usable_members(b), (std::vector<std::string>{"m0", "m1"}));
  EXPECT_TRUE(bond_checks(b, 1).empty());
}

TEST(BondParseVm, Lacp8023adMemberDown) {
  const BondInfo b = parse_proc_bonding(data("vm-8023ad-member-down.txt"), "bond0");
  EXPECT_EQ(b.mode, "802.3ad");
  EXPECT_EQ(b.active_aggregator, 1);
  EXPECT_EQ(b.aggregator_ports, 1);
  EXPECT_EQ(b.partner_mac, "aa:98:fd:a0:e7:54");
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[0].mii_status, "up");
  EXPECT_EQ(b.members[0].actor_port_state, 63);
  const auto& m1 = b.members[1];
  EXPECT_EQ(m1.name, "m1");
  EXPECT_EQ(m1.mii_status, "down");
  EXPECT_EQ(m1.speed_mbps, 10000);  // veth keeps reporting its speed while down
  EXPECT_EQ(m1.link_failures, 1u);
  EXPECT_EQ(m1.aggregator_id, 1);
  EXPECT_EQ(m1.actor_port_state, 15);  // no longer collecting/distributing
  EXPECT_EQ(m1.partner_port_state, 55);
  EXPECT_EQ(usable_members(b), (std::vector<std::string>{"m0"}));
  const auto c = bond_checks(b, 1);
  ASSERT_EQ(c.size(), 1u) << ::testing::PrintToString(bond_findings(b, 1));
  EXPECT_EQ(c[0].what, "bond bond0 (802.3ad): member m1 is down (MII status), 1 link failures so far");
  EXPECT_EQ(c[0].level, "error");
  EXPECT_EQ(c[0].fix.rfind("bring m1 up (ip link set m1 up", 0), 0u) << c[0].fix;
}

TEST(BondParseVm, BalanceAlb) {
  const BondInfo b = parse_proc_bonding(data("vm-balance-alb.txt"), "bond0");
  EXPECT_EQ(b.mode, "balance-alb");
  EXPECT_EQ(b.hash_policy, "");
  EXPECT_EQ(b.active_slave, "m0");
  EXPECT_EQ(b.miimon_ms, 100);
  EXPECT_EQ(b.active_aggregator, -1);
  EXPECT_EQ(b.lacp_rate, "");
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[0].perm_hwaddr, "1a:55:9d:1b:bf:de");
  EXPECT_EQ(b.members[1].perm_hwaddr, "de:65:58:8b:75:a4");
  for (const auto& m : b.members) {
    EXPECT_EQ(m.mii_status, "up");
    EXPECT_EQ(m.speed_mbps, 10000);
    EXPECT_EQ(m.aggregator_id, -1);
    EXPECT_EQ(m.actor_port_state, -1);
  }
  EXPECT_FALSE(bond_hashes(b));
  EXPECT_TRUE(bond_findings(b, 1).empty());
}

// Bonds the lab makes only for their texts (no traffic): two veth members each, miimon 100.
TEST(BondParseVm, ActiveBackup) {
  const BondInfo b = parse_proc_bonding(data("vm-active-backup.txt"), "bab");
  EXPECT_EQ(b.mode, "active-backup");
  EXPECT_EQ(b.hash_policy, "");
  EXPECT_EQ(b.active_slave, "ab0");
  EXPECT_EQ(b.mii_status, "up");
  EXPECT_EQ(b.miimon_ms, 100);
  EXPECT_EQ(b.arp_interval_ms, 0);
  EXPECT_TRUE(b.arp_targets.empty());
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[0].name, "ab0");
  EXPECT_EQ(b.members[0].perm_hwaddr, "42:fa:29:53:2a:2d");
  EXPECT_EQ(b.members[1].name, "ab1");
  EXPECT_EQ(b.members[1].perm_hwaddr, "5e:bd:2a:88:58:a4");
  for (const auto& m : b.members) {
    EXPECT_EQ(m.mii_status, "up");
    EXPECT_EQ(m.speed_mbps, 10000);
    EXPECT_EQ(m.duplex, "full");
    EXPECT_EQ(m.link_failures, 0u);
    EXPECT_EQ(m.aggregator_id, -1);
  }
  EXPECT_FALSE(bond_hashes(b));
  EXPECT_TRUE(bond_checks(b, 1).empty());
}

TEST(BondParseVm, BalanceXorLayer23) {
  const BondInfo b = parse_proc_bonding(data("vm-balance-xor-layer23.txt"), "bxor");
  EXPECT_EQ(b.mode, "balance-xor");
  EXPECT_EQ(b.hash_policy, "layer2+3");
  EXPECT_EQ(b.active_slave, "");
  EXPECT_EQ(b.miimon_ms, 100);
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[0].name, "xor0");
  EXPECT_EQ(b.members[0].perm_hwaddr, "f2:d8:6e:0b:73:a7");
  EXPECT_EQ(b.members[1].name, "xor1");
  EXPECT_EQ(b.members[1].perm_hwaddr, "36:a5:d7:11:b9:9e");
  EXPECT_TRUE(bond_hashes(b));
  EXPECT_EQ(usable_members(b), (std::vector<std::string>{"xor0", "xor1"}));
  EXPECT_TRUE(bond_checks(b, 1).empty());  // layer2+3 is not the layer2 finding
}

TEST(BondParseVm, BalanceRoundRobin) {
  const BondInfo b = parse_proc_bonding(data("vm-balance-rr.txt"), "brr");
  EXPECT_EQ(b.mode, "balance-rr");
  EXPECT_EQ(b.hash_policy, "");
  EXPECT_EQ(b.active_slave, "");
  EXPECT_EQ(b.mii_status, "up");
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[0].name, "rr0");
  EXPECT_EQ(b.members[0].perm_hwaddr, "fe:ae:8c:07:f3:df");
  EXPECT_EQ(b.members[1].name, "rr1");
  EXPECT_EQ(b.members[1].perm_hwaddr, "de:a0:f7:5c:ac:b7");
  EXPECT_FALSE(bond_hashes(b));
  EXPECT_TRUE(bond_checks(b, 1).empty());
}

TEST(BondParseVm, BalanceTlb) {
  const BondInfo b = parse_proc_bonding(data("vm-balance-tlb.txt"), "btlb");
  EXPECT_EQ(b.mode, "balance-tlb");
  EXPECT_EQ(b.active_slave, "tlb0");
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[0].name, "tlb0");
  EXPECT_EQ(b.members[0].perm_hwaddr, "92:e7:8c:49:02:50");
  EXPECT_EQ(b.members[1].name, "tlb1");
  EXPECT_EQ(b.members[1].perm_hwaddr, "d6:4c:06:a9:94:a9");
  for (const auto& m : b.members) EXPECT_EQ(m.speed_mbps, 10000);
  EXPECT_TRUE(bond_checks(b, 1).empty());
}

namespace {
NodeRecord bonded_node(std::uint32_t index, const std::string& name, const std::string& proc_file,
                       const std::vector<std::string>& locals, const std::string& remote) {
  NodeRecord n;
  n.index = index;
  n.name = name;
  AgentResult a;
  BondResult br;
  br.at_open = parse_proc_bonding(data(proc_file), "bond0");
  br.at_close = br.at_open;
  a.bonds.push_back(br);
  for (const auto& l : locals) {
    FlowResult f;
    f.iface = "bond0";
    f.local = l;
    f.remote = remote;
    a.flows.push_back(f);
  }
  n.result = a;
  return n;
}
}  // namespace

TEST(PreflightBonds, EveryAgentsFindingsNameNodeBondAndFix) {
  RunRecord rec;
  rec.nodes.push_back(
      bonded_node(0, "198.18.10.1:6668", "vm-8023ad-member-down.txt", {"198.18.10.1:10000"}, "198.18.10.2:5001"));
  rec.nodes.push_back(
      bonded_node(1, "198.18.10.2:6668", "vm-8023ad-layer34.txt", {"198.18.10.2:5001"}, "198.18.10.1:10000"));
  rec.nodes.push_back(
      bonded_node(2, "198.18.10.3:6668", "8023ad_nopartner.txt", {"198.18.10.3:10000"}, "198.18.10.1:5001"));
  const std::map<std::string, std::string> names{{"198.18.10.1:6668", "n1"}, {"198.18.10.3:6668", "n3"}};
  const auto f = plan::preflight_bond_findings(rec, names);
  ASSERT_EQ(f.size(), 3u) << plan::render_findings(f);
  EXPECT_EQ(f[0].level, "error");
  EXPECT_EQ(f[0].node, "n1/bond0");
  EXPECT_EQ(f[0].what, "bond bond0 (802.3ad): member m1 is down (MII status), 1 link failures so far");
  EXPECT_EQ(f[0].fix.rfind("on n1: bring m1 up", 0), 0u) << f[0].fix;
  EXPECT_EQ(f[1].node, "n3/bond0");
  EXPECT_NE(f[1].what.find("no LACP partner"), std::string::npos);
  EXPECT_NE(f[1].fix.find("LACP (802.3ad) port-channel"), std::string::npos);
  EXPECT_NE(f[2].what.find("member a1 is outside the active aggregator (2 vs 1)"), std::string::npos);
  EXPECT_EQ(f[2].level, "error");

  // The whole pre-flight shows each once, even though the report repeats them among its findings.
  Report rep;
  rep.findings.push_back("198.18.10.1:6668: " + f[0].what);
  rep.findings.push_back("something else");
  const auto all = plan::preflight_findings(rec, rep, names, {});
  const auto count = std::count_if(all.begin(), all.end(), [](const plan::Finding& x) {
    return x.what.find("member m1 is down") != std::string::npos;
  });
  EXPECT_EQ(count, 1);
  EXPECT_TRUE(std::any_of(all.begin(), all.end(), [](const plan::Finding& x) { return x.what == "something else"; }));

  // Healthy bonds: one "ok" line.
  RunRecord good;
  good.nodes.push_back(bonded_node(0, "a:1", "vm-8023ad-layer34.txt", {"198.18.10.1:10000"}, "198.18.10.2:5001"));
  good.nodes.push_back(bonded_node(1, "b:1", "vm-balance-alb.txt", {"198.18.10.2:5001"}, "198.18.10.1:10000"));
  const auto ok = plan::preflight_bond_findings(good, {});
  ASSERT_EQ(ok.size(), 1u) << plan::render_findings(ok);
  EXPECT_EQ(ok[0].level, "ok");
  EXPECT_NE(ok[0].what.find("2 bond(s)"), std::string::npos);
}

TEST(BondAlbReceive, SaysWhichMemberEachAddressReaches) {
  // Server: balance-alb with two addresses in use; client: its ARP table for them.
  auto run_with = [](const std::string& mac10, const std::string& mac11) {
    RunRecord rec;
    rec.nodes.push_back(
        bonded_node(0, "srv:1", "vm-balance-alb.txt", {"198.18.10.2:5001", "198.18.11.2:5001"}, "198.18.10.1:1"));
    auto c = bonded_node(1, "cli:1", "vm-balance-alb.txt", {"198.18.10.1:10000"}, "198.18.10.2:5001");
    c.result->bonds[0].neighbors = {{"198.18.10.2", mac10}, {"198.18.11.2", mac11}};
    rec.nodes.push_back(c);
    Report r;
    for (const auto& n : rec.nodes) {
      NodeReport nr;
      nr.index = n.index;
      nr.name = n.name;
      BondReport br;
      br.name = "bond0";
      nr.bonds.push_back(br);
      r.nodes.push_back(nr);
    }
    explain_alb_receive(rec.nodes, r);
    return r.nodes[0].bonds[0].notes;
  };
  const auto spread = run_with("1a:55:9d:1b:bf:de", "de:65:58:8b:75:a4");
  ASSERT_EQ(spread.size(), 1u);
  EXPECT_NE(spread[0].find("198.18.10.2 -> m0 (at cli:1)"), std::string::npos) << spread[0];
  EXPECT_NE(spread[0].find("198.18.11.2 -> m1 (at cli:1)"), std::string::npos) << spread[0];
  EXPECT_NE(spread[0].find("2 members receive"), std::string::npos) << spread[0];
  const auto stuck = run_with("1a:55:9d:1b:bf:de", "1a:55:9d:1b:bf:de");
  ASSERT_EQ(stuck.size(), 1u);
  EXPECT_NE(stuck[0].find("every address of this bond reaches m0 only"), std::string::npos) << stuck[0];
}

TEST(BondParse, GarbageGivesNoMode) {
  const BondInfo b = parse_proc_bonding("hello\nworld: 3\n\n:::\n", "x");
  EXPECT_EQ(b.mode, "");
  EXPECT_TRUE(b.members.empty());
  EXPECT_TRUE(has(bond_findings(b), "has no members"));
}

TEST(BondRead, SysfsFillsAndOrdersMembers) {
  const fs::path root = fs::temp_directory_path() / ("fabperf-bond-" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto put = [&](const std::string& rel, const std::string& content) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << content << "\n";
  };
  put("proc/net/bonding/bond0", data("8023ad_layer34.txt"));
  put("sys/class/net/bond0/bonding/mode", "802.3ad 4");
  put("sys/class/net/bond0/bonding/xmit_hash_policy", "layer3+4 1");
  put("sys/class/net/bond0/bonding/slaves", "a1 a0");
  put("sys/class/net/bond0/bonding/lacp_rate", "fast 1");
  put("sys/class/net/bond0/mtu", "9000");
  put("sys/class/net/a0/mtu", "9000");
  put("sys/class/net/a1/mtu", "1500");
  put("sys/class/net/a0/operstate", "up");
  put("sys/class/net/a1/operstate", "up");
  const auto b = read_bond("bond0", root.string());
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->lacp_rate, "fast");
  ASSERT_EQ(b->members.size(), 2u);
  EXPECT_EQ(b->members[0].name, "a1");  // the kernel's order, as sysfs lists it
  EXPECT_EQ(b->members[1].mtu, 9000);
  EXPECT_TRUE(has(bond_findings(*b), "MTU mismatch: bond 9000 but member a1 has 1500"));
  EXPECT_FALSE(read_bond("a0", root.string()).has_value());
  EXPECT_FALSE(read_bond("../x", root.string()).has_value());
  fs::remove_all(root);
}

TEST(BondJson, RoundTripAndRejects) {
  const BondInfo b = parse_proc_bonding(data("8023ad_layer34.txt"), "bond0");
  const auto j = to_json(b);
  const BondInfo c = bond_from_json(j);
  EXPECT_EQ(to_json(c), j);
  auto bad = j;
  bad["members"][0]["aggregator_id"] = "one";
  EXPECT_THROW(bond_from_json(bad), ProtocolError);
  bad = j;
  bad.erase("mode");
  EXPECT_THROW(bond_from_json(bad), ProtocolError);
}

// Vectors computed by hand from bond_main.c (6.1): bond_ip_hash over the port word and both
// addresses, as an x86 kernel reads the network-order bytes. 198.18.0.1:40000 -> 198.18.0.2:5001:
// ports 0x8913409C ^ addrs 0x03000000 = 0x8A13409C; ^>>16 = 0x8A13CA8F; ^>>8 = 0x8A99D945;
// >>1 = 0x454CECA2.
TEST(BondHash, Layer34KnownVectors) {
  EXPECT_EQ(bond_xmit_hash(HashPolicy::layer34, flow("198.18.0.1", "198.18.0.2", 40000, 5001)), 0x454CECA2u);
  EXPECT_EQ(bond_xmit_hash(HashPolicy::layer34, flow("198.18.0.1", "198.18.0.2", 40001, 5001)), 1162669090u);
  EXPECT_EQ(bond_xmit_hash(HashPolicy::layer34, flow("10.1.2.3", "10.4.5.6", 12345, 6668)), 76157964u);
  EXPECT_EQ(bond_xmit_hash(HashPolicy::layer34, flow("fd00:1::10", "fd00:2::20", 40000, 5001)), 1565848762u);
  EXPECT_EQ(predict_member(HashPolicy::layer34, flow("192.168.1.10", "192.168.1.20", 33000, 80), 3), 0);
  // The dropped low bit: ports 40000 and 40001 land together, 40002/40003 on the other member.
  const int expect[] = {0, 0, 1, 1, 0, 0, 1, 1, 0, 0};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(predict_member(HashPolicy::layer34,
                             flow("198.18.0.1", "198.18.0.2", static_cast<std::uint16_t>(40000 + i), 5001), 2),
              expect[i])
        << 40000 + i;
  }
}

TEST(BondHash, Layer2AndLayer23) {
  FlowHeaders h = flow("198.18.0.1", "198.18.0.2", 40000, 5001);
  h.src_mac = *parse_mac("02:00:00:00:00:01");
  h.dst_mac = *parse_mac("02:00:00:00:00:fe");
  // 0x01 ^ 0xfe ^ 0x0800
  EXPECT_EQ(bond_xmit_hash(HashPolicy::layer2, h), 2303u);
  EXPECT_EQ(bond_xmit_hash(HashPolicy::layer23, h), 50531316u);
  EXPECT_EQ(bond_xmit_hash(HashPolicy::encap23, h), 50531316u);  // no tunnel: the same headers
  // Ports do not matter to these policies.
  FlowHeaders h2 = h;
  h2.src_port = 1;
  EXPECT_EQ(bond_xmit_hash(HashPolicy::layer23, h2), bond_xmit_hash(HashPolicy::layer23, h));
  EXPECT_FALSE(policy_uses_ports(HashPolicy::layer23));
  // encap3+4 uses the socket's random flow hash for local TCP: unpredictable, said so.
  EXPECT_FALSE(bond_xmit_hash(HashPolicy::encap34, h).has_value());
  EXPECT_FALSE(predict_member(HashPolicy::encap34, h, 2).has_value());
  EXPECT_THROW(bond_xmit_hash(HashPolicy::layer34, flow("nope", "198.18.0.2", 1, 2)), UsageError);
  EXPECT_FALSE(parse_mac("02:00:00:00:00").has_value());
  EXPECT_EQ(parse_hash_policy("layer3+4"), HashPolicy::layer34);
  EXPECT_FALSE(parse_hash_policy("layer5").has_value());
}

TEST(BondHash, PortsSpreadEvenly) {
  const FlowHeaders h = flow("198.18.0.1", "198.18.0.2", 0, 5001);
  std::vector<std::uint16_t> taken;
  for (int i = 0; i < 8; ++i) {
    const auto p = port_for_member(HashPolicy::layer34, h, i % 4, 4, 40000, 41000, taken);
    ASSERT_TRUE(p.has_value());
    FlowHeaders x = h;
    x.src_port = *p;
    EXPECT_EQ(predict_member(HashPolicy::layer34, x, 4), i % 4);
    EXPECT_EQ(std::count(taken.begin(), taken.end(), *p), 0);
    taken.push_back(*p);
  }
  EXPECT_FALSE(port_for_member(HashPolicy::layer2, h, 0, 2, 40000, 41000, {}).has_value());
  EXPECT_FALSE(port_for_member(HashPolicy::layer34, h, 2, 2, 40000, 41000, {}).has_value());
  EXPECT_FALSE(port_for_member(HashPolicy::layer34, h, 1, 2, 40000, 40001, {}).has_value());  // both land on 0
}
