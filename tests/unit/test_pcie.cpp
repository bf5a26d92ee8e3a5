// PCIe links behind interfaces and RDMA devices: the bandwidth arithmetic, the sysfs/procfs
// readers on sysfs trees (tests/data/pcie: a degraded x4-of-x8 card, a Gen3 x8 card with two
// 56G ports and its interrupts on the far node, an InfiniBand HCA, and the VM lab guest's tree),
// the findings, the JSON the LINKS and RESULT messages carry, pre-flight and the report's
// "which limit bounded this node".
#include <fabperf/core/error.hpp>
#include <fabperf/plan/plan.hpp>
#include <fabperf/proto/agent_result.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/sysinfo/links.hpp>
#include <fabperf/sysinfo/pcie.hpp>
#include <fabperf/sysinfo/rdma_sysfs.hpp>

#include "unit/fake_tree.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

using namespace fabperf;
namespace fs = std::filesystem;

namespace {

std::string data(const std::string& tree) {
  return std::string(FABPERF_TEST_DATA) + "/pcie/" + tree;
}

PcieInfo pcie_of(const std::string& tree, const std::string& iface) {
  const auto l = read_link(iface, data(tree));
  if (!l || !l->pcie) throw std::runtime_error("no PCIe info for " + iface + " in " + tree);
  return *l->pcie;
}

// The link's findings and the function's interrupt findings, both named `who`.
std::vector<LinkFinding> pcie_findings(const PcieInfo& p, const std::string& who) {
  auto out = pcie_link_findings(p, who);
  for (auto& f : pcie_irq_findings(p, who)) out.push_back(std::move(f));
  return out;
}

}  // namespace

TEST(PcieMath, LineCodesAndCeilings) {
  EXPECT_DOUBLE_EQ(pcie_line_code(2.5), 0.8);
  EXPECT_DOUBLE_EQ(pcie_line_code(5.0), 0.8);
  EXPECT_DOUBLE_EQ(pcie_line_code(8.0), 128.0 / 130.0);
  EXPECT_DOUBLE_EQ(pcie_line_code(32.0), 128.0 / 130.0);
  EXPECT_DOUBLE_EQ(pcie_line_code(64.0), 236.0 / 256.0);
  EXPECT_EQ(pcie_line_code(0), 0.0);
  EXPECT_EQ(pcie_generation(2.5), 1);
  EXPECT_EQ(pcie_generation(8.0), 3);
  EXPECT_EQ(pcie_generation(16.0), 4);
  EXPECT_EQ(pcie_generation(7.0), 0);
  // Gen3 x8: 63.0 Gbit/s after 128b/130b, 57.2 after the TLP overhead of 256-byte payloads: the
  // ceiling that held two 56GbE ports to 56 Gbit/s together.
  EXPECT_NEAR(pcie_raw_gbps({8.0, 8}), 63.015, 0.001);
  EXPECT_NEAR(pcie_usable_gbps({8.0, 8}, 0), 63.015 * 256 / 282, 0.001);
  EXPECT_NEAR(pcie_usable_gbps({8.0, 8}, 256), 57.20, 0.01);
  EXPECT_NEAR(pcie_raw_gbps({8.0, 4}), 31.5, 0.01);
  EXPECT_NEAR(pcie_raw_gbps({2.5, 1}), 2.0, 1e-9);
  EXPECT_NEAR(pcie_usable_gbps({2.5, 1}, 128), 2.0 * 128 / 154, 1e-9);
  EXPECT_NEAR(pcie_raw_gbps({16.0, 16}), 252.06, 0.01);
  EXPECT_EQ(pcie_raw_gbps({8.0, 0}), 0.0);
  EXPECT_EQ(pcie_link_text({8.0, 4}), "x4 Gen3 (8 GT/s)");
  EXPECT_EQ(pcie_link_text({2.5, 1}), "x1 Gen1 (2.5 GT/s)");
  EXPECT_EQ(pcie_link_text({}), "?");
}

TEST(PcieSysfs, DegradedX4OfX8IsAnError) {
  const PcieInfo p = pcie_of("degraded-x4", "eth2");
  EXPECT_EQ(p.address, "0000:3b:00.0");
  EXPECT_EQ(p.port, "0000:3a:00.0");
  EXPECT_EQ(p.link, (PcieLinkState{8.0, 4}));
  EXPECT_EQ(p.max, (PcieLinkState{8.0, 8}));
  EXPECT_EQ(p.port_max, (PcieLinkState{8.0, 8}));
  EXPECT_TRUE(p.limit_at.empty());
  EXPECT_EQ(p.numa_node, 0);
  EXPECT_EQ(p.max_payload, 0);    // no config space in the tree: 256 assumed
  ASSERT_EQ(p.ports.size(), 2u);  // mlx4: one function, two ports
  EXPECT_EQ(p.ports[0].name, "eth2");
  EXPECT_EQ(p.ports[1].name, "eth3");
  EXPECT_EQ(pcie_ports_mbps(p), 112000);
  EXPECT_EQ(pcie_ports_text(p), "2 x 56 Gbit/s");
  EXPECT_EQ(p.irq.irqs, 4);
  EXPECT_EQ(p.irq.served, 4u * 50000 + 6);
  EXPECT_EQ(p.irq.served_local, p.irq.served);
  EXPECT_EQ(p.irq.local_cpus, "0-13,28-41");
  EXPECT_FALSE(p.irq.all_cpus_local);

  const auto f = pcie_findings(p, "eth2");
  ASSERT_EQ(f.size(), 1u);  // the error states the ceiling: no second warning about it
  EXPECT_EQ(f[0].level, "error");
  EXPECT_EQ(f[0].what, "eth2: PCIe x4 of x8, Gen3: 28.6 Gbit/s usable for 2 x 56 Gbit/s of ports (0000:3b:00.0)");
  EXPECT_EQ(f[0].fix.rfind("both ends support x8 Gen3 (8 GT/s): reseat the card", 0), 0u) << f[0].fix;

  // The interface's own inventory carries it; the other port sees the same link.
  const auto links = read_links(data("degraded-x4"));
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[1].name, "eth3");
  ASSERT_TRUE(links[1].pcie);
  EXPECT_EQ(pcie_link_key(*links[1].pcie), pcie_link_key(p));
  EXPECT_EQ(links[1].speed_mbps, 56000);
  EXPECT_EQ(links[1].kind, "physical");
}

TEST(PcieSysfs, Gen3X8WithTwo56GPortsIsShortAndItsInterruptsAreRemote) {
  const PcieInfo p = pcie_of("gen3x8-2x56", "eth4");
  EXPECT_EQ(p.address, "0000:af:00.0");
  EXPECT_EQ(p.port_max, (PcieLinkState{8.0, 16}));  // an x8 card in an x16 slot: fine
  EXPECT_EQ(p.max_payload, 256);                    // read from config space
  ASSERT_EQ(p.ports.size(), 2u);                    // mlx5: one function per port
  EXPECT_EQ(p.ports[1].name, "eth5");
  EXPECT_NEAR(pcie_ceiling_gbps(p), 57.2, 0.05);
  EXPECT_EQ(p.numa_node, 1);
  EXPECT_EQ(p.irq.irqs, 3);
  EXPECT_EQ(p.irq.served, 3u * 81000);
  EXPECT_EQ(p.irq.served_local, 3u * 1000);
  EXPECT_EQ(p.irq.remote_affinity, 3);  // effective affinity on CPUs 0..2 (node 0)

  const auto f = pcie_findings(p, "eth4+eth5");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].level, "warning");
  EXPECT_EQ(
      f[0].what,
      "eth4+eth5: PCIe x8 Gen3 (8 GT/s) (0000:af:00.0): 57.2 Gbit/s usable for 2 x 56 Gbit/s of ports (112.0 Gbit/s)");
  EXPECT_EQ(f[1].level, "warning");
  EXPECT_EQ(f[1].what,
            "eth4+eth5: 99% of the interrupts of its 3 IRQs were served by CPUs outside NUMA node 1 (local CPUs "
            "14-27,42-55)");
  EXPECT_NE(f[1].fix.find("/sys/bus/pci/devices/0000:af:00.0/msi_irqs"), std::string::npos);
  // The second port's function has its own interrupts, on the same wrong node.
  EXPECT_EQ(pcie_irq_findings(pcie_of("gen3x8-2x56", "eth5"), "eth5").size(), 1u);
}

TEST(PcieSysfs, InfinibandHcaCountsItsPortNotIpoib) {
  const auto d = read_rdma_device("mlx5_0", data("ib-hca"));
  ASSERT_TRUE(d && d->pcie);
  const PcieInfo& p = *d->pcie;
  EXPECT_EQ(p.address, "0000:5e:00.0");
  EXPECT_EQ(p.link, (PcieLinkState{8.0, 16}));
  ASSERT_EQ(p.ports.size(), 1u);  // ib0 (IPoIB) rides mlx5_0 port 1: counted once
  EXPECT_EQ(p.ports[0].name, "mlx5_0:1");
  EXPECT_EQ(p.ports[0].speed_mbps, 100000);
  EXPECT_NEAR(pcie_ceiling_gbps(p), 114.4, 0.05);
  EXPECT_TRUE(pcie_findings(p, "mlx5_0").empty());
  // IPoIB's interface reaches the same function.
  EXPECT_EQ(pcie_of("ib-hca", "ib0").address, "0000:5e:00.0");
  // JSON: the device carries its link.
  const auto back = rdma_device_from_json(to_json(*d));
  ASSERT_TRUE(back.pcie);
  EXPECT_EQ(back.pcie->link, p.link);
}

namespace {
class FakePcie : public test::FakeTree {
 protected:
  FakePcie() : FakeTree("fabperf-pcie-") {}
  void dev(const std::string& path, const std::string& cur, int curw, const std::string& max, int maxw) {
    put(path + "/current_link_speed", cur);
    put(path + "/current_link_width", std::to_string(curw));
    put(path + "/max_link_speed", max);
    put(path + "/max_link_width", std::to_string(maxw));
  }
  void netdev(const std::string& fn, const std::string& name, int speed) {
    put(fn + "/net/" + name + "/speed", std::to_string(speed));
    put(fn + "/net/" + name + "/mtu", "1500");
    const auto rel = fs::path(fn + "/net/" + name).lexically_relative("sys/class/net");
    link("sys/class/net/" + name, rel.string());
    link(fn + "/net/" + name + "/device", "../../../" + fs::path(fn).filename().string());
  }
};
}  // namespace

TEST_F(FakePcie, CardInANarrowerSlotSaysMoveIt) {
  const std::string port = "sys/devices/pci0000:00/0000:00:03.0", fn = port + "/0000:04:00.0";
  dev(port, "8.0 GT/s PCIe", 4, "8.0 GT/s PCIe", 4);  // a x16 connector wired x4
  dev(fn, "8.0 GT/s PCIe", 4, "8.0 GT/s PCIe", 8);
  netdev(fn, "eth0", 25000);
  const auto p = read_link("eth0", root())->pcie;
  ASSERT_TRUE(p);
  const auto f = pcie_findings(*p, "eth0");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].what, "eth0: PCIe x4 of x8, Gen3: 28.6 Gbit/s usable for 1 x 25 Gbit/s of ports (0000:04:00.0)");
  EXPECT_EQ(f[0].fix,
            "the slot's port 0000:00:03.0 supports only x4 Gen3 (8 GT/s): move the card to a slot of x8 Gen3 (8 GT/s)");
}

TEST_F(FakePcie, SlowerSpeedAndBothAreNamed) {
  const std::string port = "sys/devices/pci0000:00/0000:00:03.0", fn = port + "/0000:04:00.0";
  dev(port, "5.0 GT/s PCIe", 8, "8.0 GT/s PCIe", 8);
  dev(fn, "5.0 GT/s PCIe", 8, "8.0 GT/s PCIe", 8);
  netdev(fn, "eth0", 40000);
  auto p = *read_link("eth0", root())->pcie;
  // Gen2 x8: 5 GT/s x 8 x 8b/10b = 32 Gbit/s, 29.0 after the TLP overhead.
  EXPECT_EQ(pcie_link_findings(p, "eth0")[0].what,
            "eth0: PCIe Gen2 of Gen3, x8: 29.0 Gbit/s usable for 1 x 40 Gbit/s of ports (0000:04:00.0)");
  p.link.width = 4;
  EXPECT_EQ(pcie_link_findings(p, "eth0")[0].what,
            "eth0: PCIe x4 Gen2 of x8 Gen3: 14.5 Gbit/s usable for 1 x 40 Gbit/s of ports (0000:04:00.0)");
}

TEST_F(FakePcie, NarrowerUplinkFurtherUpBoundsTheCard) {
  // Root port -> switch upstream port (uplink trained x4) -> switch downstream port -> card.
  const std::string rp = "sys/devices/pci0000:00/0000:00:01.0", usp = rp + "/0000:01:00.0", dsp = usp + "/0000:02:00.0",
                    fn = dsp + "/0000:03:00.0";
  dev(rp, "8.0 GT/s PCIe", 4, "8.0 GT/s PCIe", 16);
  dev(usp, "8.0 GT/s PCIe", 4, "8.0 GT/s PCIe", 16);
  dev(dsp, "8.0 GT/s PCIe", 8, "8.0 GT/s PCIe", 8);
  dev(fn, "8.0 GT/s PCIe", 8, "8.0 GT/s PCIe", 8);
  netdev(fn, "eth0", 40000);
  const auto p = *read_link("eth0", root())->pcie;
  EXPECT_EQ(p.port, "0000:02:00.0");
  EXPECT_EQ(p.limit_at, "0000:01:00.0");
  EXPECT_EQ(p.limit, (PcieLinkState{8.0, 4}));
  EXPECT_EQ(pcie_effective_link(p), (PcieLinkState{8.0, 4}));
  const auto f = pcie_findings(p, "eth0");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].what,
            "eth0: PCIe x4 Gen3 (8 GT/s) (0000:03:00.0, limited to x4 Gen3 (8 GT/s) at 0000:01:00.0): 28.6 "
            "Gbit/s usable for 1 x 40 Gbit/s of ports (40.0 Gbit/s)");
}

TEST_F(FakePcie, VirtualFunctionsAndEscapingLinksAreNotCounted) {
  const std::string port = "sys/devices/pci0000:00/0000:00:03.0", pf = port + "/0000:04:00.0",
                    vf = port + "/0000:04:00.2";
  dev(port, "8.0 GT/s PCIe", 8, "8.0 GT/s PCIe", 8);
  dev(pf, "8.0 GT/s PCIe", 8, "8.0 GT/s PCIe", 8);
  netdev(pf, "eth0", 25000);
  netdev(vf, "eth0v0", 25000);
  link(vf + "/physfn", "../0000:04:00.0");
  const auto p = *read_link("eth0", root())->pcie;
  ASSERT_EQ(p.ports.size(), 1u);
  EXPECT_EQ(p.ports[0].name, "eth0");
  // A device link that leaves the captured tree reads nothing from the host.
  link("sys/class/net/evil/device", "/sys/devices");
  put("sys/class/net/evil/mtu", "1500");
  EXPECT_FALSE(read_pcie("/sys/class/net/evil/device", root()));
  EXPECT_FALSE(read_pcie("/sys/class/net/missing/device", root()));
  // A USB NIC's device is a USB interface under the host controller's function: no link of its own.
  const std::string usb = "sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0";
  dev("sys/devices/pci0000:00/0000:00:14.0", "Unknown", 0, "Unknown", 0);
  put(usb + "/net/usb0/mtu", "1500");
  link("sys/class/net/usb0", "../../devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/net/usb0");
  link(usb + "/net/usb0/device", "../../../2-1:1.0");
  EXPECT_FALSE(read_pcie("/sys/class/net/usb0/device", root()));
}

TEST(PcieJson, RoundTripAndOlderAgents) {
  const auto l = *read_link("eth4", data("gen3x8-2x56"));
  const nlohmann::json j = to_json(l);
  ASSERT_TRUE(j["pcie"].is_object());
  EXPECT_EQ(j["pcie"]["link"]["generation"], 3);
  EXPECT_NEAR(j["pcie"]["usable_gbps"].get<double>(), 57.2, 0.05);
  EXPECT_EQ(j["pcie"]["ports_speed_mbps"], 112000);
  EXPECT_EQ(j["pcie"]["findings"].size(), 2u);
  const auto back = link_from_json(j);
  ASSERT_TRUE(back.pcie);
  EXPECT_EQ(back.pcie->address, l.pcie->address);
  EXPECT_EQ(back.pcie->port_max, l.pcie->port_max);
  EXPECT_EQ(back.pcie->max_payload, 256);
  EXPECT_EQ(back.pcie->ports.size(), 2u);
  EXPECT_EQ(back.pcie->irq.served_local, l.pcie->irq.served_local);
  EXPECT_EQ(pcie_findings(*back.pcie, "x").size(), 2u);
  // An agent without the PCIe inventory sends no "pcie": fine. A wrong type is named.
  nlohmann::json old = j;
  old.erase("pcie");
  EXPECT_FALSE(link_from_json(old).pcie);
  nlohmann::json bad = j;
  bad["pcie"]["link"]["width"] = "x8";
  try {
    (void)link_from_json(bad);
    FAIL() << "accepted a string width";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("pcie.link.width"), std::string::npos) << e.what();
  }
}

TEST(PcieInventory, LinksTextShowsEachLinkOnceWithItsFindings) {
  const auto links = read_links(data("degraded-x4"));
  const std::string t = render_pcie_inventory_text(links, {});
  EXPECT_NE(
      t.find(
          "0000:3b:00.0   x4 Gen3 (8 GT/s)   x8 Gen3 (8 GT/s)   x8 Gen3 (8 GT/s)      0           28.6  eth2 eth3: 2 x "
          "56 Gbit/s (112 Gbit/s)"),
      std::string::npos)
      << t;
  EXPECT_NE(t.find("error   eth2+eth3: PCIe x4 of x8, Gen3: 28.6 Gbit/s usable"), std::string::npos) << t;
  EXPECT_EQ(t.find("PCIe x4 of x8", t.find("PCIe x4 of x8") + 1), std::string::npos) << "named twice:\n" << t;
  EXPECT_NE(t.find("  eth2 (0000:3b:00.0): 4 IRQs, 200006 interrupts, 100% on its local CPUs 0-13,28-41\n"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("eth3 (0000:3b:00.0)"), std::string::npos) << "one function, one IRQ line:\n" << t;
  EXPECT_NE(t.find("  0000:3b:00.0: port 0000:3a:00.0; max payload 256 B (assumed)\n"), std::string::npos) << t;
  EXPECT_EQ(render_pcie_inventory_text({}, {}), "");
}

namespace {
NodeRecord node_with(const std::string& name, const std::vector<LinkInfo>& links, double rx_mb_per_s,
                     double busiest_pct) {
  NodeRecord n;
  n.name = name;
  n.is_server = true;
  AgentResult a;
  a.window_s = 2.0;
  for (const auto& l : links) {
    LinkResult lr;
    lr.info = l;
    fabperf::LinkSample s0, s1;
    s0.t_ns = 0;
    s1.t_ns = 2'000'000'000;
    s0.counters.present = s1.counters.present = true;
    s1.counters.rx_bytes = static_cast<std::uint64_t>(rx_mb_per_s * 1e6 * 2.0);
    lr.samples = {s0, s1};
    a.links.push_back(lr);
  }
  a.threads.push_back({"recv-0", 2.0 * busiest_pct / 100.0});
  n.result = a;
  return n;
}
const PcieSlotReport& only_slot(const Report& r) {
  if (r.nodes.size() != 1 || r.nodes[0].pcie_slots.size() != 1)
    throw std::runtime_error("expected one node with one slot");
  return r.nodes[0].pcie_slots[0];
}
bool has_finding(const Report& r, const std::string& part) {
  return std::any_of(r.findings.begin(), r.findings.end(),
                     [&](const std::string& f) { return f.find(part) != std::string::npos; });
}
}  // namespace

TEST(PcieReport, SaysWhetherTheSlotOrTheCpuBoundedTheNode) {
  const auto links = read_links(data("gen3x8-2x56"));  // eth4, eth5: one x8 Gen3 link, 57.2 Gbit/s usable
  ASSERT_EQ(links.size(), 2u);
  // 3.5 GB/s received on each port: 56 Gbit/s together, 98% of the slot's ceiling.
  RunRecord at;
  at.nodes.push_back(node_with("n1:6668", links, 3500, 40));
  Report r = compute_report(at);
  const auto& s = only_slot(r);
  EXPECT_EQ(s.ports, (std::vector<std::string>{"eth4", "eth5"}));
  EXPECT_NEAR(s.rx_gbps, 56.0, 1e-6);
  EXPECT_NEAR(s.used_pct, 100.0 * 56.0 / pcie_ceiling_gbps(*links[0].pcie), 1e-6);
  EXPECT_TRUE(s.at_ceiling);
  EXPECT_EQ(s.bound_by, "slot");
  EXPECT_TRUE(
      has_finding(r,
                  "node n1:6668: eth4+eth5 received 56.0 Gbit/s, 98% of its PCIe link's 57.2 Gbit/s usable (x8 "
                  "Gen3 (8 GT/s) at 0000:af:00.0): the slot bounded this node, not the network links (112 Gbit/s "
                  "of ports)"))
      << r.findings.front();
  const auto j = render_json(r);
  EXPECT_EQ(j["nodes"][0]["pcie_slots"][0]["bound_by"], "slot");
  EXPECT_EQ(j["nodes"][0]["pcie_slots"][0]["at_ceiling"], true);

  // The same figure with a data thread at its limit: either may have bounded it, and it says so.
  RunRecord both;
  both.nodes.push_back(node_with("n1:6668", links, 3500, 97));
  r = compute_report(both);
  EXPECT_EQ(only_slot(r).bound_by, "slot or host");
  EXPECT_TRUE(has_finding(r, "the slot or this node's CPU bounded it"));

  // Far below the ceiling with a thread at its limit: the CPU, not the slot.
  RunRecord cpu;
  cpu.nodes.push_back(node_with("n1:6668", links, 500, 97));
  r = compute_report(cpu);
  EXPECT_FALSE(only_slot(r).at_ceiling);
  EXPECT_EQ(only_slot(r).bound_by, "host");
  EXPECT_TRUE(has_finding(r, "the CPU (fabperf thread recv-0 at 97%), not the slot, bounded this node"));

  // Neither: nothing said about the slot.
  RunRecord fine;
  fine.nodes.push_back(node_with("n1:6668", links, 500, 30));
  r = compute_report(fine);
  EXPECT_EQ(only_slot(r).bound_by, "");
  EXPECT_FALSE(has_finding(r, "PCIe"));
}

TEST(PcieReport, PreflightNamesTheDegradedLinkOnceAndSaysOkOtherwise) {
  RunRecord rec;
  rec.nodes.push_back(node_with("198.18.0.1:6668", read_links(data("degraded-x4")), 10, 10));
  rec.nodes.push_back(node_with("198.18.0.2:6668", read_links(data("ib-hca")), 10, 10));
  const std::map<std::string, std::string> names{{"198.18.0.1:6668", "n1"}};
  const auto f = plan::preflight_pcie_findings(rec, names);
  ASSERT_EQ(f.size(), 1u) << plan::render_findings(f);
  EXPECT_EQ(f[0].level, "error");
  EXPECT_EQ(f[0].node, "n1");
  EXPECT_EQ(f[0].what, "eth2+eth3: PCIe x4 of x8, Gen3: 28.6 Gbit/s usable for 2 x 56 Gbit/s of ports (0000:3b:00.0)");

  RunRecord good;
  good.nodes.push_back(node_with("a:1", read_links(data("ib-hca")), 10, 10));
  const auto ok = plan::preflight_pcie_findings(good, {});
  ASSERT_EQ(ok.size(), 1u) << plan::render_findings(ok);
  EXPECT_EQ(ok[0].level, "ok");
  // The whole pre-flight carries the error.
  const auto all = plan::preflight_findings(rec, compute_report(rec), names, {});
  EXPECT_TRUE(std::any_of(all.begin(), all.end(), [](const plan::Finding& x) {
    return x.level == "error" && x.what.find("x4 of x8") != std::string::npos;
  }));
}

// Issue 31: a host-side shaper (a root tbf) below the negotiated speed is named in pre-flight,
// with its fix; a link shaped at or above its speed is not.
TEST(Preflight, AHostSideShaperIsNamed) {
  LinkInfo eth;
  eth.name = "eth0";
  eth.mtu = 9000;
  eth.speed_mbps = 10000;
  RunRecord rec;
  for (int i = 1; i <= 3; ++i) {
    eth.shaped_mbps = i == 3 ? 1000 : (i == 2 ? 10000 : -1);
    rec.nodes.push_back(node_with(fmt::format("198.18.0.{}:6668", i), {eth}, 10, 10));
  }
  const auto all = plan::preflight_findings(rec, compute_report(rec), {{"198.18.0.3:6668", "n3"}}, {});
  std::vector<plan::Finding> shaped;
  for (const auto& f : all) {
    if (f.what.find("tbf") != std::string::npos) shaped.push_back(f);
  }
  ASSERT_EQ(shaped.size(), 1u) << plan::render_findings(all);
  EXPECT_EQ(shaped[0].level, "warning");
  EXPECT_EQ(shaped[0].node, "n3/eth0");
  EXPECT_EQ(shaped[0].what, "a shaping root qdisc (tbf, htb) holds it to 1000 Mbit/s, below the negotiated 10000 Mb/s");
  EXPECT_NE(shaped[0].fix.find("on n3: tc qdisc show dev eth0"), std::string::npos);
}

// Issue 31: pre-flight's advice for an unusable agent matches what went wrong.
TEST(Preflight, TheFixMatchesTheError) {
  EXPECT_EQ(plan::agent_error_fix("cannot reach agent h9:6668: name does not resolve (Host not found)"),
            "check the host's name or address in the plan (DNS, /etc/hosts)");
  EXPECT_EQ(plan::agent_error_fix("authentication failed for h1:6668: the agent requires a key; give --key-file FILE"),
            "give this coordinator the agents' key: --key-file FILE or FABPERF_KEY_FILE");
  EXPECT_NE(plan::agent_error_fix("cannot reach agent h1:6668: Connection refused").find("start 'fabperf agent"),
            std::string::npos);
  EXPECT_NE(plan::agent_error_fix("authentication failed for h1:6668: key mismatch").find("one key everywhere"),
            std::string::npos);
}

TEST(PcieSysfs, VmLabGuestTreeAsTheKernelWroteIt) {
  // tests/data/pcie/vm-q35: a q35 guest's sysfs, the interface under its virtio device.
  const auto l = read_link("ens1f0", data("vm-q35"));
  ASSERT_TRUE(l && l->pcie);
  EXPECT_EQ(l->numa_node, 1);  // from the PCI function: the virtio device has no numa_node
  const PcieInfo& p = *l->pcie;
  EXPECT_EQ(p.address, "0000:81:00.0");
  EXPECT_EQ(p.port, "0000:80:00.0");
  EXPECT_EQ(p.link, (PcieLinkState{2.5, 1}));  // qemu's endpoints: always x1 2.5 GT/s
  EXPECT_EQ(p.max, (PcieLinkState{2.5, 1}));
  EXPECT_EQ(p.port_max, (PcieLinkState{8.0, 4}));  // x-speed=8, x-width=4
  EXPECT_EQ(p.max_payload, 128);                   // Device Control, from the captured config space
  ASSERT_EQ(p.ports.size(), 2u);
  EXPECT_EQ(p.ports[0].name, "ens1f0");
  EXPECT_EQ(p.ports[1].name, "ens1f1");
  EXPECT_EQ(pcie_ports_mbps(p), 112000);
  EXPECT_NEAR(pcie_ceiling_gbps(p), 2.0 * 128 / 154, 1e-9);
  EXPECT_EQ(p.irq.local_cpus, "1");
  EXPECT_EQ(p.irq.irqs, 3);
  // smp_affinity_list says CPU 0 for all three; the idle config IRQ's effective affinity is still
  // CPU 1 (it moves at its next interrupt): all three count as set off the node.
  EXPECT_EQ(p.irq.remote_affinity, 3);
  EXPECT_EQ(p.irq.served, 99u);
  const auto f = pcie_findings(p, "ens1f0");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(
      f[0].what,
      "ens1f0: PCIe x1 Gen1 (2.5 GT/s) (0000:81:00.0): 1.7 Gbit/s usable for 2 x 56 Gbit/s of ports (112.0 Gbit/s)");
  EXPECT_EQ(f[1].what, "ens1f0: 3 of its 3 IRQs are set to CPUs outside NUMA node 1 (local CPUs 1)");
}
