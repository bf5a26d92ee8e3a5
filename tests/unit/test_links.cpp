#include <fabperf/sysinfo/links.hpp>

#include "unit/fake_tree.hpp"

#include <gtest/gtest.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

using namespace fabperf;
namespace fs = std::filesystem;

namespace {
// A captured-looking sysfs/procfs tree under a temp root.
class FakeSys : public test::FakeTree {
 protected:
  FakeSys() : FakeTree("fabperf-sys-") {}
  void iface(const std::string& name, int mtu, const std::string& speed) {
    const std::string b = "sys/class/net/" + name + "/";
    put(b + "mtu", std::to_string(mtu));
    put(b + "speed", speed);
    put(b + "operstate", "up");
    put(b + "address", "02:00:00:00:00:01");
    put(b + "duplex", "full");
    put(b + "type", "1");
    for (const char* c :
         {"tx_bytes", "rx_bytes", "tx_packets", "rx_packets", "tx_errors", "rx_errors", "tx_dropped", "rx_dropped"}) {
      put(b + "statistics/" + c, "0");
    }
  }
};
}  // namespace

TEST_F(FakeSys, PhysicalBondVlanAndVirtualKinds) {
  iface("ens1f0", 9000, "56000");
  link("sys/class/net/ens1f0/device/driver", "../../../bus/pci/drivers/mlx5_core");
  put("sys/class/net/ens1f0/device/numa_node", "1");
  link("sys/class/net/ens1f0/master", "../bond0");
  iface("ens1f1", 9000, "56000");
  link("sys/class/net/ens1f1/device/driver", "../../../bus/pci/drivers/mlx5_core");
  iface("bond0", 9000, "112000");
  put("sys/class/net/bond0/bonding/slaves", "ens1f0 ens1f1");
  iface("bond0.100", 9000, "112000");
  put("sys/class/net/bond0.100/lower_bond0", "");
  iface("veth1", 1500, "");  // sysfs speed unreadable for virtual links
  const auto links = read_links(root());
  ASSERT_EQ(links.size(), 5u);
  const auto find = [&](const std::string& n) {
    for (const auto& l : links) {
      if (l.name == n) return l;
    }
    return LinkInfo{};
  };
  const auto p = find("ens1f0");
  EXPECT_EQ(p.kind, "physical");
  EXPECT_EQ(p.driver, "mlx5_core");
  EXPECT_EQ(p.speed_mbps, 56000);
  EXPECT_EQ(p.mtu, 9000);
  EXPECT_EQ(p.master, "bond0");
  EXPECT_EQ(p.numa_node, 1);
  EXPECT_EQ(p.duplex, "full");
  const auto b = find("bond0");
  EXPECT_EQ(b.kind, "bond");
  EXPECT_EQ(b.members, (std::vector<std::string>{"ens1f0", "ens1f1"}));
  const auto v = find("bond0.100");
  EXPECT_EQ(v.kind, "vlan");
  EXPECT_EQ(v.vlan_parent, "bond0");
  const auto ve = find("veth1");
  EXPECT_EQ(ve.kind, "virtual");
  EXPECT_EQ(ve.speed_mbps, -1);
}

TEST_F(FakeSys, CountersAndVanishedInterface) {
  iface("eth0", 1500, "1000");
  put("sys/class/net/eth0/statistics/tx_bytes", "123456789012");
  put("sys/class/net/eth0/statistics/rx_dropped", "7");
  const auto c = read_link_counters("eth0", root());
  EXPECT_TRUE(c.present);
  EXPECT_EQ(c.tx_bytes, 123456789012u);
  EXPECT_EQ(c.rx_dropped, 7u);
  EXPECT_FALSE(read_link_counters("eth9", root()).present);
  EXPECT_FALSE(read_link("eth9", root()).has_value());
  EXPECT_FALSE(read_link("../etc", root()).has_value());
}

TEST_F(FakeSys, SocketLimits) {
  put("proc/sys/net/core/rmem_max", "212992");
  put("proc/sys/net/core/wmem_max", "4194304");
  put("proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456");
  put("proc/sys/net/ipv4/tcp_wmem", "4096 16384 4194304");
  const auto s = read_socket_limits(root());
  EXPECT_EQ(s.rmem_max, 212992u);
  EXPECT_EQ(s.wmem_max, 4194304u);
  EXPECT_EQ(s.tcp_rmem[2], 6291456u);
  EXPECT_EQ(s.tcp_wmem[1], 16384u);
}

TEST(Framing, BestGoodputMatchesTheNotesArithmetic) {
  // 94.1% at MTU 1500, 99.0% at MTU 9000; 40GbE at 9000 -> 4950 MB/s, 56GbE -> 6930 MB/s.
  EXPECT_NEAR(best_tcp_goodput_mb_per_s(1000, 1500) / 125.0, 0.941, 0.001);
  EXPECT_NEAR(best_tcp_goodput_mb_per_s(1000, 9000) / 125.0, 0.990, 0.001);
  EXPECT_NEAR(best_tcp_goodput_mb_per_s(40000, 9000), 4950, 2);
  EXPECT_NEAR(best_tcp_goodput_mb_per_s(56000, 9000), 6930, 2);
  EXPECT_NEAR(best_tcp_goodput_mb_per_s(56000, 9000) / best_tcp_goodput_mb_per_s(40000, 9000), 1.4, 1e-9);
  EXPECT_EQ(best_tcp_goodput_mb_per_s(-1, 9000), 0.0);
  EXPECT_EQ(expected_mss(9000), 8948);
  EXPECT_EQ(expected_mss(1500), 1448);
}

TEST(Links, LoopbackOwnsLocalhostAndJsonRoundTrips) {
  EXPECT_EQ(interface_of_address("127.0.0.1"), "lo");
  EXPECT_EQ(interface_of_address("127.0.0.1:6668"), "lo");
  EXPECT_EQ(interface_of_address("not-an-address"), "");
  const auto lo = read_link("lo");
  ASSERT_TRUE(lo.has_value());
  EXPECT_EQ(lo->kind, "loopback");
  const LinkInfo back = link_from_json(to_json(*lo));
  EXPECT_EQ(back.name, "lo");
  EXPECT_EQ(back.mtu, lo->mtu);
  EXPECT_EQ(back.addresses, lo->addresses);
  EXPECT_EQ(back.speed_mbps, lo->speed_mbps);
}
