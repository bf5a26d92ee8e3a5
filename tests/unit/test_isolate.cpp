#include <fabperf/plan/isolate.hpp>

#include <gtest/gtest.h>

#include "common/step_result.hpp"

#include <cmath>
#include <set>

using namespace fabperf::plan;
using nlohmann::json;

namespace {

std::vector<std::string> names(std::size_t n) {
  std::vector<std::string> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back("n" + std::to_string(i + 1));
  return v;
}

// A fabric where a pair runs at 100 MB/s unless one end is slow (30 MB/s): runs an Isolator to
// the end and returns it.
Isolator simulate(std::size_t n, const std::set<std::uint32_t>& bad, std::vector<std::uint32_t> suspects,
                  std::vector<std::uint32_t> good, std::size_t max_rounds) {
  Isolator iso(std::move(suspects), std::move(good), names(n), max_rounds);
  while (auto r = iso.next_round()) {
    std::vector<std::vector<std::optional<double>>> rates;
    std::map<std::uint32_t, std::string> links;
    for (const auto& st : r->steps) {
      std::set<std::uint32_t> busy;
      std::vector<std::optional<double>> v;
      for (const auto& p : st.pairs) {
        v.push_back(bad.count(p.client) || bad.count(p.server) ? 30.0 : 100.0);
        links[p.client] = "eth0";
        links[p.server] = "eth0";
      }
      rates.push_back(v);
      // Every step's pairs are disjoint per direction: no node sends twice or receives twice.
      std::set<std::uint32_t> senders, receivers;
      for (const auto& p : st.pairs) {
        EXPECT_TRUE(senders.insert(p.client).second);
        EXPECT_TRUE(receivers.insert(p.server).second);
        EXPECT_NE(p.client, p.server);
      }
    }
    iso.record(rates, links);
  }
  return iso;
}

}  // namespace

TEST(Isolate, RoundBound) {
  EXPECT_EQ(isolation_round_bound(1), 1u);
  EXPECT_EQ(isolation_round_bound(2), 2u);
  EXPECT_EQ(isolation_round_bound(8), 4u);
  EXPECT_EQ(isolation_round_bound(9), 5u);
}

TEST(Isolate, LoneSuspectIsConfirmedAgainstFourPeers) {
  const auto iso = simulate(8, {6}, {6}, {0, 1, 2, 3, 4, 5, 7}, 5);
  ASSERT_EQ(iso.findings().size(), 1u);
  const auto& f = iso.findings()[0];
  EXPECT_TRUE(f.slow);
  EXPECT_EQ(f.node, "n7");
  EXPECT_EQ(f.peers, 4u);
  EXPECT_DOUBLE_EQ(f.mb_per_s, 30);
  EXPECT_DOUBLE_EQ(f.peers_median_mb_per_s, 100);
  EXPECT_EQ(f.text.rfind("n7 eth0: 30 MB/s against 4 good peers, whose median is 100", 0), 0u) << f.text;
  EXPECT_EQ(iso.rounds(), 1u);
}

// One bad node hidden among many suspects is named within ceil(log2 S) halvings + 1 confirmation,
// and every other suspect is cleared.
TEST(Isolate, HalvingFindsOneBadNodeWithinTheBound) {
  for (std::size_t n : {8u, 16u, 33u, 64u}) {
    for (std::size_t s : {2u, 3u, 5u, 8u}) {
      if (s + 3 > n) continue;
      for (std::uint32_t which = 0; which < s; ++which) {
        std::vector<std::uint32_t> suspects, good;
        for (std::uint32_t i = 0; i < n; ++i) (i < s ? suspects : good).push_back(i);
        const auto iso = simulate(n, {which}, suspects, good, 20);
        std::vector<std::string> slow;
        for (const auto& f : iso.findings()) {
          if (f.slow) slow.push_back(f.node);
        }
        ASSERT_EQ(slow, std::vector<std::string>{"n" + std::to_string(which + 1)}) << n << " " << s << " " << which;
        // The bad node is found by the bound; suspects deferred past it may add rounds.
        std::size_t found_at = 0;
        for (std::size_t i = 0; i < iso.trace().size(); ++i) {
          if (iso.trace()[i].find("SLOW") != std::string::npos && iso.trace()[i].find("confirm") != std::string::npos)
            found_at = i + 1;
        }
        EXPECT_GT(found_at, 0u);
        EXPECT_LE(found_at, isolation_round_bound(s) + 1) << n << " " << s << " " << which;  // +1: a "back to" line
      }
    }
  }
}

TEST(Isolate, TwoBadNodesAreBothNamed) {
  const auto iso = simulate(16, {2, 5}, {0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 20);
  std::set<std::string> slow;
  for (const auto& f : iso.findings()) {
    if (f.slow) slow.insert(f.node);
  }
  EXPECT_EQ(slow, (std::set<std::string>{"n3", "n6"}));
}

TEST(Isolate, RefusesWithoutEnoughGoodNodes) {
  Isolator iso({0}, {1, 2}, names(3), 5);
  EXPECT_FALSE(iso.next_round());
  EXPECT_NE(iso.trace().back().find("needs 3"), std::string::npos);
}

TEST(Isolate, SuspectsFromAnAllToAllStep) {
  // 5 nodes, all-to-all writes: n4 sends and receives at a third of the others.
  json nodes = json::array();
  for (int i = 0; i < 5; ++i) {
    const double v = i == 3 ? 33 : 100 + i;
    nodes.push_back({{"node", "10.0.0." + std::to_string(i + 1) + ":6668"},
                     {"role", "server+client"},
                     {"tx_mb_per_s", v},
                     {"rx_mb_per_s", v}});
  }
  std::map<std::string, std::uint32_t> idx;
  for (std::uint32_t i = 0; i < 5; ++i) idx["10.0.0." + std::to_string(i + 1) + ":6668"] = i;
  const auto s = find_suspects({{"a2a/0", "a2a", fabperf::testutil::step_result(json{{"nodes", nodes}})}}, idx,
                               names(5), "write", {});
  EXPECT_EQ(s.suspects, (std::vector<std::uint32_t>{3}));
  EXPECT_EQ(s.good, (std::vector<std::uint32_t>{4, 2, 1, 0}));
  EXPECT_NEAR(s.spread, 33.0 / 104, 1e-9);
  // A failing pair KPI names both of its ends, but a node at the median is not suspected for it
  // (all-pairs judged by a pair KPI named every node, and isolation had no known-good peer).
  fabperf::KpiCheck c;
  c.scope = "pair";
  c.subject = "n1->n2";
  c.pass = false;
  auto t = find_suspects({{"a2a/0", "a2a", fabperf::testutil::step_result(json{{"nodes", nodes}})}}, idx, names(5),
                         "write", {c});
  EXPECT_EQ(t.suspects, (std::vector<std::uint32_t>{3}));
  EXPECT_EQ(t.good, (std::vector<std::uint32_t>{4, 2, 1, 0}));
  // Between 0.8 and 0.9 of the median, the KPI's word makes a suspect.
  nodes[0]["tx_mb_per_s"] = nodes[0]["rx_mb_per_s"] = 87;
  t = find_suspects({{"a2a/0", "a2a", fabperf::testutil::step_result(json{{"nodes", nodes}})}}, idx, names(5), "write",
                    {c});
  EXPECT_EQ(t.suspects, (std::vector<std::uint32_t>{3, 0}));
}

TEST(Isolate, OnlyCompleteStepsMakeANodeGood) {
  // Step 1 complete: n1..n4 at 100, n5 at 30. Step 2 lost n2 mid-test: n2 shows 0 and the step
  // proves nothing; n2 keeps its step-1 figure, and a node seen only in the lost step is neither
  // good nor a suspect.
  const auto node = [](int i, double v) {
    return json{{"node", "10.0.0." + std::to_string(i) + ":6668"},
                {"role", "server+client"},
                {"tx_mb_per_s", v},
                {"rx_mb_per_s", v}};
  };
  json ok = json::array(), lost = json::array();
  for (int i = 1; i <= 5; ++i) ok.push_back(node(i, i == 5 ? 30 : 100));
  lost.push_back(node(2, 0));
  lost.push_back(node(6, 0));
  std::map<std::string, std::uint32_t> idx;
  for (std::uint32_t i = 0; i < 6; ++i) idx["10.0.0." + std::to_string(i + 1) + ":6668"] = i;
  const auto s =
      find_suspects({{"t/0", "t", fabperf::testutil::step_result(json{{"nodes", ok}, {"complete", true}})},
                     {"t/1", "t", fabperf::testutil::step_result(json{{"nodes", lost}, {"complete", false}})}},
                    idx, names(6), "write", {});
  EXPECT_EQ(s.suspects, (std::vector<std::uint32_t>{4}));
  EXPECT_EQ(s.good, (std::vector<std::uint32_t>{0, 1, 2, 3}));
  const std::string trace = [&] {
    std::string t;
    for (const auto& l : s.trace) t += l + "\n";
    return t;
  }();
  EXPECT_NE(trace.find("step t/1 left out: incomplete"), std::string::npos) << trace;
  EXPECT_NE(trace.find("not measured in a complete step: n6"), std::string::npos) << trace;
}

TEST(Isolate, AnIncastTargetIsMeasuredButNotJudged) {
  // An incast: three clients into one target. The target was measured (a complete step) but no
  // median of one server judges it: "not judged", never "not measured".
  json nodes = json::array();
  for (int i = 1; i <= 4; ++i) {
    nodes.push_back({{"node", "10.0.0." + std::to_string(i) + ":6668"},
                     {"role", i == 1 ? "server" : "client"},
                     {"tx_mb_per_s", i == 1 ? 0.0 : 30.0},
                     {"rx_mb_per_s", i == 1 ? 90.0 : 0.0}});
  }
  std::map<std::string, std::uint32_t> idx;
  for (std::uint32_t i = 0; i < 4; ++i) idx["10.0.0." + std::to_string(i + 1) + ":6668"] = i;
  const auto s =
      find_suspects({{"i/0", "i", fabperf::testutil::step_result(json{{"nodes", nodes}, {"complete", true}})}}, idx,
                    names(4), "write", {});
  std::string trace;
  for (const auto& l : s.trace) trace += l + "\n";
  EXPECT_EQ(trace.find("not measured"), std::string::npos) << trace;
  EXPECT_NE(trace.find("not judged (a role fewer than 3 nodes played, e.g. an incast's target): n1"), std::string::npos)
      << trace;
}
