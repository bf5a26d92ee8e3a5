// Patterns (the exact step sequences), plan file parsing and its FILE:LINE errors, KPI evaluation.
#include <fabperf/core/error.hpp>
#include <fabperf/plan/plan.hpp>

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include "common/step_result.hpp"

using namespace fabperf;
using namespace fabperf::plan;

namespace {

std::vector<std::vector<std::pair<int, int>>> flows(const std::vector<Step>& steps) {
  std::vector<std::vector<std::pair<int, int>>> out;
  for (const auto& s : steps) {
    std::vector<std::pair<int, int>> v;
    for (const auto& f : s.flows) v.emplace_back(static_cast<int>(f.client), static_cast<int>(f.server));
    out.push_back(v);
  }
  return out;
}
using F = std::vector<std::vector<std::pair<int, int>>>;

PatternParams pat(Pattern p) {
  PatternParams x;
  x.pattern = p;
  return x;
}

std::string plan_error_of(const std::string& text) {
  try {
    (void)parse_plan(text, "p.toml");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

const char* kHosts = R"(
[[hosts]]
name = "a"
address = "127.0.0.1:7001"
[[hosts]]
name = "b"
address = "127.0.0.1:7002"
[[hosts]]
name = "c"
address = "127.0.0.1:7003"
[[hosts]]
name = "d"
address = "127.0.0.1:7004"
)";

}  // namespace

TEST(Patterns, EachVsRest) {
  EXPECT_EQ(flows(make_steps(3, pat(Pattern::each_vs_rest))),
            (F{{{0, 1}, {0, 2}}, {{1, 0}, {1, 2}}, {{2, 0}, {2, 1}}}));
}

TEST(Patterns, Halves) {
  EXPECT_EQ(flows(make_steps(4, pat(Pattern::halves))), (F{{{0, 2}, {0, 3}, {1, 2}, {1, 3}}}));
  EXPECT_EQ(flows(make_steps(3, pat(Pattern::halves))), (F{{{0, 1}, {0, 2}}}));
}

TEST(Patterns, AllPairsOneAtATime) {
  EXPECT_EQ(flows(make_steps(3, pat(Pattern::all_pairs))),
            (F{{{0, 1}}, {{0, 2}}, {{1, 0}}, {{1, 2}}, {{2, 0}}, {{2, 1}}}));
}

TEST(Patterns, AllPairsConcurrentAreDisjointAndComplete) {
  for (std::uint32_t n : {4u, 5u, 8u, 9u}) {
    for (std::uint32_t k = 1; k <= n / 2; ++k) {
      auto p = pat(Pattern::all_pairs);
      p.concurrent_pairs = k;
      const auto steps = make_steps(n, p);
      std::set<std::pair<std::uint32_t, std::uint32_t>> seen;
      for (const auto& s : steps) {
        ASSERT_LE(s.flows.size(), k);
        ASSERT_GE(s.flows.size(), 1u);
        std::set<std::uint32_t> busy;
        for (const auto& f : s.flows) {
          EXPECT_TRUE(busy.insert(f.client).second) << "node in two pairs of one step";
          EXPECT_TRUE(busy.insert(f.server).second) << "node in two pairs of one step";
          EXPECT_TRUE(seen.insert({f.client, f.server}).second) << "pair twice";
        }
      }
      EXPECT_EQ(seen.size(), n * (n - 1)) << n << " " << k;
      // Packing must actually shorten the matrix.
      if (k == n / 2 && n % 2 == 0) {
        EXPECT_LE(steps.size(), 2 * (n - 1) + n) << n;
      }
    }
  }
  auto p = pat(Pattern::all_pairs);
  p.concurrent_pairs = 3;
  EXPECT_THROW(make_steps(5, p), UsageError);  // only 2 disjoint pairs fit in 5 nodes
}

TEST(Patterns, AllPairsTwoConcurrentOnFour) {
  auto p = pat(Pattern::all_pairs);
  p.concurrent_pairs = 2;
  const auto f = flows(make_steps(4, p));
  // Circle method, round 0: the fixed node 3 meets 0, and 1 meets 2; then the same reversed.
  EXPECT_EQ(f.front(), (std::vector<std::pair<int, int>>{{0, 3}, {1, 2}}));
  EXPECT_EQ(f[1], (std::vector<std::pair<int, int>>{{3, 0}, {2, 1}}));
  EXPECT_EQ(f.size(), 6u);
}

// The round-robin bound: with N/2 concurrent pairs, even N takes exactly 2(N-1) steps of N/2
// disjoint pairs, odd N 2N steps of (N-1)/2 (one node has a bye each round), and every ordered
// pair runs exactly once. Pinned for every N up to 64 and at larger sizes up to 1024.
TEST(Patterns, AllPairsCircleMethodBound) {
  std::vector<std::uint32_t> sizes;
  for (std::uint32_t n = 2; n <= 64; ++n) sizes.push_back(n);
  for (std::uint32_t n : {100u, 127u, 128u, 255u, 256u, 511u, 512u, 1000u, 1023u, 1024u}) sizes.push_back(n);
  for (const auto n : sizes) {
    auto p = pat(Pattern::all_pairs);
    p.concurrent_pairs = n / 2;
    const auto steps = make_steps(n, p);
    ASSERT_EQ(steps.size(), n % 2 == 0 ? 2u * (n - 1) : 2u * n) << n;
    std::vector<bool> seen(static_cast<std::size_t>(n) * n, false);
    std::size_t total = 0;
    for (const auto& s : steps) {
      ASSERT_EQ(s.flows.size(), n / 2) << n;
      std::vector<bool> busy(n, false);
      for (const auto& f : s.flows) {
        ASSERT_NE(f.client, f.server);
        ASSERT_FALSE(busy[f.client]) << "node in two pairs of one step, n=" << n;
        ASSERT_FALSE(busy[f.server]) << "node in two pairs of one step, n=" << n;
        busy[f.client] = busy[f.server] = true;
        const std::size_t key = static_cast<std::size_t>(f.client) * n + f.server;
        ASSERT_FALSE(seen[key]) << "pair twice, n=" << n;
        seen[key] = true;
        ++total;
      }
    }
    ASSERT_EQ(total, static_cast<std::size_t>(n) * (n - 1)) << n;
  }
  // Fewer concurrent pairs cut each round: ceil((N/2)/K) steps per orientation.
  auto p = pat(Pattern::all_pairs);
  p.concurrent_pairs = 3;
  EXPECT_EQ(make_steps(8, p).size(), 2u * 7 * 2);
}

TEST(Patterns, Ring) {
  EXPECT_EQ(flows(make_steps(4, pat(Pattern::ring))), (F{{{0, 1}, {1, 2}, {2, 3}, {3, 0}}}));
  auto p = pat(Pattern::ring);
  p.k = 2;
  EXPECT_EQ(flows(make_steps(4, p)), (F{{{0, 2}, {1, 3}, {2, 0}, {3, 1}}}));
  p.k = 4;
  EXPECT_THROW(make_steps(4, p), UsageError);
}

TEST(Patterns, IncastBroadcastAllToAll) {
  auto p = pat(Pattern::incast);
  p.target = 2;
  EXPECT_EQ(flows(make_steps(3, p)), (F{{{0, 2}, {1, 2}}}));
  p.pattern = Pattern::broadcast;
  EXPECT_EQ(flows(make_steps(3, p)), (F{{{2, 0}, {2, 1}}}));
  p.target = 3;
  EXPECT_THROW(make_steps(3, p), UsageError);
  EXPECT_EQ(flows(make_steps(3, pat(Pattern::all_to_all))), (F{{{0, 1}, {0, 2}, {1, 0}, {1, 2}, {2, 0}, {2, 1}}}));
}

TEST(Patterns, BipartiteAndPairs) {
  auto p = pat(Pattern::bipartite);
  p.clients = {2, 3};
  p.servers = {0};
  EXPECT_EQ(flows(make_steps(4, p)), (F{{{2, 0}, {3, 0}}}));
  p.servers = {2};
  EXPECT_THROW(make_steps(4, p), UsageError);
  auto q = pat(Pattern::pairs);
  q.pairs = {{0, 1}, {2, 3}};
  EXPECT_EQ(flows(make_steps(4, q)), (F{{{0, 1}, {2, 3}}}));
  q.pairs = {{0, 0}};
  EXPECT_THROW(make_steps(4, q), UsageError);
  EXPECT_THROW(make_steps(1, pat(Pattern::each_vs_rest)), UsageError);
}

TEST(Patterns, NamesRoundTrip) {
  for (const auto* n :
       {"bipartite", "pairs", "each-vs-rest", "halves", "all-pairs", "ring", "incast", "broadcast", "all-to-all"}) {
    EXPECT_EQ(to_string(parse_pattern(n)), n);
  }
  EXPECT_THROW(parse_pattern("mesh"), UsageError);
}

TEST(PlanFile, ParsesAndExpands) {
  const std::string text = std::string("name = \"t\"\n") + kHosts + R"(
[defaults]
time = 2
buffsize = "1M"
[[tests]]
name = "ring"
pattern = "ring"
k = 2
mode = "stream"
[[tests]]
name = "matrix"
pattern = "all-pairs"
concurrent-pairs = 2
hosts = ["d", "c", "b", "a"]
kpis = { profile = "ibm-readiness", min-pair-mbps = 10 }
)";
  const auto p = parse_plan(text, "t.toml");
  ASSERT_EQ(p.tests.size(), 2u);
  EXPECT_EQ(p.tests[0].spec.time(), std::chrono::seconds(2));
  EXPECT_EQ(p.tests[0].spec.buffsize(), 1u << 20);
  EXPECT_EQ(p.tests[0].spec.mode(), Mode::stream);
  EXPECT_EQ(p.tests[1].spec.mode(), Mode::rpc);
  EXPECT_EQ(p.tests[0].spec.send_method(), SendMethod::automatic);  // settled by the agents
  EXPECT_EQ(p.tests[1].spec.send_method(), SendMethod::automatic);
  EXPECT_EQ(*p.tests[1].kpis.min_node_mbps, 2000);
  EXPECT_EQ(*p.tests[1].kpis.min_spread, 0.79);
  EXPECT_EQ(*p.tests[1].kpis.min_pair_mbps, 10);
  const auto steps = expand(p);
  ASSERT_EQ(steps.size(), 1u + 6u);
  EXPECT_EQ(steps[0].id, "ring/0");
  EXPECT_EQ(steps[0].pairs.size(), 4u);
  // Ring: every node is both a client and a server.
  EXPECT_EQ(steps[0].clients.size(), 4u);
  EXPECT_EQ(steps[0].servers.size(), 4u);
  // The matrix sees hosts in the test's order: d first.
  EXPECT_EQ(steps[1].id, "matrix/0");
  EXPECT_EQ(steps[1].index, 1u);
  // Circle method, round 0: test node 0 (d) meets the fixed node 3 (a), 1 (c) meets 2 (b).
  EXPECT_EQ(steps[1].clients, (std::vector<std::uint32_t>{3, 2}));
  EXPECT_EQ(steps[1].servers, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_NEAR(estimate_seconds(p, steps), 7 * (2 + kStepOverheadS), 1e-9);
  const auto j = plan_json(p);
  EXPECT_EQ(j["tests"][1]["concurrent-pairs"], 2);
  EXPECT_EQ(j["tests"][1]["settings"]["buffsize"], 1 << 20);
  EXPECT_EQ(j["hosts"][0]["address"], "127.0.0.1:7001");
  EXPECT_NE(describe_plan(p, steps).find("matrix/0"), std::string::npos);
}

TEST(PlanFile, LinksAndRoles) {
  const auto p = parse_plan(R"(
[[hosts]]
name = "s"
address = "127.0.0.1:7001@127.0.0.1+127.0.0.2"
roles = ["server"]
[[hosts]]
name = "c"
address = "127.0.0.1:7002"
links = ["127.0.0.3", "127.0.0.4"]
roles = ["client"]
[[tests]]
name = "b"
pattern = "bipartite"
)",
                            "l.toml");
  EXPECT_EQ(parse_plan(std::string(kHosts) + "[[tests]]\nname = \"w\"\npattern = \"ring\"\nmode = \"stream\"\n"
                                             "send-method = \"write\"\n",
                       "w.toml")
                .tests[0]
                .spec.send_method(),
            SendMethod::write);
  EXPECT_EQ(p.hosts[0].hp.links.size(), 2u);
  EXPECT_EQ(p.hosts[1].hp.links[1], "127.0.0.4");
  const auto steps = expand(p);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].clients, (std::vector<std::uint32_t>{1}));
  EXPECT_EQ(steps[0].servers, (std::vector<std::uint32_t>{0}));
}

// per-link = "sequential": every pattern step once per link, the step's hosts on that link alone.
TEST(PlanFile, PerLinkSequentialIsAStepPerLink) {
  const std::string hosts = R"(
[[hosts]]
name = "s"
address = "127.0.0.1:7001@127.0.0.1+127.0.0.2"
roles = ["server"]
[[hosts]]
name = "c"
address = "127.0.0.1:7002@127.0.0.3+127.0.0.4"
roles = ["client"]
)";
  auto p = parse_plan(hosts +
                          "[[tests]]\nname = \"b\"\npattern = \"bipartite\"\nper-link = \"sequential\"\n"
                          "bind-dev = \"eth0+eth1\"\n",
                      "l.toml");
  p.repeat = 2;
  const auto steps = expand(p);
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[0].id, "b/0/link0#1");
  EXPECT_EQ(steps[1].id, "b/0/link1#1");
  EXPECT_EQ(steps[1].base_id, "b/0/link1");
  EXPECT_EQ(steps[3].id, "b/0/link1#2");
  EXPECT_EQ(steps[1].link, 1u);
  EXPECT_EQ(p.tests[0].bind_devs, (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(p.tests[0].normalized["steps"], 2);
  EXPECT_EQ(p.tests[0].normalized["per-link"], "sequential");
  // The sweep compares the links of the same step and trial; a missing step is named.
  std::vector<StepOutcome> done;
  for (const double mb : {100.0, 70.0}) {
    ResultDoc d;
    d.aggregate.mb_per_s = mb;
    done.push_back({steps[done.size()].id, "b", d});
  }
  const auto sweep = compare_link_steps(p, 0, steps, done);
  ASSERT_EQ(sweep.record["links"].size(), 4u);
  EXPECT_EQ(sweep.record["links"][1]["step"], "b/0#1");
  EXPECT_DOUBLE_EQ(sweep.record["links"][1]["pct_of_best_step"].get<double>(), 70.0);
  const auto f = sweep.record["findings"].dump();
  EXPECT_NE(f.find("b/0#1: link 1 (127.0.0.4 -): 70.0 MB/s is 30.0% below the best link"), std::string::npos) << f;
  EXPECT_NE(f.find("b/0#2: link 0 (127.0.0.3): the step did not complete"), std::string::npos) << f;
  EXPECT_EQ(
      plan_error_of(std::string(kHosts) + "[[tests]]\nname = \"x\"\npattern = \"ring\"\nper-link = \"sequential\"\n")
          .rfind("p.toml:17: field 'per-link': per-link sequential: needs hosts", 0),
      0u);
}

TEST(PlanFile, ErrorsNameFileLineAndField) {
  const std::string h = kHosts;  // 13 lines; the first [[tests]] below starts on line 14
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"mesh\"\n"),
            "p.toml:16: field 'pattern': unknown pattern 'mesh' (one of bipartite, pairs, each-vs-rest, halves, "
            "all-pairs, ring, "
            "incast, broadcast, all-to-all)");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\ntime = \"ten\"\n").substr(0, 25),
            "p.toml:17: field 'time': ");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\nthreads = 0\n").substr(0, 28),
            "p.toml:17: field 'threads': ");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\nbufsize = \"4M\"\n").substr(0, 28),
            "p.toml:17: field 'bufsize': ");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\nk = 4\n"),
            "p.toml:14: field 'pattern': pattern ring: k 4 must be within 1..3");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"incast\"\ntarget = \"zz\"\n"),
            "p.toml:17: field 'target': no host named 'zz'");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\ntarget = \"a\"\n"),
            "p.toml:17: field 'target': does not apply to pattern ring");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\n[tests.kpis]\nmin-node-mbs = 5\n"),
            "p.toml:18: field 'min-node-mbs': unknown KPI (profile, min-node-mbps, min-pair-mbps, min-aggregate-mbps, "
            "min-spread, "
            "max-p99-latency-us, max-retransmits, max-nic-errors, min-link-mbps, min-efficiency-pct, max-pause-frames, "
            "max-discards, max-fec-uncorrected, max-ecn-marks)");
  EXPECT_EQ(
      plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\n[tests.kpis]\nmin-spread = 1.5\n").substr(0, 31),
      "p.toml:18: field 'min-spread': ");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\nwarmup = 6\ncooldown = 6\n").substr(0, 11),
            "p.toml:14: ");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\nmode = 3\n"),
            "p.toml:17: field 'mode': value '3': unknown mode (rpc or stream)");
  // TOML syntax errors carry line and column.
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\n").substr(0, 13), "p.toml:15:10:");
  EXPECT_EQ(plan_error_of("[[hosts]]\nname = \"a\"\n"), "p.toml:1: field 'address': missing for host 'a'");
  EXPECT_EQ(plan_error_of("[[hosts]]\nname = \"a\"\naddress = \"h:1\"\n[[hosts]]\nname = \"a\"\naddress = \"h:2\"\n"),
            "p.toml:5: field 'name': host 'a' is listed twice");
  EXPECT_EQ(plan_error_of(std::string(kHosts) + "colour = 1\n").substr(0, 27), "p.toml:14: field 'colour': ");
  EXPECT_EQ(
      plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\nmode = \"stream\"\nsend-method = \"mmap\"\n"),
      "p.toml:18: field 'send-method': value 'mmap': expected auto, write, zerocopy or sendfile");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"pairs\"\npairs = [\"a-b\"]\n"),
            "p.toml:17: field 'pairs': 'a-b': expected CLIENT->SERVER");
  // The run settings (interval, concurrent-pairs, k, per-link): the CLI's parsers and ranges.
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\ninterval = \"0.001\"\n"),
            "p.toml:17: field 'interval': value: must be at least 0.01 s");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\nk = 0\n"),
            "p.toml:17: field 'k': value 0: out of range (1..65535)");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"all-pairs\"\nconcurrent-pairs = 5000\n"),
            "p.toml:17: field 'concurrent-pairs': value 5000: out of range (1..4096)");
  EXPECT_EQ(plan_error_of(h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\nper-link = \"some\"\n"),
            "p.toml:17: field 'per-link': value 'some': expected all or sequential");
}

// Every RDMA option of `fabperf run` is a plan knob with the command line's parser and limits.
TEST(PlanFile, RdmaKnobs) {
  const std::string h = std::string("name = \"t\"\n") + kHosts;
  const auto p = parse_plan(h + R"([[tests]]
name = "r"
pattern = "ring"
mode = "stream"
transport = "rdma"
rdma-device = "mlx5_0:1,mlx5_1"
gid-index = 3
rdma-verb = "send"
qdepth = 64
inline = 128
cq-mod = 8
rdma-events = true
rdma-cm = true
)",
                            "r.toml");
  const TestSpec& s = p.tests.at(0).spec;
  EXPECT_EQ(s.transport(), Transport::rdma);
  EXPECT_EQ(s.rdma_device(), "mlx5_0:1,mlx5_1");
  EXPECT_EQ(s.gid_index(), 3);
  EXPECT_EQ(s.rdma_verb(), RdmaVerb::send);
  EXPECT_EQ(s.qdepth(), 64u);
  EXPECT_EQ(s.inline_size(), 128u);
  EXPECT_EQ(s.cq_mod(), 8u);
  EXPECT_TRUE(s.rdma_events());
  EXPECT_TRUE(s.rdma_cm());
  EXPECT_EQ(plan_json(p)["tests"][0]["settings"]["rdma_cm"], true);
  // Unset knobs keep the command line's defaults.
  const auto d = parse_plan(h + "[[tests]]\nname = \"d\"\npattern = \"ring\"\ntransport = \"rdma\"\n", "d.toml");
  EXPECT_EQ(d.tests.at(0).spec.qdepth(), 16u);
  EXPECT_FALSE(d.tests.at(0).spec.rdma_cm());

  const std::string t = h + "[[tests]]\nname = \"x\"\npattern = \"ring\"\n";
  EXPECT_EQ(plan_error_of(t + "transport = \"rdma\"\nqdepth = 0\n"),
            "p.toml:19: field 'qdepth': value 0: out of range (1..4096)");
  EXPECT_EQ(plan_error_of(t + "transport = \"rdma\"\nrdma-verb = \"read\"\n").substr(0, 30),
            "p.toml:19: field 'rdma-verb': ");
  EXPECT_EQ(plan_error_of(t + "transport = \"rdma\"\nrdma-cm = \"yes\"\n").substr(0, 28),
            "p.toml:19: field 'rdma-cm': ");
  // Settings that contradict each other fail at the test, with the setting named.
  const std::string cm_tcp = plan_error_of(t + "rdma-cm = true\n");
  EXPECT_EQ(cm_tcp.substr(0, 11), "p.toml:15: ") << cm_tcp;
  EXPECT_NE(cm_tcp.find("--rdma-cm: RDMA (--transport rdma) only (this test's transport is tcp)"), std::string::npos)
      << cm_tcp;
  // A setting the test's transport does not use is refused by name, not carried along unused.
  const std::string sp_rdma = plan_error_of(t + "transport = \"rdma\"\nspread-ports = true\n");
  EXPECT_NE(sp_rdma.find("--spread-ports: TCP only (this test's transport is rdma)"), std::string::npos) << sp_rdma;
  const std::string qd_tcp = plan_error_of(t + "qdepth = 8\n");
  EXPECT_NE(qd_tcp.find("--qdepth: RDMA (--transport rdma) only (this test's transport is tcp)"), std::string::npos)
      << qd_tcp;
  const std::string cq = plan_error_of(t + "transport = \"rdma\"\nqdepth = 4\ncq-mod = 8\n");
  EXPECT_NE(cq.find("--cq-mod 8: out of range (1..--qdepth 4)"), std::string::npos) << cq;
}

TEST(Kpi, ProfilesAndNames) {
  const auto k = kpi_profile("ibm-readiness");
  EXPECT_EQ(*k.min_node_mbps, 2000);
  EXPECT_EQ(*k.min_spread, 0.79);
  EXPECT_THROW(kpi_profile("fast"), UsageError);
  KpiSet s;
  EXPECT_THROW(set_kpi(s, "min-spread", 2), UsageError);
  EXPECT_THROW(set_kpi(s, "max-speed", 2), UsageError);
  set_kpi(s, "max-retransmits", 0);
  EXPECT_EQ(*s.max_retransmits, 0);
}

namespace {
nlohmann::json node(int index, const std::string& name, const std::string& role, double tx, double rx,
                    nlohmann::json links = nlohmann::json::array()) {
  return {{"index", index},    {"node", name},      {"role", role},
          {"tx_mb_per_s", tx}, {"rx_mb_per_s", rx}, {"latency", {{"count", 10}, {"p99_us", 100.0 * (index + 1)}}},
          {"links", links}};
}
nlohmann::json link(const std::string& name, double payload_tx, double eff, int errors) {
  return {{"link", name},
          {"payload_tx_mb_per_s", payload_tx},
          {"payload_rx_mb_per_s", 0.0},
          {"efficiency_pct", eff},
          {"speed_mbps", 1000},
          {"tx_errors", errors},
          {"rx_errors", 0},
          {"tx_dropped", 0},
          {"rx_dropped", 0}};
}
}  // namespace

TEST(Kpi, EvaluatedPerNodePairLinkAndSpread) {
  // Step 0: a loads b and c (write); step 1: b loads a and c. The one-link lists are spelled
  // json::array(...): clang reads a one-element brace list of a json as a copy of it (CWG 2137).
  StepOutcome s0{"t/0", "t",
                 testutil::step_result(
                     {{"settings", {{"test", "write"}}},
                      {"clients", 1},
                      {"servers", 2},
                      {"aggregate", {{"mb_per_s", 2500.0}}},
                      {"nodes",
                       {node(0, "h:1", "client", 2500, 1, nlohmann::json::array({link("eth0", 2500, 90, 0)})),
                        node(1, "h:2", "server", 1, 1250), node(2, "h:3", "server", 1, 1250)}},
                      {"pairs",
                       {{{"client", 0}, {"server", 1}, {"mb_per_s", 1250.0}, {"retrans", 0}, {"connections", 1}},
                        {{"client", 0}, {"server", 2}, {"mb_per_s", 1250.0}, {"retrans", 7}, {"connections", 1}}}}})};
  StepOutcome s1{"t/1", "t",
                 testutil::step_result(
                     {{"settings", {{"test", "write"}}},
                      {"clients", 1},
                      {"servers", 2},
                      {"aggregate", {{"mb_per_s", 1800.0}}},
                      {"nodes",
                       {node(0, "h:2", "client", 1800, 1, nlohmann::json::array({link("eth0", 1800, 60, 3)})),
                        node(1, "h:1", "server", 1, 900), node(2, "h:3", "server", 1, 900)}},
                      {"pairs",
                       {{{"client", 0}, {"server", 1}, {"mb_per_s", 900.0}, {"retrans", 0}, {"connections", 1}},
                        {{"client", 0}, {"server", 2}, {"mb_per_s", 900.0}, {"retrans", 0}, {"connections", 1}}}}})};
  KpiSet k = kpi_profile("ibm-readiness");
  k.max_retransmits = 5;
  k.max_nic_errors = 0;
  k.min_efficiency_pct = 80;
  k.max_p99_latency_us = 99;
  const std::map<std::string, std::string> names{{"h:1", "a"}, {"h:2", "b"}, {"h:3", "c"}};
  const auto checks = evaluate_kpis(k, {s0, s1}, names, std::string("t"));
  std::set<std::string> failed;
  for (const auto& c : checks) {
    if (!c.pass) failed.insert(c.kpi + " " + c.subject + " " + (c.step ? *c.step : "-"));
  }
  EXPECT_EQ(failed, (std::set<std::string>{"min-node-mbps b t/1", "min-spread  -", "max-retransmits a->c t/0",
                                           "max-nic-errors b/eth0 -", "min-efficiency-pct b/eth0 -",
                                           "max-p99-latency-us a t/0", "max-p99-latency-us b t/1"}));
  // Every check goes through the results file's one codec and back (to_json, load_results).
  std::stringstream file;
  file << nlohmann::json{{"type", "plan"},
                         {"schema", kPlanResultsSchema},
                         {"version", kPlanResultsVersion},
                         {"fabperf_version", "x"},
                         {"started_at", "t"},
                         {"plan_file", "p.toml"},
                         {"steps_total", 0},
                         {"plan", nlohmann::json::object()}}
              .dump()
       << "\n";
  for (const auto& c : checks) {
    if (c.kpi == "min-spread") {
      EXPECT_NEAR(*c.value, 1800.0 / 2500.0, 1e-9);
      EXPECT_NE(c.detail.find("slowest b 1800 MB/s (t/1)"), std::string::npos) << c.detail;
    }
    file << to_json(c).dump() << "\n";
  }
  const auto back = load_results(file, "r.jsonl").kpis;
  ASSERT_EQ(back.size(), checks.size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].subject, checks[i].subject);
    EXPECT_EQ(back[i].pass, checks[i].pass);
    EXPECT_EQ(back[i].value, checks[i].value);
    EXPECT_EQ(back[i].step, checks[i].step);
  }
  EXPECT_NE(render_verdicts(checks).find("FAIL min-node-mbps"), std::string::npos);
}

// Issue 31: a step that lost a node does not judge its partners' links by what moved before the
// loss; a link seen only in such steps is "not measured", not a wrong figure.
TEST(Kpi, ALinkIsJudgedOnlyFromCompleteSteps) {
  const auto step = [](const char* id, bool complete, double mb) {
    return StepOutcome{
        id, "t",
        testutil::step_result(
            {{"settings", {{"test", "write"}}},
             {"complete", complete},
             {"nodes", {node(0, "h:1", "client", mb, 1, nlohmann::json::array({link("eth0", mb, 90, 0)}))}},
             {"pairs", nlohmann::json::array()}})};
  };
  KpiSet k;
  k.min_link_mbps = 100;
  auto checks = evaluate_kpis(k, {step("t/0", true, 1200), step("t/1", false, 3)}, {{"h:1", "a"}}, std::nullopt);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_TRUE(checks[0].pass) << checks[0].detail;
  EXPECT_EQ(checks[0].value, 1200);
  checks = evaluate_kpis(k, {step("t/1", false, 3)}, {{"h:1", "a"}}, std::nullopt);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_FALSE(checks[0].pass);
  EXPECT_FALSE(checks[0].value.has_value());
  EXPECT_NE(checks[0].detail.find("a/eth0: not measured in a complete step"), std::string::npos) << checks[0].detail;
}

TEST(Kpi, UnmeasurableIsNotAPass) {
  StepOutcome s{"t/0", "t",
                testutil::step_result({{"settings", {{"test", "write"}}},
                                       {"nodes",
                                        {{{"index", 0},
                                          {"node", "h:1"},
                                          {"role", "client"},
                                          {"tx_mb_per_s", 5.0},
                                          {"links", {{{"link", "lo"}, {"efficiency_pct", nullptr}}}}}}},
                                       {"pairs", nlohmann::json::array()}})};
  KpiSet k;
  k.min_efficiency_pct = 50;
  const auto checks = evaluate_kpis(k, {s}, {}, std::nullopt);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_FALSE(checks[0].pass);
  EXPECT_FALSE(checks[0].value.has_value());
  EXPECT_EQ(to_json(checks[0])["value"], nullptr);
  EXPECT_EQ(to_json(checks[0])["test"], nullptr);
}

TEST(PlanFile, RepeatAbAndIsolate) {
  const std::string base = std::string("name = \"t\"\n");
  const std::string test = R"(
[[tests]]
name = "m"
pattern = "pairs"
pairs = ["a->b", "c->d"]
time = 1
)";
  {
    const auto p = parse_plan(base + "repeat = 3\nisolate = true\n" + kHosts + test, "t.toml");
    EXPECT_EQ(p.repeat, 3u);
    EXPECT_TRUE(p.isolate);
    const auto steps = expand(p);
    ASSERT_EQ(steps.size(), 3u);
    EXPECT_EQ(steps[0].id, "m/0#1");
    EXPECT_EQ(steps[2].id, "m/0#3");
    EXPECT_EQ(steps[2].base_id, "m/0");
    EXPECT_EQ(steps[2].trial, 3u);
    EXPECT_EQ(plan_json(p)["repeat"], 3);
  }
  {
    const auto p =
        parse_plan(base + "repeat = 2\n[ab]\na = \"set-mode alb\"\nb = \"set-mode lacp\"\nb-name = \"802.3ad\"\n" +
                       "hook-timeout = \"90s\"\n" + kHosts + test,
                   "t.toml");
    ASSERT_TRUE(p.ab);
    EXPECT_EQ(p.ab->a, "set-mode alb");
    EXPECT_EQ(p.ab->a_name, "A");
    EXPECT_EQ(p.ab->b_name, "802.3ad");
    EXPECT_DOUBLE_EQ(p.ab->timeout_s, 90);
    const auto steps = expand(p);
    ASSERT_EQ(steps.size(), 4u);
    // A B A B: each block one pass over every test, its hook before its first step.
    std::vector<std::string> ids;
    for (const auto& s : steps) ids.push_back(s.id + ":" + std::to_string(s.block));
    EXPECT_EQ(ids, (std::vector<std::string>{"m/0@A1:0", "m/0@B1:1", "m/0@A2:2", "m/0@B2:3"}));
    EXPECT_EQ(plan_json(p)["ab"]["b"], "set-mode lacp");
    // Without repeat, isolate and ab the plan record is what it always was (old results resume).
    EXPECT_FALSE(plan_json(parse_plan(base + kHosts + test, "t.toml")).contains("repeat"));
  }
  const auto err = [&](const std::string& top) {
    try {
      parse_plan(base + top + kHosts + test, "t.toml");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(err("repeat = 0\n"), "t.toml:2: field 'repeat': 0 is out of range (1..1000 trials)");
  EXPECT_EQ(err("repeat = \"5\"\n"), "t.toml:2: field 'repeat': expected an integer, got a string");
  EXPECT_EQ(err("isolate = 1\n"), "t.toml:2: field 'isolate': expected true or false, got an integer");
  EXPECT_EQ(err("[ab]\na = \"x\"\n"),
            "t.toml:2: field 'b': missing in [ab]: the command that switches to this configuration (run on this host)");
  EXPECT_EQ(err("[ab]\na = \"x\"\nb = \"y\"\nc = 1\n"),
            "t.toml:5: field 'c': unknown field of [ab] (a, b, a-name, b-name, hook-timeout, expect, expect-rest, "
            "expect-gain)");
  // The expectations are compare's words, checked as compare checks them, and kept in the header.
  EXPECT_EQ(err("[ab]\na = \"x\"\nb = \"y\"\nexpect = [\"h2/eth1\"]\n"),
            "t.toml:2: field 'ab': --expect 'h2/eth1': expected LINK=PCT, e.g. h4/eth0=+150% or eth0=0");
  EXPECT_EQ(err("[ab]\na = \"x\"\nb = \"y\"\nexpect-rest = \"same\"\n"),
            "t.toml:2: field 'ab': --expect-rest 'same': expected 'unchanged' or 'speeds'");
  EXPECT_EQ(err("[ab]\na = \"x\"\nb = \"y\"\nexpect-gain = 40\nexpect-rest = \"unchanged\"\n"),
            "t.toml:2: field 'ab': --expect-gain applies to every link: give it alone, or per link with --expect and "
            "--expect-rest");
  const auto ab = parse_plan(
      base + "[ab]\na = \"x\"\nb = \"y\"\nexpect = [\"h2/eth1=+150%\"]\nexpect-rest = \"unchanged\"\n" + kHosts + test,
      "t.toml");
  EXPECT_EQ(plan_json(ab)["ab"]["expect"], nlohmann::json::array({"h2/eth1=+150%"}));
  EXPECT_EQ(plan_json(ab)["ab"]["expect_rest"], "unchanged");
  EXPECT_FALSE(plan_json(ab)["ab"].contains("expect_gain"));
  EXPECT_EQ(err("[ab]\na = \" \"\nb = \"y\"\n"), "t.toml:3: field 'a': empty command");
  EXPECT_EQ(err("[ab]\na = \"x\"\nb = \"y\"\na-name = \"B\"\n"),
            "t.toml:2: field 'b-name': 'B' names both configurations");
}

TEST(Patterns, StepFigures) {
  using nlohmann::json;
  json r = {
      {"aggregate", {{"mb_per_s", 300.0}}},
      {"nodes",
       json::array({{{"node", "a"}, {"role", "server+client"}, {"tx_mb_per_s", 100.0}, {"rx_mb_per_s", 90.0}},
                    {{"node", "b"}, {"role", "server+client"}, {"tx_mb_per_s", 80.0}, {"rx_mb_per_s", 95.0}},
                    {{"node", "c"}, {"role", "server+client"}, {"tx_mb_per_s", 120.0}, {"rx_mb_per_s", 115.0}}})}};
  const auto a2a = step_figures(Pattern::all_to_all, 3, testutil::step_result(r));
  EXPECT_DOUBLE_EQ(a2a["busbw_mb_per_s"].get<double>(), 80.0);          // the slowest rank
  EXPECT_DOUBLE_EQ(a2a["algbw_mb_per_s"].get<double>(), 80.0 * 3 / 2);  // busbw n / (n-1)
  json inc = {
      {"aggregate", {{"mb_per_s", 150.0}}},
      {"nodes", json::array({{{"node", "t"}, {"role", "server"}, {"tx_mb_per_s", 0.1}, {"rx_mb_per_s", 150.0}},
                             {{"node", "x"}, {"role", "client"}, {"tx_mb_per_s", 75.0}, {"rx_mb_per_s", 0.0}},
                             {{"node", "y"}, {"role", "client"}, {"tx_mb_per_s", 75.0}, {"rx_mb_per_s", 0.0}}})}};
  const auto g = step_figures(Pattern::incast, 3, testutil::step_result(inc));
  EXPECT_DOUBLE_EQ(g["busbw_mb_per_s"].get<double>(), 150.0);
  EXPECT_DOUBLE_EQ(g["algbw_mb_per_s"].get<double>(), 225.0);
  const auto h = step_figures(Pattern::halves, 4, testutil::step_result(r));
  EXPECT_DOUBLE_EQ(h["bisection_mb_per_s"].get<double>(), 300.0);
  EXPECT_DOUBLE_EQ(h["per_node_mb_per_s"].get<double>(), 150.0);
  EXPECT_TRUE(step_figures(Pattern::ring, 3, testutil::step_result(r)).is_null());
  EXPECT_EQ(render_step_figures(g), "busbw 150 MB/s, algbw 225 MB/s (3 ranks)");
}
