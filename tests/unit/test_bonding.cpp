#include <fabperf/bonding.hpp>
#include <fabperf/error.hpp>

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

using namespace fabperf;
namespace fs = std::filesystem;

namespace {

std::string data(const std::string& name) {
  std::ifstream in(std::string(FABPERF_TEST_DATA) + "/bonding/" + name);
  EXPECT_TRUE(in.good()) << "missing test data " << name;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool has(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v) {
    if (s.find(needle) != std::string::npos) return true;
  }
  return false;
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
    EXPECT_EQ(predict_member(HashPolicy::layer34, flow("198.18.0.1", "198.18.0.2", static_cast<std::uint16_t>(40000 + i), 5001), 2),
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
