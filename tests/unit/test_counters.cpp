// Named counters: MIB and softnet parsers on files captured from a host, the counter dictionary
// on per-driver name listings (tests/data/counters), the dip diagnosis and the wire encoding.
#include <fabperf/core/error.hpp>
#include <fabperf/plan/plan.hpp>
#include <fabperf/proto/agent_result.hpp>
#include <fabperf/report/diagnosis.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/sysinfo/counters.hpp>

#include <gtest/gtest.h>

#include "common/step_result.hpp"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

using namespace fabperf;
using Cat = CounterCategory;

namespace {

const std::string kData = FABPERF_TEST_DATA "/counters";

std::vector<std::string> listing(const std::string& driver) {
  std::ifstream in(kData + "/ethtool/" + driver + ".txt");
  std::vector<std::string> names;
  std::string line;
  std::getline(in, line);  // "NIC statistics:"
  while (std::getline(in, line)) {
    const auto colon = line.rfind(':');
    const auto start = line.find_first_not_of(' ');
    if (colon != std::string::npos && start < colon) names.push_back(line.substr(start, colon - start));
  }
  return names;
}

struct Want {
  Cat cat;
  int prio{-1};
};

// Every symptom counter of a listing must be classified as expected; every other name must land
// in a non-symptom class (traffic, other) or the generic error class.
void check_listing(const std::string& driver, const std::map<std::string, Want>& want) {
  const auto names = listing(driver);
  ASSERT_GT(names.size(), 5u) << driver;
  std::set<std::string> seen;
  for (const auto& n : names) {
    const CounterClass c = classify_counter(n);
    const auto it = want.find(n);
    if (it != want.end()) {
      EXPECT_EQ(to_string(c.category), to_string(it->second.cat)) << driver << " " << n;
      EXPECT_EQ(c.priority, it->second.prio) << driver << " " << n;
      seen.insert(n);
    } else {
      EXPECT_TRUE(c.category == Cat::traffic || c.category == Cat::other || c.category == Cat::error)
          << driver << " " << n << " classified as " << to_string(c.category);
    }
  }
  for (const auto& [n, w] : want) EXPECT_TRUE(seen.count(n)) << driver << ": " << n << " is not in the listing";
}

}  // namespace

TEST(CounterDictionary, Mlx5) {
  check_listing("mlx5", {{"rx_out_of_buffer", {Cat::discard}},
                         {"rx_xdp_drop", {Cat::discard}},
                         {"tx_queue_dropped", {Cat::discard}},
                         {"rx_oversize_pkts_sw_drop", {Cat::discard}},
                         {"rx_discards_phy", {Cat::discard}},
                         {"tx_discards_phy", {Cat::discard}},
                         {"rx_prio3_discards", {Cat::discard, 3}},
                         {"rx0_xdp_drop", {Cat::discard}},
                         {"tx0_dropped", {Cat::discard}},
                         {"rx_crc_errors_phy", {Cat::crc}},
                         {"rx_symbol_err_phy", {Cat::crc}},
                         {"rx_pcs_symbol_err_phy", {Cat::crc}},
                         {"rx_corrected_bits_phy", {Cat::fec_corrected}},
                         {"rx_err_lane_0_phy", {Cat::fec_corrected}},
                         {"rx_err_lane_1_phy", {Cat::fec_corrected}},
                         {"link_down_events_phy", {Cat::link_down}},
                         {"rx_pause_ctrl_phy", {Cat::pause}},
                         {"tx_pause_ctrl_phy", {Cat::pause}},
                         {"rx_prio0_pause", {Cat::pause, 0}},
                         {"tx_prio0_pause", {Cat::pause, 0}},
                         {"rx_prio3_pause", {Cat::pause, 3}},
                         {"tx_prio3_pause", {Cat::pause, 3}},
                         {"rx_prio3_pause_transition", {Cat::pause, 3}},
                         {"tx_pause_storm_warning_events", {Cat::pause}},
                         {"tx_pause_storm_error_events", {Cat::pause}}});
  // A duration in microseconds must not be summed with frame counts.
  EXPECT_EQ(classify_counter("rx_prio3_pause_duration").category, Cat::other);
  EXPECT_EQ(counter_label("rx_prio3_pause"), "PFC, priority 3");
  EXPECT_EQ(classify_counter("rx_prio3_pause").direction, "rx");
  EXPECT_EQ(classify_counter("tx_prio3_pause").direction, "tx");
}

TEST(CounterDictionary, Ice) {
  check_listing("ice", {{"rx_dropped.nic", {Cat::discard}},
                        {"rx_crc_errors.nic", {Cat::crc}},
                        {"illegal_bytes.nic", {Cat::crc}},
                        {"mac_local_faults.nic", {Cat::link_down}},
                        {"mac_remote_faults.nic", {Cat::link_down}},
                        {"tx_dropped_link_down.nic", {Cat::link_down}},
                        {"link_xon_rx.nic", {Cat::pause}},
                        {"link_xoff_rx.nic", {Cat::pause}},
                        {"link_xon_tx.nic", {Cat::pause}},
                        {"link_xoff_tx.nic", {Cat::pause}},
                        {"tx_priority_3_xon.nic", {Cat::pause, 3}},
                        {"tx_priority_3_xoff.nic", {Cat::pause, 3}},
                        {"rx_priority_3_xon.nic", {Cat::pause, 3}},
                        {"rx_priority_3_xoff.nic", {Cat::pause, 3}}});
  EXPECT_EQ(classify_counter("tx_timeout.nic").category, Cat::error);
}

TEST(CounterDictionary, I40e) {
  check_listing("i40e", {{"port.rx_dropped", {Cat::discard}},
                         {"port.tx_dropped_link_down", {Cat::link_down}},
                         {"port.rx_crc_errors", {Cat::crc}},
                         {"port.illegal_bytes", {Cat::crc}},
                         {"port.mac_local_faults", {Cat::link_down}},
                         {"port.mac_remote_faults", {Cat::link_down}},
                         {"port.link_xon_rx", {Cat::pause}},
                         {"port.link_xoff_rx", {Cat::pause}},
                         {"port.link_xon_tx", {Cat::pause}},
                         {"port.link_xoff_tx", {Cat::pause}},
                         {"port.rx_priority_3_xon", {Cat::pause, 3}},
                         {"port.rx_priority_3_xoff", {Cat::pause, 3}},
                         {"port.tx_priority_3_xoff", {Cat::pause, 3}},
                         {"port.tx_priority_3_xoff_tx", {Cat::pause, 3}},
                         {"port.rx_priority_3_xoff_rx", {Cat::pause, 3}},
                         {"port.rx_priority_3_xon_2_xoff", {Cat::pause, 3}}});
  EXPECT_EQ(classify_counter("port.rx_priority_3_xoff").direction, "rx");
}

TEST(CounterDictionary, BnxtEn) {
  check_listing("bnxt_en", {{"rx_discards", {Cat::discard}},
                            {"rx_stat_discard", {Cat::discard}},
                            {"rx_total_discard_pkts", {Cat::discard}},
                            {"rx_total_ring_discards", {Cat::discard}},
                            {"rx_discard_packets_cos3", {Cat::discard, 3}},
                            {"rx_fcs_err_frames", {Cat::crc}},
                            {"rx_align_err_frames", {Cat::crc}},
                            {"rx_pcs_symbol_err", {Cat::crc}},
                            {"rx_pause_frames", {Cat::pause}},
                            {"tx_pause_frames", {Cat::pause}},
                            {"rx_pfc_frames", {Cat::pause}},
                            {"tx_pfc_frames", {Cat::pause}},
                            {"rx_pfc_ena_frames_pri3", {Cat::pause, 3}},
                            {"tx_pfc_ena_frames_pri3", {Cat::pause, 3}},
                            {"rx_pfc_xon2xoff_frames_pri3", {Cat::pause, 3}},
                            {"continuous_pause_events", {Cat::pause}},
                            {"resume_pause_events", {Cat::pause}},
                            {"continuous_roce_pause_events", {Cat::pause}},
                            {"rx_fec_corrected_blocks", {Cat::fec_corrected}},
                            {"rx_fec_uncorrectable_blocks", {Cat::fec_uncorrected}},
                            {"rx_corrected_bits", {Cat::fec_corrected}},
                            {"link_down_events", {Cat::link_down}}});
  EXPECT_EQ(classify_counter("rx_ovrsz_frames").category, Cat::error);
  EXPECT_EQ(classify_counter("rx_total_frames").category, Cat::traffic);
}

TEST(CounterDictionary, Ixgbe) {
  check_listing("ixgbe", {{"rx_dropped", {Cat::discard}},
                          {"tx_dropped", {Cat::discard}},
                          {"rx_crc_errors", {Cat::crc}},
                          {"rx_missed_errors", {Cat::discard}},
                          {"rx_no_dma_resources", {Cat::discard}},
                          {"rx_no_buffer_count", {Cat::discard}},
                          {"tx_flow_control_xon", {Cat::pause}},
                          {"rx_flow_control_xon", {Cat::pause}},
                          {"tx_flow_control_xoff", {Cat::pause}},
                          {"rx_flow_control_xoff", {Cat::pause}},
                          {"tx_pb_3_pxon", {Cat::pause, 3}},
                          {"tx_pb_3_pxoff", {Cat::pause, 3}},
                          {"rx_pb_3_pxon", {Cat::pause, 3}},
                          {"rx_pb_3_pxoff", {Cat::pause, 3}}});
}

TEST(CounterDictionary, VirtioNetAndVeth) {
  check_listing("virtio_net", {{"rx_queue_0_drops", {Cat::discard}},
                               {"rx_queue_0_xdp_drops", {Cat::discard}},
                               {"tx_queue_0_xdp_tx_drops", {Cat::discard}}});
  EXPECT_EQ(classify_counter("tx_queue_0_tx_timeouts").category, Cat::error);
  check_listing("veth", {{"rx_queue_0_drops", {Cat::discard}}, {"rx_queue_0_xdp_drops", {Cat::discard}}});
  // An index is not a counter: never a symptom, never summed.
  EXPECT_EQ(classify_counter("peer_ifindex").category, Cat::other);
}

TEST(CounterDictionary, RdmaPorts) {
  check_listing("rxe", {{"hw_counters/duplicate_request", {Cat::retransmit}},
                        {"hw_counters/out_of_seq_request", {Cat::retransmit}},
                        {"hw_counters/rcvd_seq_err", {Cat::retransmit}},
                        {"hw_counters/completer_retry_err", {Cat::retransmit}},
                        {"hw_counters/link_downed", {Cat::link_down}}});
  EXPECT_EQ(classify_counter("hw_counters/retry_exceeded_err").category, Cat::error);
  EXPECT_EQ(classify_counter("hw_counters/lifespan").category, Cat::other);
  // The rest of rxe's listing (drivers/infiniband/sw/rxe/rxe_hw_counters.c, as a 6.1 guest lists
  // it): traffic is never a symptom, RNR and send errors are errors, and ack_deferred (the
  // completer rescheduled its work) is reported raw.
  for (const char* n :
       {"hw_counters/sent_pkts", "hw_counters/rcvd_pkts", "hw_counters/rdma_sends", "hw_counters/rdma_recvs"}) {
    EXPECT_EQ(classify_counter(n).category, Cat::traffic) << n;
  }
  for (const char* n : {"hw_counters/rcvd_rnr_err", "hw_counters/send_rnr_err", "hw_counters/retry_rnr_exceeded_err",
                        "hw_counters/send_err"}) {
    EXPECT_EQ(classify_counter(n).category, Cat::error) << n;
  }
  EXPECT_EQ(classify_counter("hw_counters/ack_deferred").category, Cat::other);
  check_listing("mlx5_ib", {{"hw_counters/out_of_buffer", {Cat::discard}},
                            {"hw_counters/out_of_sequence", {Cat::retransmit}},
                            {"hw_counters/duplicate_request", {Cat::retransmit}},
                            {"hw_counters/packet_seq_err", {Cat::retransmit}},
                            {"hw_counters/implied_nak_seq_err", {Cat::retransmit}},
                            {"hw_counters/local_ack_timeout_err", {Cat::timeout}},
                            {"hw_counters/np_cnp_sent", {Cat::cnp}},
                            {"hw_counters/rp_cnp_handled", {Cat::cnp}},
                            {"hw_counters/rp_cnp_ignored", {Cat::cnp}},
                            {"hw_counters/np_ecn_marked_roce_packets", {Cat::ecn}},
                            {"hw_counters/roce_adp_retrans", {Cat::retransmit}},
                            {"hw_counters/roce_adp_retrans_to", {Cat::timeout}},
                            {"hw_counters/roce_slow_restart", {Cat::retransmit}},
                            {"hw_counters/rx_icrc_encapsulated", {Cat::crc}},
                            {"counters/symbol_error", {Cat::crc}},
                            {"counters/link_error_recovery", {Cat::link_down}},
                            {"counters/link_downed", {Cat::link_down}},
                            {"counters/port_rcv_errors", {Cat::crc}},
                            {"counters/port_rcv_remote_physical_errors", {Cat::crc}},
                            {"counters/port_xmit_discards", {Cat::discard}},
                            {"counters/port_xmit_constraint_errors", {Cat::discard}},
                            {"counters/port_rcv_constraint_errors", {Cat::discard}},
                            {"counters/excessive_buffer_overrun_errors", {Cat::discard}},
                            {"counters/VL15_dropped", {Cat::discard}},
                            {"counters/port_xmit_wait", {Cat::pause}}});
  EXPECT_EQ(classify_counter("hw_counters/np_cnp_sent").direction, "rx");  // the notification point
  EXPECT_EQ(classify_counter("counters/port_xmit_data").category, Cat::traffic);
}

TEST(CounterDictionary, HostCountersAndUnknowns) {
  EXPECT_EQ(classify_counter("Tcp.RetransSegs").category, Cat::retransmit);
  EXPECT_EQ(classify_counter("TcpExt.TCPLostRetransmit").category, Cat::retransmit);
  EXPECT_EQ(classify_counter("TcpExt.TCPTimeouts").category, Cat::timeout);
  EXPECT_EQ(classify_counter("IpExt.InCEPkts").category, Cat::ecn);
  EXPECT_EQ(classify_counter("TcpExt.TCPDeliveredCE").category, Cat::ecn);
  EXPECT_EQ(classify_counter("IpExt.InECT0Pkts").category, Cat::traffic);
  EXPECT_EQ(classify_counter("TcpExt.ListenDrops").category, Cat::discard);
  EXPECT_EQ(classify_counter("TcpExt.ListenOverflows").category, Cat::discard);
  EXPECT_EQ(classify_counter("softnet.dropped").category, Cat::discard);
  EXPECT_EQ(classify_counter("qdisc.drops").category, Cat::discard);
  EXPECT_EQ(classify_counter("if.rx_dropped").category, Cat::discard);
  EXPECT_EQ(classify_counter("if.carrier_down_count").category, Cat::link_down);
  EXPECT_EQ(classify_counter("some_vendor_thing").category, Cat::other);
  EXPECT_EQ(counter_label("some_vendor_thing"), "");
  for (const auto c : symptom_categories()) EXPECT_EQ(counter_category_from_string(to_string(c)), c);
}

TEST(HostCounters, ParsesCapturedProcFiles) {
  std::ifstream in(kData + "/hostproc/proc/net/netstat");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto mib = parse_proc_net_mib(ss.str());
  auto find = [](const CounterValues& v, const std::string& k) -> const std::uint64_t* {
    for (const auto& [n, x] : v) {
      if (n == k) return &x;
    }
    return nullptr;
  };
  ASSERT_NE(find(mib, "TcpExt.TCPTimeouts"), nullptr);
  ASSERT_NE(find(mib, "IpExt.InCEPkts"), nullptr);
  // The whole reader under a root prefix: only the chosen names, plus softnet.
  const auto host = read_host_net_counters(kData + "/hostproc");
  ASSERT_NE(find(host, "Tcp.RetransSegs"), nullptr);
  ASSERT_NE(find(host, "TcpExt.ListenDrops"), nullptr);
  ASSERT_NE(find(host, "softnet.dropped"), nullptr);
  EXPECT_EQ(find(host, "Tcp.MaxConn"), nullptr);  // -1 in the file; and not a chosen name
  EXPECT_EQ(find(host, "TcpExt.SyncookiesSent"), nullptr);
  EXPECT_TRUE(read_host_net_counters(kData + "/no-such-root").empty());
}

TEST(HostCounters, MibAndSoftnetParsers) {
  const auto mib = parse_proc_net_mib(
      "Tcp: RtoAlgorithm MaxConn RetransSegs\nTcp: 1 -1 42\nIpExt: InCEPkts Bogus\nIpExt: 7 x12\nUdp: A\nTcpExt: A\n");
  ASSERT_EQ(mib.size(), 3u);
  EXPECT_EQ(mib[0], (std::pair<std::string, std::uint64_t>{"Tcp.RtoAlgorithm", 1}));
  EXPECT_EQ(mib[1], (std::pair<std::string, std::uint64_t>{"Tcp.RetransSegs", 42}));
  EXPECT_EQ(mib[2], (std::pair<std::string, std::uint64_t>{"IpExt.InCEPkts", 7}));
  const auto sn = parse_softnet_stat("0000ff00 00000010 00000001 0\n00000001 0000000a 00000002 0\nshort\n");
  ASSERT_EQ(sn.size(), 2u);
  EXPECT_EQ(sn[0].second, 0x1aU);
  EXPECT_EQ(sn[1].second, 3U);
  EXPECT_TRUE(parse_softnet_stat("").empty());
}

TEST(EthtoolStats, LoopbackAndMissingInterfaces) {
  // Loopback has no driver statistics; a missing or overlong name is answered without a call.
  EXPECT_FALSE(read_ethtool_stats("lo").has_value());
  EXPECT_FALSE(read_ethtool_stats("fp-no-such-if").has_value());
  EXPECT_FALSE(read_ethtool_stats("a-name-longer-than-ifnamsiz").has_value());
  EXPECT_TRUE(read_qdisc_counters("fp-no-such-if").empty());
}

namespace {

// A 5-interval window on eth0 at 100 MB/s whose third interval (2-3 s) carries 30 MB; in that
// interval the qdisc dropped 1,234 packets and the host retransmitted 310 segments.
AgentResult dip_result() {
  AgentResult r;
  r.node_index = 0;
  LinkResult l;
  l.info.name = "eth0";
  std::uint64_t tx = 0, drops = 0, retrans = 1000;
  for (int i = 0; i <= 5; ++i) {
    if (i > 0) tx += i == 3 ? 30'000'000 : 100'000'000;
    if (i == 3) {
      drops += 1234;
      retrans += 310;
    }
    if (i == 5) retrans += 2;
    LinkSample s;
    s.t_ns = i * 1'000'000'000LL;
    s.counters.present = true;
    s.counters.tx_bytes = tx;
    s.counters.rx_bytes = tx / 50;
    l.samples.push_back(s);
    l.stats.push_back({s.t_ns + 1000, {{"peer_ifindex", 7}, {"rx_queue_0_xdp_packets", 0}, {"qdisc.drops", drops}}});
    r.host_counters.push_back({s.t_ns + 2000, {{"Tcp.RetransSegs", retrans}, {"TcpExt.TCPTimeouts", 0}}});
  }
  r.links.push_back(l);
  return r;
}

}  // namespace

TEST(Diagnosis, NamesTheCountersThatRoseInTheDip) {
  const CounterReport rep = counter_report(dip_result());
  ASSERT_EQ(rep.dips.size(), 1u);
  const Dip& d = rep.dips[0];
  EXPECT_EQ(d.subject, "eth0");
  EXPECT_DOUBLE_EQ(d.t0_s, 2.0);
  EXPECT_DOUBLE_EQ(d.t1_s, 3.0);
  EXPECT_NEAR(d.change_pct, -70.0, 1e-9);
  ASSERT_EQ(d.rose.size(), 2u);
  EXPECT_EQ(d.rose[0].name, "qdisc.drops");  // discard is listed before retransmit
  EXPECT_EQ(d.rose[0].delta, 1234u);
  EXPECT_EQ(d.rose[1].name, "Tcp.RetransSegs");
  EXPECT_EQ(d.rose[1].source, "host");
  EXPECT_EQ(d.text, "eth0 2.0-3.0 s: -70%; qdisc.drops +1,234 (discard); Tcp.RetransSegs +310 (retransmit)");
  // Over the window: sums per category, the sources' series with every changed counter.
  EXPECT_EQ(rep.total(Cat::discard), 1234u);
  EXPECT_EQ(rep.total(Cat::retransmit), 312u);
  EXPECT_EQ(rep.total(Cat::pause), 0u);
  ASSERT_EQ(rep.series.size(), 2u);
  EXPECT_EQ(rep.series[0].source, "eth0");
  EXPECT_EQ(rep.series[0].t_s.size(), 6u);
  ASSERT_EQ(rep.series[0].moved.size(), 1u);
  EXPECT_EQ(rep.series[0].moved[0].second, (std::vector<std::int64_t>{0, 0, 1234, 0, 0}));
  // Across nodes: the top movers carry the node's name.
  const auto movers = top_movers({{"n1", &rep}});
  ASSERT_FALSE(movers.empty());
  EXPECT_EQ(movers[0].category, Cat::discard);
  EXPECT_EQ(movers[0].top[0].source, "n1/eth0");
}

TEST(Diagnosis, SteadyLinkHasNoDipAndAThresholdChangesIt) {
  AgentResult r = dip_result();
  EXPECT_TRUE(counter_report(r, 80.0).dips.empty());  // -70% is not more than 80% below
  // Every interval equal: nothing to report.
  std::uint64_t tx = 0;
  for (std::size_t i = 0; i < r.links[0].samples.size(); ++i) {
    r.links[0].samples[i].counters.tx_bytes = tx;
    tx += 50'000'000;
  }
  EXPECT_TRUE(counter_report(r).dips.empty());
}

TEST(Diagnosis, ADipWithoutCountersSaysSo) {
  AgentResult r = dip_result();
  r.host_counters.clear();
  r.links[0].stats.clear();
  const auto rep = counter_report(r);
  ASSERT_EQ(rep.dips.size(), 1u);
  EXPECT_EQ(rep.dips[0].text, "eth0 2.0-3.0 s: -70%; no counter on this node rose (look at the peer and the switch)");
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(12400), "12,400");
  EXPECT_EQ(format_count(1234567), "1,234,567");
}

TEST(Diagnosis, ResultWireEncodingKeepsEverySample) {
  const AgentResult r = dip_result();
  const nlohmann::json j = to_json(r);
  // Delta-encoded: the second sample of eth0 lists nothing (no counter changed).
  EXPECT_EQ(j["links"][0]["stats"][0]["values"].size(), 3u);
  EXPECT_TRUE(j["links"][0]["stats"][1]["values"].empty());
  const AgentResult back = parse_agent_result(j);
  ASSERT_EQ(back.links[0].stats.size(), r.links[0].stats.size());
  for (std::size_t i = 0; i < r.links[0].stats.size(); ++i) {
    auto a = r.links[0].stats[i].values, b = back.links[0].stats[i].values;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b) << i;
  }
  ASSERT_EQ(back.host_counters.size(), r.host_counters.size());
  EXPECT_EQ(back.host_counters.back().values, r.host_counters.back().values);
  nlohmann::json bad = j;
  bad["host_counters"][1]["values"]["Tcp.RetransSegs"] = -1;
  EXPECT_THROW(parse_agent_result(bad), ProtocolError);
}

TEST(Diagnosis, CounterKpisReadTheNodeSums) {
  using namespace fabperf::plan;
  nlohmann::json node = {
      {"index", 0},
      {"node", "h:1"},
      {"role", "client"},
      {"tx_mb_per_s", 10.0},
      {"counters",
       {{"categories", {{"pause", 12}, {"discard", 0}, {"fec_uncorrected", 0}, {"ecn", 3}}},
        {"movers",
         nlohmann::json::array(
             {{{"category", "pause"},
               {"total", 12},
               {"top", nlohmann::json::array({{{"source", "eth0"}, {"name", "rx_prio3_pause"}, {"delta", 12}}})}}})}}}};
  nlohmann::json old = {{"index", 1}, {"node", "h:2"}, {"role", "server"}};
  StepOutcome s{"t/0", "t",
                testutil::step_result(
                    {{"settings", {{"test", "write"}}}, {"nodes", {node, old}}, {"pairs", nlohmann::json::array()}})};
  KpiSet k;
  set_kpi(k, "max-pause-frames", 0);
  set_kpi(k, "max-discards", 0);
  set_kpi(k, "max-ecn-marks", 5);
  set_kpi(k, "max-fec-uncorrected", 0);
  const auto checks = evaluate_kpis(k, {s}, {{"h:1", "a"}, {"h:2", "b"}}, std::string("t"));
  std::map<std::string, const KpiCheck*> by;
  for (const auto& c : checks) by[c.kpi + " " + c.subject] = &c;
  ASSERT_TRUE(by.count("max-pause-frames a"));
  EXPECT_FALSE(by["max-pause-frames a"]->pass);
  EXPECT_EQ(*by["max-pause-frames a"]->value, 12.0);
  EXPECT_NE(by["max-pause-frames a"]->detail.find("eth0 rx_prio3_pause +12"), std::string::npos)
      << by["max-pause-frames a"]->detail;
  EXPECT_TRUE(by["max-discards a"]->pass);
  EXPECT_TRUE(by["max-ecn-marks a"]->pass);
  EXPECT_TRUE(by["max-fec-uncorrected a"]->pass);
  // A node whose result has no counters cannot pass: it was not measured.
  ASSERT_TRUE(by.count("max-discards b"));
  EXPECT_FALSE(by["max-discards b"]->pass);
  EXPECT_FALSE(by["max-discards b"]->value.has_value());
}

// A counter is found at its own position, elsewhere by name when the order differs, or not at all.
TEST(CounterValues, FindCounterByPositionThenByName) {
  const CounterValues v{{"a", 1}, {"b", 2}, {"c", 3}};
  EXPECT_EQ(find_counter(v, 1, "b"), &v[1]);
  EXPECT_EQ(find_counter(v, 0, "c"), &v[2]);
  EXPECT_EQ(find_counter(v, 7, "a"), &v[0]);
  EXPECT_EQ(find_counter(v, 1, "d"), nullptr);
}

TEST(CounterValues, EachPairMatchesByNameWhereTheOrderDiffers) {
  const CounterValues a{{"x", 1}, {"y", 2}, {"z", 3}};
  const CounterValues b{{"x", 10}, {"z", 30}, {"new", 5}, {"y", 20}};
  std::vector<std::string> seen;
  each_counter_pair(a, b, [&](const std::string& k, std::uint64_t before, std::uint64_t after) {
    seen.push_back(k + ":" + std::to_string(before) + "->" + std::to_string(after));
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"x:1->10", "z:3->30", "y:2->20"}));
}
