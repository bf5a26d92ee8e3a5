// RDMA inventory and port counters: sysfs parsers on fake trees (an InfiniBand HCA as mlx5 lays
// it out) and on a tree captured from Soft-RoCE in the VM lab (tests/data/rdma), the counter
// deltas and findings of the report, and the JSON the LINKS and RESULT messages carry.
#include <fabperf/core/error.hpp>
#include <fabperf/proto/agent_result.hpp>
#include <fabperf/proto/proto.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/sysinfo/rdma_sysfs.hpp>

#include "unit/fake_tree.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

using namespace fabperf;
namespace fs = std::filesystem;

namespace {

class FakeRdma : public test::FakeTree {
 protected:
  FakeRdma() : FakeTree("fabperf-rdma-") {}
  // An mlx5-style InfiniBand port: PMA counters in counters/, driver counters in hw_counters/.
  void ib_port(std::uint64_t xmit_words, std::uint64_t symbol_errors, std::uint64_t out_of_seq) {
    const std::string d = "sys/class/infiniband/mlx5_0/";
    put(d + "node_type", "1: CA");
    put(d + "fw_ver", "20.31.1014");
    put(d + "node_guid", "b859:9f03:00d4:1e2a");
    put(d + "hca_type", "MT4123");
    put(d + "board_id", "MT_0000000223");
    const std::string p = d + "ports/1/";
    put(p + "state", "4: ACTIVE");
    put(p + "phys_state", "5: LinkUp");
    put(p + "link_layer", "InfiniBand");
    put(p + "rate", "200 Gb/sec (4X HDR)");
    put(p + "lid", "0x1a");
    put(p + "sm_lid", "0x1");
    put(p + "gids/0", "fe80:0000:0000:0000:b859:9f03:00d4:1e2a");
    put(p + "gids/1", "0000:0000:0000:0000:0000:0000:0000:0000");
    put(p + "gid_attrs/types/0", "IB/RoCE v1");
    put(p + "counters/port_xmit_data", std::to_string(xmit_words));
    put(p + "counters/port_rcv_data", std::to_string(xmit_words / 2));
    put(p + "counters/port_xmit_packets", std::to_string(xmit_words / 1024));
    put(p + "counters/port_rcv_packets", std::to_string(xmit_words / 2048));
    put(p + "counters/symbol_error", std::to_string(symbol_errors));
    put(p + "counters/link_downed", "0");
    put(p + "counters/VL15_dropped", "N/A");  // a counter the device cannot read
    put(p + "hw_counters/out_of_sequence", std::to_string(out_of_seq));
    put(p + "hw_counters/np_cnp_sent", "7");
    put(p + "hw_counters/lifespan", "10");  // a setting, not a counter
  }
};

const std::uint64_t* value_of(const RdmaPortCounters& c, const std::string& key) {
  for (const auto& [k, v] : c.values) {
    if (k == key) return &v;
  }
  return nullptr;
}

}  // namespace

TEST(RdmaSysfs, StateRateAndMtuParsers) {
  EXPECT_EQ(parse_numbered_state("4: ACTIVE"), std::make_pair(4, std::string("ACTIVE")));
  EXPECT_EQ(parse_numbered_state("3: Disabled"), std::make_pair(3, std::string("Disabled")));
  EXPECT_EQ(parse_numbered_state("odd"), std::make_pair(0, std::string("odd")));
  const auto r = parse_rdma_rate("100 Gb/sec (4X EDR)");
  EXPECT_DOUBLE_EQ(r.gbps, 100);
  EXPECT_EQ(r.width, "4X");
  EXPECT_EQ(r.speed, "EDR");
  EXPECT_DOUBLE_EQ(parse_rdma_rate("2.5 Gb/sec (1X SDR)").gbps, 2.5);
  EXPECT_DOUBLE_EQ(parse_rdma_rate("").gbps, 0);
  // The kernel's iboe_get_mtu: interface MTU less 96 bytes of RoCE headers, rounded down.
  EXPECT_EQ(roce_mtu_for_netdev_mtu(1500), 1024);
  EXPECT_EQ(roce_mtu_for_netdev_mtu(9000), 4096);
  EXPECT_EQ(roce_mtu_for_netdev_mtu(65536), 4096);
  EXPECT_EQ(roce_mtu_for_netdev_mtu(4200), 4096);
  EXPECT_EQ(roce_mtu_for_netdev_mtu(4191), 2048);
  EXPECT_EQ(roce_mtu_for_netdev_mtu(300), 0);
}

TEST(RdmaSysfs, ErrorCounterClassification) {
  for (const char* bad :
       {"counters/symbol_error", "counters/link_downed", "counters/port_rcv_errors", "counters/port_xmit_discards",
        "counters/VL15_dropped", "counters/link_error_recovery", "hw_counters/retry_exceeded_err",
        "hw_counters/rcvd_rnr_err", "hw_counters/out_of_sequence", "hw_counters/duplicate_request",
        "hw_counters/local_ack_timeout_err", "hw_counters/rnr_nak_retry_err", "hw_counters/roce_adp_retrans"}) {
    EXPECT_TRUE(is_rdma_error_counter(bad)) << bad;
  }
  for (const char* ok : {"counters/port_xmit_data", "counters/port_rcv_packets", "hw_counters/sent_pkts",
                         "hw_counters/rcvd_pkts", "hw_counters/np_cnp_sent", "hw_counters/rp_cnp_handled",
                         "hw_counters/rdma_sends", "hw_counters/ack_deferred", "counters/port_xmit_wait"}) {
    EXPECT_FALSE(is_rdma_error_counter(ok)) << ok;
  }
  EXPECT_TRUE(is_rdma_counter_setting("hw_counters/lifespan"));
}

TEST_F(FakeRdma, InfiniBandInventory) {
  ib_port(1000, 0, 0);
  const auto devs = read_rdma_devices(root());
  ASSERT_EQ(devs.size(), 1u);
  const auto& d = devs[0];
  EXPECT_EQ(d.name, "mlx5_0");
  EXPECT_EQ(d.node_type, "CA");
  EXPECT_EQ(d.fw_ver, "20.31.1014");
  EXPECT_EQ(d.hca_type, "MT4123");
  ASSERT_EQ(d.ports.size(), 1u);
  const auto& p = d.ports[0];
  EXPECT_EQ(p.port, 1);
  EXPECT_EQ(p.state, "ACTIVE");
  EXPECT_EQ(p.state_num, 4);
  EXPECT_EQ(p.phys_state, "LinkUp");
  EXPECT_EQ(p.link_layer, "InfiniBand");
  EXPECT_DOUBLE_EQ(p.rate_gbps, 200);
  EXPECT_EQ(p.width, "4X");
  EXPECT_EQ(p.speed, "HDR");
  EXPECT_EQ(p.lid, 0x1au);
  EXPECT_EQ(p.sm_lid, 1u);
  EXPECT_EQ(p.netdev, "");
  EXPECT_EQ(p.active_mtu, 0);  // sysfs has no MTU, and no interface to derive it from
  EXPECT_EQ(p.gid_table_len, 2);
  ASSERT_EQ(p.gids.size(), 1u);  // the zero GID is an empty entry
  EXPECT_EQ(p.gids[0].gid, "fe80::b859:9f03:d4:1e2a");
  EXPECT_EQ(p.gids[0].type, "IB");
  EXPECT_FALSE(read_rdma_device("mlx5_9", root()).has_value());
  EXPECT_FALSE(read_rdma_device("../x", root()).has_value());
}

// Captured from Soft-RoCE on lo in the VM lab (tests/data/rdma/README.md).
TEST(RdmaSysfs, CapturedSoftRoceTree) {
  const std::string root = std::string(FABPERF_TEST_DATA) + "/rdma/rxe-lo";
  const auto devs = read_rdma_devices(root);
  ASSERT_EQ(devs.size(), 1u);
  const auto& d = devs[0];
  EXPECT_EQ(d.name, "rxe0");
  EXPECT_EQ(d.node_type, "CA");
  EXPECT_EQ(d.parent, "lo");
  EXPECT_EQ(d.node_guid, "0200:00ff:fe00:0000");
  ASSERT_EQ(d.ports.size(), 1u);
  const auto& p = d.ports[0];
  EXPECT_EQ(p.state, "ACTIVE");
  EXPECT_EQ(p.phys_state, "LinkUp");
  EXPECT_EQ(p.link_layer, "Ethernet");
  EXPECT_EQ(p.rate, "2.5 Gb/sec (1X SDR)");
  EXPECT_DOUBLE_EQ(p.rate_gbps, 2.5);
  EXPECT_EQ(p.width, "1X");
  EXPECT_EQ(p.speed, "SDR");
  EXPECT_EQ(p.netdev, "lo");
  EXPECT_EQ(p.active_mtu, 4096);  // lo's 65536 less the headers, capped at IB's largest
  EXPECT_EQ(p.mtu_source, "netdev");
  EXPECT_EQ(p.gid_table_len, 8);
  ASSERT_EQ(p.gids.size(), 5u);
  EXPECT_EQ(p.gids[0].gid, "fe80::200:ff:fe00:0");
  EXPECT_EQ(p.gids[1].gid, "::ffff:127.0.0.1");
  EXPECT_EQ(p.gids[3].gid, "::ffff:127.0.0.3");
  EXPECT_EQ(p.gids[4].gid, "::1");
  for (const auto& g : p.gids) {
    EXPECT_EQ(g.type, "RoCE v2") << g.index;
    EXPECT_EQ(g.netdev, "lo") << g.index;
  }
  const auto c = read_rdma_port_counters("rxe0", 1, root);
  EXPECT_TRUE(c.present);
  EXPECT_EQ(c.values.size(), 15u);  // 16 files less lifespan, a setting
  EXPECT_NE(value_of(c, "hw_counters/sent_pkts"), nullptr);
  EXPECT_NE(value_of(c, "hw_counters/retry_exceeded_err"), nullptr);
  EXPECT_EQ(value_of(c, "hw_counters/lifespan"), nullptr);
  EXPECT_TRUE(c.unreadable.empty());
}

TEST_F(FakeRdma, CountersReadableUnreadableAndSettings) {
  ib_port(123456, 2, 5);
  const auto c = read_rdma_port_counters("mlx5_0", 1, root());
  EXPECT_TRUE(c.present);
  ASSERT_NE(value_of(c, "counters/port_xmit_data"), nullptr);
  EXPECT_EQ(*value_of(c, "counters/port_xmit_data"), 123456u);
  EXPECT_EQ(*value_of(c, "hw_counters/out_of_sequence"), 5u);
  EXPECT_EQ(value_of(c, "hw_counters/lifespan"), nullptr);
  EXPECT_EQ(c.unreadable, std::vector<std::string>{"counters/VL15_dropped"});
  EXPECT_FALSE(read_rdma_port_counters("mlx5_0", 2, root()).present);
  EXPECT_FALSE(read_rdma_port_counters("gone0", 1, root()).present);
}

TEST_F(FakeRdma, ReportDeltasWordsToBytesAndFindings) {
  ib_port(1'000'000, 1, 0);
  RdmaPortResult p;
  p.device = "mlx5_0";
  p.info = read_rdma_device("mlx5_0", root())->ports[0];
  p.info.active_mtu = 4096;
  p.samples.push_back({0, read_rdma_port_counters("mlx5_0", 1, root())});
  // 10 MB of 64 KiB blocks in 4 KiB packets: port_xmit_data grows by (payload + headers) / 4.
  const std::uint64_t payload = 160 * 65536;
  const std::uint64_t packets = 160 * 16;
  const std::uint64_t wire = payload + packets * rdma_header_bytes("InfiniBand");
  ib_port(1'000'000 + wire / 4, 4, 3);
  p.samples.push_back({2'000'000'000, read_rdma_port_counters("mlx5_0", 1, root())});
  AgentResult a;
  FlowResult f;
  f.rdma_port = "mlx5_0:1";
  f.tx_bytes_window = f.tx_delivered_window = payload;
  f.tx_bytes_total = payload;
  a.flows.push_back(f);
  FlowResult other;  // a flow on another port does not count here
  other.rdma_port = "mlx5_1:1";
  other.tx_bytes_window = other.tx_delivered_window = other.tx_bytes_total = 999;
  a.flows.push_back(other);
  std::vector<std::string> findings;
  const auto r = rdma_port_report(p, a, 65536, "nodeA", findings);
  EXPECT_EQ(r.port, "mlx5_0:1");
  EXPECT_TRUE(r.have_counters);
  EXPECT_DOUBLE_EQ(r.window_s, 2.0);
  EXPECT_EQ(r.tx_bytes, static_cast<std::int64_t>(wire / 4 * 4));
  EXPECT_NEAR(r.tx_mb_per_s, static_cast<double>(wire / 4 * 4) / 1e6 / 2.0, 1e-9);
  EXPECT_EQ(r.payload_tx_bytes, payload);
  EXPECT_EQ(r.data_packets_tx, packets);
  EXPECT_EQ(r.header_bytes_per_packet, 26u);
  EXPECT_NEAR(r.tx_bytes_per_payload, static_cast<double>(wire) / static_cast<double>(payload), 1e-4);
  EXPECT_EQ(r.unreadable, std::vector<std::string>{"counters/VL15_dropped"});
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].find("RDMA port mlx5_0:1 on nodeA"), std::string::npos) << findings[0];
  EXPECT_NE(findings[0].find("symbol_error +3"), std::string::npos) << findings[0];
  EXPECT_NE(findings[0].find("out_of_sequence +3"), std::string::npos) << findings[0];
  EXPECT_EQ(findings[0].find("np_cnp_sent"), std::string::npos) << findings[0];

  // Rendered: the table, the counters that moved and what could not be read.
  Report rep;
  NodeReport nr;
  nr.name = "nodeA";
  nr.window_s = 2.0;
  nr.rdma_ports.push_back(r);
  rep.nodes.push_back(nr);
  const std::string text = render_rdma_ports_text(rep);
  EXPECT_NE(text.find("4-byte words"), std::string::npos) << text;
  EXPECT_NE(text.find("mlx5_0:1"), std::string::npos) << text;
  EXPECT_NE(text.find("port_xmit_data +"), std::string::npos) << text;
  EXPECT_NE(text.find("not readable: counters/VL15_dropped"), std::string::npos) << text;
  const auto j = rdma_ports_json(rep.nodes[0].rdma_ports);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["tx_bytes"].get<std::int64_t>(), r.tx_bytes);
  EXPECT_TRUE(j[0]["rx_packets"].is_number());
  EXPECT_EQ(j[0]["error_counters"]["counters/symbol_error"].get<std::uint64_t>(), 3u);
  EXPECT_EQ(j[0]["counters"]["hw_counters/np_cnp_sent"].get<std::uint64_t>(), 0u);
}

TEST_F(FakeRdma, ReportWithoutDataCountersOrSecondSample) {
  RdmaPortResult p;
  p.device = "rxe0";
  p.info.port = 1;
  p.info.link_layer = "Ethernet";
  p.info.active_mtu = 1024;
  RdmaPortCounters c0;
  c0.present = true;
  c0.values = {{"hw_counters/rcvd_pkts", 10}, {"hw_counters/sent_pkts", 100}};
  p.samples.push_back({0, c0});
  AgentResult a;
  FlowResult f;
  f.rdma_port = "rxe0:1";
  f.rx_bytes_window = f.rx_bytes_total = 3000;  // a window edge cut a block: 2 packets of 1024 + 1
  a.flows.push_back(f);
  std::vector<std::string> findings;
  auto r = rdma_port_report(p, a, 65536, "n", findings);
  EXPECT_FALSE(r.have_counters);
  EXPECT_EQ(r.tx_packets, -1);
  EXPECT_EQ(r.data_packets_rx, 3u);
  auto c1 = c0;
  c1.values = {{"hw_counters/rcvd_pkts", 50}, {"hw_counters/sent_pkts", 180}};
  p.samples.push_back({1'000'000'000, c1});
  r = rdma_port_report(p, a, 65536, "n", findings);
  EXPECT_TRUE(r.have_counters);
  EXPECT_EQ(r.tx_bytes, -1);  // Soft-RoCE counts packets, not bytes
  EXPECT_EQ(r.tx_packets, 80);
  EXPECT_EQ(r.rx_packets, 40);
  EXPECT_EQ(r.header_bytes_per_packet, 62u);
  EXPECT_TRUE(findings.empty());
  // The port went away before the close.
  RdmaPortCounters gone;
  p.samples.back().counters = gone;
  r = rdma_port_report(p, a, 65536, "n", findings);
  EXPECT_FALSE(r.have_counters);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].find("disappeared"), std::string::npos);
}

TEST_F(FakeRdma, InventoryJsonRoundTripsAndOldAgentsStillParse) {
  ib_port(1, 0, 0);
  const auto d = *read_rdma_device("mlx5_0", root());
  const auto back = rdma_device_from_json(to_json(d));
  EXPECT_EQ(to_json(back), to_json(d));
  // A LINKS reply without "rdma" (an agent older than the RDMA inventory) parses, with none.
  proto::LinksReply m;
  m.hostname = "h";
  m.rdma.push_back(d);
  auto j = proto::to_json(m);
  EXPECT_EQ(proto::parse_links(j).rdma.size(), 1u);
  j.erase("rdma");
  EXPECT_TRUE(proto::parse_links(j).rdma.empty());
  // Wrong types are refused with the field named.
  auto bad = to_json(d);
  bad["ports"][0]["port"] = "one";
  try {
    (void)rdma_device_from_json(bad);
    FAIL() << "accepted";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("rdma.port.port"), std::string::npos) << e.what();
  }
}

TEST(RdmaSysfs, AgentResultCarriesPortSamplesAndOldResultsParse) {
  AgentResult r;
  r.hostname = "h";
  FlowResult f;
  f.local = "rxe0:1 gid[1] ::ffff:127.0.0.3 qpn 17";
  f.remote = "127.0.0.2 qpn 18";
  f.rdma_port = "rxe0:1";
  r.flows.push_back(f);
  RdmaPortResult p;
  p.device = "rxe0";
  p.info.port = 1;
  p.info.link_layer = "Ethernet";
  RdmaPortCounters c;
  c.present = true;
  c.values = {{"hw_counters/sent_pkts", 5}};
  c.unreadable = {"hw_counters/odd"};
  p.samples.push_back({0, c});
  p.samples.push_back({1000, c});
  r.rdma_ports.push_back(p);
  const auto j = to_json(r);
  const auto back = parse_agent_result(j);
  ASSERT_EQ(back.rdma_ports.size(), 1u);
  EXPECT_EQ(back.rdma_ports[0].device, "rxe0");
  ASSERT_EQ(back.rdma_ports[0].samples.size(), 2u);
  EXPECT_EQ(back.rdma_ports[0].samples[1].t_ns, 1000);
  EXPECT_EQ(back.rdma_ports[0].samples[1].counters.values, c.values);
  EXPECT_EQ(back.rdma_ports[0].samples[1].counters.unreadable, c.unreadable);
  EXPECT_EQ(back.flows[0].rdma_port, "rxe0:1");
  auto old = j;
  old.erase("rdma_ports");
  old["flows"][0].erase("rdma_port");
  const auto o = parse_agent_result(old);
  EXPECT_TRUE(o.rdma_ports.empty());
  EXPECT_EQ(o.flows[0].rdma_port, "");
  auto bad = j;
  bad["rdma_ports"][0]["samples"][0]["values"]["hw_counters/sent_pkts"] = -1;
  EXPECT_THROW((void)parse_agent_result(bad), ProtocolError);
}
