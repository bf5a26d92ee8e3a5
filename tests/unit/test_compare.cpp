#include <fabperf/core/error.hpp>
#include <fabperf/report/compare.hpp>
#include <fabperf/report/report.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace fabperf;
using nlohmann::json;

namespace {
// A minimal result document with per-link payload rates and steady interval samples.
json result(const std::vector<std::pair<std::string, double>>& links, std::int64_t speed, int version = 1) {
  json node_links = json::array();
  double total = 0;
  for (const auto& [name, mb] : links) {
    json iv = json::array();
    for (int i = 0; i < 8; ++i)
      iv.push_back({{"t_s", i + 1}, {"tx_mb_per_s", mb * (i % 2 ? 1.005 : 0.995)}, {"rx_mb_per_s", 0}});
    node_links.push_back({{"link", name},
                          {"kind", "veth"},
                          {"speed_mbps", speed},
                          {"payload_tx_mb_per_s", mb},
                          {"payload_rx_mb_per_s", 0.0},
                          {"intervals", iv}});
    total += mb;
  }
  return {{"schema", "fabperf.result"},
          {"schema_version", version},
          {"settings", {{"test", "write"}, {"mode", "stream"}}},
          {"aggregate", {{"mb_per_s", total}}},
          {"nodes",
           {{{"index", 0}, {"node", "h2:6668"}, {"tx_mb_per_s", 0.0}, {"rx_mb_per_s", total}, {"links", json::array()}},
            {{"index", 1}, {"node", "h1:6668"}, {"tx_mb_per_s", total}, {"rx_mb_per_s", 0.0}, {"links", node_links}}}},
          {"pairs", {{{"client", 1}, {"server", 0}, {"mb_per_s", total}}}}};
}
// Two saved results compared as `fabperf compare` reads them: each checked, then decoded.
Comparison compare_results(const json& b, const json& a, const std::string& bf, const std::string& af,
                           const LinkExpectations& expect) {
  check_result_schema(b, bf);
  check_result_schema(a, af);
  return fabperf::compare_results(read_result_doc(b, ReadMode::lenient, "compare: " + bf),
                                  read_result_doc(a, ReadMode::lenient, "compare: " + af), bf, af, expect);
}
}  // namespace

TEST(Compare, SpeedChangePredictsGainAndEveryLinkMeetsIt) {
  const auto c = compare_results(result({{"eth0", 4900}, {"eth1", 4900}}, 40000),
                                 result({{"eth0", 6850}, {"eth1", 6870}}, 56000), "b.json", "a.json", {});
  ASSERT_EQ(c.links.size(), 2u);
  for (const auto& l : c.links) {
    ASSERT_TRUE(l.expected_pct.has_value());
    EXPECT_NEAR(*l.expected_pct, 40.0, 1e-9);
    EXPECT_NEAR(l.change_pct, 100.0 * (l.after_mb_per_s / l.before_mb_per_s - 1), 1e-9);
    EXPECT_EQ(l.verdict, LinkVerdict::as_expected) << l.link;
    EXPECT_FALSE(l.fails);
  }
  EXPECT_FALSE(c.failed);
  EXPECT_NEAR(c.aggregate.change_pct, 40.0, 0.5);
  EXPECT_NE(render_comparison_text(c).find("improved as expected"), std::string::npos);
}

TEST(Compare, OneLinkLeftBehindIsNamedAndFails) {
  LinkExpectations o;
  o.gain_pct = 40;
  const auto c = compare_results(result({{"eth0", 49}, {"eth1", 49}}, 10000),
                                 result({{"eth0", 68.6}, {"eth1", 49.2}}, 10000), "b", "a", o);
  ASSERT_EQ(c.links.size(), 2u);
  EXPECT_EQ(c.links[0].verdict, LinkVerdict::as_expected);
  EXPECT_EQ(c.links[1].link, "eth1");
  EXPECT_EQ(c.links[1].verdict, LinkVerdict::no_change);
  EXPECT_TRUE(c.links[1].fails);
  EXPECT_TRUE(c.failed);
  const auto j = render_comparison_json(c);
  EXPECT_EQ(j["links"][1]["verdict"], "no change");
  EXPECT_TRUE(j["failed"].get<bool>());
}

TEST(Compare, RegressionAndShortfallVerdicts) {
  const auto c = compare_results(result({{"eth0", 100}, {"eth1", 100}}, 40000),
                                 result({{"eth0", 80}, {"eth1", 115}}, 56000), "b", "a", {});
  EXPECT_EQ(c.links[0].verdict, LinkVerdict::regressed);
  EXPECT_TRUE(c.links[0].fails);
  EXPECT_EQ(c.links[1].verdict, LinkVerdict::less_than_expected);
  // Without --expect-gain, falling short of the speed's prediction is reported but only a
  // regression fails.
  EXPECT_FALSE(c.links[1].fails);
  EXPECT_TRUE(c.failed);
}

TEST(Compare, BadInputsAreUsageErrorsNamingTheFile) {
  const auto ok = result({{"eth0", 1}}, 1000);
  // A version this fabperf does not read is refused naming the file; an older one it reads
  // compares, with a note saying the two count differently (version 1: the sender's count).
  EXPECT_THROW(compare_results(ok, result({{"eth0", 1}}, 1000, kResultSchemaVersion + 1), "b.json", "a.json", {}),
               UsageError);
  try {
    compare_results(ok, result({{"eth0", 1}}, 1000, kResultSchemaVersion + 1), "b.json", "a.json", {});
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("a.json: schema_version 3"), std::string::npos) << e.what();
  }
  const auto mixed = compare_results(ok, result({{"eth0", 1}}, 1000, 2), "b.json", "a.json", {});
  ASSERT_FALSE(mixed.notes.empty());
  EXPECT_NE(mixed.notes.back().find("version 1 counted what senders wrote"), std::string::npos) << mixed.notes.back();
  json other = ok;
  other["nodes"][0]["node"] = "x:1";
  other["nodes"][1]["node"] = "y:1";
  EXPECT_THROW(compare_results(ok, other, "b", "a", {}), UsageError);
  EXPECT_THROW(compare_results(json{{"schema", "something"}}, ok, "b", "a", {}), UsageError);
  json missing = ok;
  missing.erase("pairs");
  EXPECT_THROW(compare_results(ok, missing, "b", "a", {}), UsageError);
}

namespace {
// result() with one link's speed set apart: a single switch port re-speeded.
json with_speed(json r, const std::string& link, std::int64_t speed) {
  for (auto& l : r["nodes"][1]["links"]) {
    if (l["link"] == link) l["speed_mbps"] = speed;
  }
  return r;
}
const LinkDelta& link_delta(const Comparison& c, const std::string& link) {
  for (const auto& d : c.links) {
    if (d.link == link) return d;
  }
  throw std::runtime_error("no link " + link);
}
}  // namespace

// Issue 31: a one-port change (eth0 1 -> 2.5 Gbit/s). --expect-gain applies to every link and
// fails the untouched one; without it an un-upgraded port passed. Per-link expectations, stated
// or derived from the speeds, judge each link by what it should have done.
TEST(Compare, PerLinkExpectationsJudgeAOnePortChange) {
  const json before = result({{"eth0", 100}, {"eth1", 100}}, 1000);
  const json upgraded = with_speed(result({{"eth0", 250}, {"eth1", 100}}, 1000), "eth0", 2500);
  LinkExpectations speeds;
  speeds.rest = LinkExpectations::Rest::speeds;
  auto c = compare_results(before, upgraded, "b", "a", speeds);
  EXPECT_FALSE(c.failed);
  EXPECT_EQ(link_delta(c, "eth0").verdict, LinkVerdict::as_expected);
  EXPECT_EQ(link_delta(c, "eth0").expectation, "speed 1000 -> 2500 Mb/s");
  EXPECT_EQ(link_delta(c, "eth1").expectation, "speed 1000 -> 1000 Mb/s");
  EXPECT_FALSE(link_delta(c, "eth1").fails);
  // The port was re-speeded but its traffic did not move: FAIL, naming it.
  const json stuck = with_speed(result({{"eth0", 100}, {"eth1", 100}}, 1000), "eth0", 2500);
  c = compare_results(before, stuck, "b", "a", speeds);
  EXPECT_TRUE(c.failed);
  EXPECT_TRUE(link_delta(c, "eth0").fails);
  EXPECT_FALSE(link_delta(c, "eth1").fails);
  const std::string t = render_comparison_text(c);
  EXPECT_NE(t.find("h1:6668 eth0: expected +150.0% (speed 1000 -> 2500 Mb/s)"), std::string::npos) << t;
  // Stated: eth0 +150%, the rest unchanged; an untouched port that moved fails too.
  const auto stated = parse_expectations({"h1/eth0=+150%"}, "unchanged", "");  // the host alone names it too
  EXPECT_FALSE(compare_results(before, upgraded, "b", "a", stated).failed);
  const json both = result({{"eth0", 250}, {"eth1", 250}}, 1000);
  c = compare_results(before, both, "b", "a", stated);
  EXPECT_FALSE(link_delta(c, "eth0").fails);
  EXPECT_TRUE(link_delta(c, "eth1").fails);
  EXPECT_EQ(link_delta(c, "eth1").expectation, "--expect-rest unchanged");
  // --expect-gain keeps its meaning: every link, so the untouched one fails.
  LinkExpectations gain;
  gain.gain_pct = 150;
  EXPECT_TRUE(link_delta(compare_results(before, upgraded, "b", "a", gain), "eth1").fails);
  // A link that appears only after the change is a FAIL row as much as one that vanished.
  c = compare_results(before, result({{"eth0", 100}, {"eth1", 100}, {"eth2", 100}}, 1000), "b", "a", {});
  EXPECT_TRUE(link_delta(c, "eth2").fails);
  EXPECT_EQ(link_delta(c, "eth2").verdict, LinkVerdict::missing);
  EXPECT_THROW((void)parse_expectations({"eth0"}, "", ""), UsageError);
  EXPECT_THROW((void)parse_expectations({"=5"}, "", ""), UsageError);
  EXPECT_THROW((void)parse_expectations({"eth0=lots"}, "", ""), UsageError);
  EXPECT_EQ(parse_expectations({"h4/eth0=+150%"}, "", "").links,
            (std::vector<std::pair<std::string, double>>{{"h4/eth0", 150.0}}));
}
