#include <fabperf/report/compare.hpp>
#include <fabperf/report/report.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/unit_helpers.hpp"
#include "report/result_json.hpp"

using namespace fabperf;
using namespace fabperf::testutil;

namespace {

BondInfo bond(const std::string& mode, const std::string& policy) {
  BondInfo b;
  b.name = "bond0";
  b.mode = mode;
  b.hash_policy = policy;
  b.mtu = 1500;
  b.mac = "02:00:00:00:00:01";
  b.active_aggregator = mode == "802.3ad" ? 1 : -1;
  b.partner_mac = mode == "802.3ad" ? "02:00:00:00:00:02" : "";
  for (const char* n : {"m0", "m1"}) {
    BondMember m;
    m.name = n;
    m.mii_status = "up";
    m.speed_mbps = 10000;
    m.duplex = "full";
    m.mtu = 1500;
    m.aggregator_id = b.active_aggregator;
    b.members.push_back(m);
  }
  return b;
}

// A member's counters: bytes per second for 4 one-second intervals.
LinkResult member(const std::string& name, std::vector<std::uint64_t> tx_per_s, std::uint64_t rx_per_s) {
  LinkResult l;
  l.info.name = name;
  l.info.kind = "veth";
  l.info.master = "bond0";
  std::uint64_t tx = 0, rx = 0;
  l.samples.push_back({0, {true, 0, 0, 0, 0, 0, 0, 0, 0}});
  for (std::size_t i = 0; i < tx_per_s.size(); ++i) {
    tx += tx_per_s[i];
    rx += rx_per_s;
    l.samples.push_back({static_cast<std::int64_t>(i + 1) * 1'000'000'000, {true, tx, rx, 0, 0, 0, 0, 0, 0}});
  }
  return l;
}

FlowResult flow(int sport, std::uint64_t tx) {
  FlowResult f;
  f.op = FlowOp::write;
  f.local = "198.18.0.1:" + std::to_string(sport);
  f.remote = "198.18.0.2:5001";
  f.iface = "bond0";
  f.tx_bytes_window = f.tx_delivered_window = tx;
  return f;
}

}  // namespace

TEST(BondReport, JainIndex) {
  EXPECT_DOUBLE_EQ(jain_index({1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(jain_index({1, 0}), 0.5);
  EXPECT_DOUBLE_EQ(jain_index({3, 1}), 16.0 / 20.0);
  EXPECT_DOUBLE_EQ(jain_index({}), 0.0);
  EXPECT_DOUBLE_EQ(jain_index({0, 0}), 0.0);
}

// 198.18.0.1 -> 198.18.0.2:5001: ports 40000/40001 hash to member 0, 40002/40003 to member 1.
TEST(BondReport, LacpEvenSplitAgreesWithTheHash) {
  AgentResult a;
  a.window_s = 4;
  for (int p : {40000, 40001, 40002, 40003}) a.flows.push_back(flow(p, 50'000'000));
  a.links = {member("m0", {26'000'000, 26'000'000, 26'000'000, 26'000'000}, 100'000),
             member("m1", {26'000'000, 26'000'000, 26'000'000, 26'000'000}, 100'000)};
  BondResult b{bond("802.3ad", "layer3+4"), bond("802.3ad", "layer3+4"), {}};
  std::vector<std::string> findings;
  const BondReport r = bond_report(b, a, "n1", findings);
  ASSERT_EQ(r.members.size(), 2u);
  EXPECT_NEAR(r.members[0].tx_share_pct, 50, 1e-9);
  EXPECT_NEAR(r.members[0].tx_mb_per_s, 26, 1e-9);
  EXPECT_EQ(r.members[0].predicted_flows, 2);
  EXPECT_EQ(r.members[1].predicted_flows, 2);
  EXPECT_NEAR(r.tx_jain, 1.0, 1e-9);
  EXPECT_NEAR(r.tx_members_used, 2.0, 1e-9);
  EXPECT_NEAR(r.tx_max_min, 1.0, 1e-9);
  EXPECT_NEAR(r.tx_mb_per_s, 52, 1e-9);
  EXPECT_NEAR(r.capacity_used_pct, 100.0 * 52 * 8 / 20000, 1e-9);
  EXPECT_EQ(r.prediction, "agrees");
  ASSERT_EQ(r.flows.size(), 4u);
  EXPECT_EQ(r.flows[0].member, "m0");
  EXPECT_EQ(r.flows[2].member, "m1");
  EXPECT_TRUE(has(r.notes, "4 flows -> 2/2 split over m0/m1 (predicted), 2.0 of 2 links used"))
      << ::testing::PrintToString(r.notes);
  EXPECT_TRUE(findings.empty()) << ::testing::PrintToString(findings);
}

TEST(BondReport, PredictionMismatchIsAFinding) {
  AgentResult a;
  a.window_s = 4;
  for (int p : {40000, 40001, 40002, 40003}) a.flows.push_back(flow(p, 50'000'000));
  // Everything left on m0 although the hash says half goes to m1.
  a.links = {member("m0", {50'000'000, 50'000'000, 50'000'000, 50'000'000}, 0), member("m1", {0, 0, 0, 0}, 0)};
  BondResult b{bond("802.3ad", "layer3+4"), bond("802.3ad", "layer3+4"), {}};
  std::vector<std::string> findings;
  const BondReport r = bond_report(b, a, "n1", findings);
  EXPECT_EQ(r.prediction, "differs");
  EXPECT_TRUE(has(findings, "differ from the kernel hash's prediction by up to 50 points"));
  EXPECT_NEAR(r.tx_jain, 0.5, 1e-9);
  EXPECT_EQ(r.tx_max_min, 0.0);  // a member carried nothing
  EXPECT_TRUE(has(r.notes, "transmit side on one member (m0 100%)"));
}

TEST(BondReport, AlbOnePeerSaysWhy) {
  AgentResult a;
  a.window_s = 4;
  a.flows.push_back(flow(50000, 100'000'000));
  a.links = {member("m0", {25'000'000, 25'000'000, 25'000'000, 25'000'000}, 2'000'000),
             member("m1", {1000, 1000, 1000, 1000}, 0)};
  BondResult b{bond("balance-alb", ""), bond("balance-alb", ""), {}};
  std::vector<std::string> findings;
  const BondReport r = bond_report(b, a, "n1", findings);
  EXPECT_EQ(r.peers, 1);
  EXPECT_TRUE(r.prediction.rfind("none: balance-alb does not pick members by hash", 0) == 0) << r.prediction;
  EXPECT_TRUE(has(r.notes,
                  "balance-alb sends to each peer address through one member at a time, and this test has 1 peer "
                  "address(es)"))
      << ::testing::PrintToString(r.notes);
  EXPECT_TRUE(has(r.notes, "receive side on one member (m0 100%): balance-alb answers each peer's ARP"))
      << ::testing::PrintToString(r.notes);
}

// balance-alb with tlb_dynamic_lb=1 moves a lone peer's transmit entry by load every 10 s: a split
// of one peer's traffic over two members is that move, and the note says so.
TEST(BondReport, AlbOnePeerSplitIsTheRebalance) {
  AgentResult a;
  a.window_s = 4;
  a.flows.push_back(flow(50000, 100'000'000));
  a.links = {member("m0", {5'000'000, 5'000'000, 25'000'000, 25'000'000}, 2'000'000),
             member("m1", {20'000'000, 20'000'000, 1000, 1000}, 0)};
  BondInfo info = bond("balance-alb", "");
  info.tlb_dynamic_lb = 1;
  BondResult b{info, info, {}};
  std::vector<std::string> findings;
  const BondReport r = bond_report(b, a, "n1", findings);
  EXPECT_TRUE(has(r.notes,
                  "re-places each peer address's transmit member by load every 10 s (tlb_dynamic_lb=1); "
                  "with 1 peer address(es) the traffic moved"))
      << ::testing::PrintToString(r.notes);
  info.tlb_dynamic_lb = 0;  // hashed placement never moves: no such note
  BondResult b0{info, info, {}};
  const BondReport r0 = bond_report(b0, a, "n1", findings);
  EXPECT_FALSE(has(r0.notes, "re-places")) << ::testing::PrintToString(r0.notes);
}

TEST(BondReport, MemberFailureIsReported) {
  AgentResult a;
  a.window_s = 4;
  a.flows.push_back(flow(40000, 100'000'000));
  a.links = {member("m0", {25'000'000, 25'000'000, 25'000'000, 25'000'000}, 0),
             member("m1", {25'000'000, 25'000'000, 0, 0}, 0)};
  BondResult b{bond("802.3ad", "layer3+4"), bond("802.3ad", "layer3+4"), {}};
  b.at_close.members[1].mii_status = "down";
  b.at_close.members[1].link_failures = 1;
  std::vector<std::string> findings;
  const BondReport r = bond_report(b, a, "n1", findings);
  EXPECT_EQ(r.members[1].link_failures, 1u);
  EXPECT_EQ(r.members[1].state_close, "down");
  EXPECT_NEAR(r.members[1].first_tx_mb_per_s, 25, 1e-9);
  EXPECT_NEAR(r.members[1].last_tx_mb_per_s, 0, 1e-9);
  EXPECT_TRUE(has(findings,
                  "member m1 changed during the test: up -> down, 1 new link failure(s); its traffic went 25.0 -> 0.0"))
      << ::testing::PrintToString(findings);
}

TEST(BondReport, RenderedAndCompared) {
  AgentResult a;
  a.window_s = 4;
  for (int p : {40000, 40002}) a.flows.push_back(flow(p, 50'000'000));
  a.links = {member("m0", {25'000'000, 25'000'000, 25'000'000, 25'000'000}, 0),
             member("m1", {25'000'000, 25'000'000, 25'000'000, 25'000'000}, 0)};
  std::vector<std::string> findings;
  Report rep;
  NodeReport n;
  n.name = "n1:6668";
  n.bonds.push_back(
      bond_report(BondResult{bond("802.3ad", "layer3+4"), bond("802.3ad", "layer3+4"), {}}, a, n.name, findings));
  rep.nodes.push_back(n);
  const std::string text = render_bonds_text(rep);
  EXPECT_NE(text.find("Bond bond0 on n1:6668: 802.3ad layer3+4"), std::string::npos) << text;
  EXPECT_NE(text.find("198.18.0.1:40002 -> 198.18.0.2:5001: m1"), std::string::npos) << text;
  const nlohmann::json before = {{"nodes", {{{"node", "n1:6668"}, {"bonds", doc_json(rep.nodes[0].bonds)}}}}};
  // After: balance-alb with everything on one member at half the rate.
  AgentResult b2 = a;
  b2.links = {member("m0", {25'000'000, 25'000'000, 25'000'000, 25'000'000}, 0), member("m1", {0, 0, 0, 0}, 0)};
  const auto alb = bond_report(BondResult{bond("balance-alb", ""), bond("balance-alb", ""), {}}, b2, n.name, findings);
  const nlohmann::json after = {{"nodes", {{{"node", "n1:6668"}, {"bonds", doc_json(std::vector{alb})}}}}};
  const auto deltas =
      compare_bonds(read_result_doc(before, ReadMode::lenient), read_result_doc(after, ReadMode::lenient));
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_EQ(deltas[0].before.mode, "802.3ad");
  EXPECT_EQ(deltas[0].after.mode, "balance-alb");
  EXPECT_NE(deltas[0].verdict.find("before (802.3ad) moved 100% more through the bond"), std::string::npos)
      << deltas[0].verdict;
  EXPECT_NE(deltas[0].verdict.find("before (802.3ad) spread it better"), std::string::npos) << deltas[0].verdict;
  Comparison c;
  c.bonds = deltas;
  EXPECT_NE(render_comparison_text(c).find("50/50 % per member, 2.0 of 2 links used"), std::string::npos)
      << render_comparison_text(c);
}
