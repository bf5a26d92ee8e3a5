// Plans end to end through the real binary: four loopback agents, every pattern, the results
// file contract, KPIs and exit codes, SIGINT and --resume, plan errors, pre-flight.
#include "integration/harness.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <csignal>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

using namespace fabperf::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream o(path);
  o << text;
}

std::string hosts_toml(const std::vector<const AgentProcess*>& agents) {
  std::string s;
  const char* names[] = {"a", "b", "c", "d", "e"};
  for (std::size_t i = 0; i < agents.size(); ++i) {
    s += "[[hosts]]\nname = \"" + std::string(names[i]) + "\"\naddress = \"" + agents[i]->address() + "\"\n";
  }
  return s;
}

// The flows a step's result actually carried, as "client->server" plan names.
std::set<std::string> measured_flows(const json& step, const std::map<std::string, std::string>& names) {
  std::map<int, std::string> by_index;
  for (const auto& n : step["result"]["nodes"])
    by_index[n["index"].get<int>()] = names.at(n["node"].get<std::string>());
  std::set<std::string> out;
  for (const auto& p : step["result"]["pairs"]) {
    EXPECT_GT(p["bytes"].get<double>(), 0) << step["id"];
    out.insert(by_index[p["client"].get<int>()] + "->" + by_index[p["server"].get<int>()]);
  }
  return out;
}

}  // namespace

TEST(Plans, FourNodesEveryPatternEndToEnd) {
  AgentProcess a, b, c, d;
  const std::string plan = temp_path("every.toml");
  write_file(plan, "name = \"every\"\n" + hosts_toml({&a, &b, &c, &d}) + R"(
[defaults]
time = 1
mode = "stream"
buffsize = "256K"
kpis = { min-pair-mbps = 1 }
[[tests]]
name = "bip"
pattern = "bipartite"
clients = ["a", "b"]
servers = ["c", "d"]
[[tests]]
name = "pairs"
pattern = "pairs"
pairs = ["a->b", "d->c"]
[[tests]]
name = "evr"
pattern = "each-vs-rest"
test = "read"
mode = "rpc"
[[tests]]
name = "halves"
pattern = "halves"
[[tests]]
name = "matrix"
pattern = "all-pairs"
concurrent-pairs = 2
[[tests]]
name = "ring"
pattern = "ring"
[[tests]]
name = "incast"
pattern = "incast"
target = "b"
[[tests]]
name = "bcast"
pattern = "broadcast"
target = "c"
[[tests]]
name = "a2a"
pattern = "all-to-all"
)");
  const auto check = run_fabperf({"plan", "check", plan});
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("17 steps"), std::string::npos) << check.out;

  const std::string results = temp_path("every.jsonl");
  const auto r = run_fabperf({"run", plan, "--results", results}, 120s);
  std::cout << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("preflight: ok"), std::string::npos) << r.out;
  const auto lines = read_lines(results);
  ASSERT_GE(lines.size(), 19u);
  const json& head = lines.front();
  EXPECT_EQ(head["type"], "plan");
  EXPECT_EQ(head["schema"], "fabperf.plan-results");
  EXPECT_EQ(head["version"], 1);
  EXPECT_EQ(head["steps_total"], 17);
  EXPECT_EQ(head["plan"]["hosts"].size(), 4u);
  std::map<std::string, std::string> names;
  for (const auto& h : head["plan"]["hosts"]) names[h["address"]] = h["name"];

  const std::map<std::string, std::set<std::string>> expect{
      {"bip/0", {"a->c", "a->d", "b->c", "b->d"}},
      {"pairs/0", {"a->b", "d->c"}},
      {"evr/0", {"a->b", "a->c", "a->d"}},
      {"evr/3", {"d->a", "d->b", "d->c"}},
      {"halves/0", {"a->c", "a->d", "b->c", "b->d"}},
      {"matrix/0", {"a->d", "b->c"}},  // circle method, round 0: the fixed node d meets a, b meets c
      {"ring/0", {"a->b", "b->c", "c->d", "d->a"}},
      {"incast/0", {"a->b", "c->b", "d->b"}},
      {"bcast/0", {"c->a", "c->b", "c->d"}},
      {"a2a/0", {"a->b", "a->c", "a->d", "b->a", "b->c", "b->d", "c->a", "c->b", "c->d", "d->a", "d->b", "d->c"}},
  };
  std::set<std::string> matrix;
  int steps = 0, kpis = 0;
  for (const auto& l : lines) {
    if (l["type"] == "step") {
      ++steps;
      EXPECT_EQ(l["status"], "done") << l.dump();
      EXPECT_EQ(l["index"], steps - 1);
      EXPECT_GT(l["duration_s"].get<double>(), 0.9);
      const auto flows = measured_flows(l, names);
      const std::string id = l["id"];
      if (expect.count(id)) {
        EXPECT_EQ(flows, expect.at(id)) << id;
      }
      if (l["test"] == "matrix") {
        EXPECT_LE(flows.size(), 2u);
        for (const auto& f : flows) EXPECT_TRUE(matrix.insert(f).second) << f;
      }
    } else if (l["type"] == "kpi") {
      ++kpis;
      EXPECT_TRUE(l["pass"].get<bool>()) << l.dump();
      EXPECT_EQ(l["kpi"], "min-pair-mbps");
    }
  }
  EXPECT_EQ(steps, 17);
  EXPECT_EQ(matrix.size(), 12u);
  // One check per pair per step: 4+2+12+4+12+4+3+3+12.
  EXPECT_EQ(kpis, 56);
  EXPECT_EQ(lines.back()["type"], "end");
  EXPECT_EQ(lines.back()["exit_code"], 0);
  EXPECT_TRUE(lines.back()["passed"].get<bool>());
}

TEST(Plans, PatternFromCommandLineAndKpiFailureExitsOne) {
  const std::string results = temp_path("evr.jsonl");
  const auto r =
      run_fabperf({"run", "--local", "3", "--pattern", "each-vs-rest", "--time", "0.5", "--mode", "stream", "--kpi",
                   "min-node-mbps=1e9", "--kpi", "min-pair-mbps=1", "--results", results, "--no-preflight"},
                  60s);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("3 steps, estimated"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL min-node-mbps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KPI FAILED"), std::string::npos) << r.out;
  const auto lines = read_lines(results);
  std::set<std::string> node_failed;
  int pair_checks = 0;
  for (const auto& l : lines) {
    if (l["type"] != "kpi") continue;
    if (l["kpi"] == "min-pair-mbps") {
      // Judged for every pair of every step. Whether 1 MB/s arrived in a 0.4 s window is up to the
      // host (under TSan on 2 cores a starved pair once read below it): not asserted.
      ++pair_checks;
      EXPECT_EQ(l["scope"], "pair");
      continue;
    }
    EXPECT_EQ(l["kpi"], "min-node-mbps");
    EXPECT_EQ(l["scope"], "node");
    EXPECT_EQ(l["op"], ">=");
    EXPECT_FALSE(l["pass"].get<bool>()) << l.dump();  // 10^9 MB/s: no node can pass
    node_failed.insert(l["subject"].get<std::string>());
  }
  EXPECT_EQ(node_failed, (std::set<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(pair_checks, 6);  // 2 pairs x 3 steps
  EXPECT_EQ(lines.back()["exit_code"], 1);
}

TEST(Plans, InterruptedPlanResumesWithoutRerunningFinishedSteps) {
  AgentProcess a, b, c;
  const std::string plan = temp_path("resume.toml");
  write_file(plan, hosts_toml({&a, &b, &c}) + R"(
[[tests]]
name = "m"
pattern = "all-pairs"
time = 1
mode = "stream"
kpis = { min-pair-mbps = 1 }
)");
  const std::string results = temp_path("resume.jsonl");
  const int coord = spawn_fabperf({"run", plan, "--results", results, "--no-preflight"}, temp_path("resume.out"),
                                  temp_path("resume.err"));
  // Interrupt once two steps are on disk.
  for (int i = 0; i < 300; ++i) {
    int n = 0;
    for (const auto& l : read_lines(results)) n += l["type"] == "step" ? 1 : 0;
    if (n >= 2) break;
    std::this_thread::sleep_for(50ms);
  }
  ::kill(coord, SIGINT);
  int st = 0;
  ASSERT_EQ(::waitpid(coord, &st, 0), coord);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3)
      << read_file(temp_path("resume.out")) << read_file(temp_path("resume.err"));
  auto lines = read_lines(results);
  std::set<std::string> done_before;
  for (const auto& l : lines) {
    if (l["type"] == "step" && l["status"] == "done") done_before.insert(l["id"]);
  }
  ASSERT_EQ(lines.back()["type"], "end");
  EXPECT_TRUE(lines.back()["interrupted"].get<bool>());
  EXPECT_EQ(lines.back()["exit_code"], 3);
  ASSERT_GE(done_before.size(), 2u);
  ASSERT_LT(done_before.size(), 6u);
  const std::size_t before = lines.size();

  const auto r = run_fabperf({"run", plan, "--resume", results, "--no-preflight"}, 60s);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("done before"), std::string::npos) << r.out;
  lines = read_lines(results);
  std::set<std::string> rerun, all_done;
  for (std::size_t i = before; i < lines.size(); ++i) {
    if (lines[i]["type"] == "step") rerun.insert(lines[i]["id"]);
  }
  for (const auto& id : rerun) EXPECT_FALSE(done_before.count(id)) << id << " ran twice";
  for (const auto& l : lines) {
    if (l["type"] == "step" && l["status"] == "done") all_done.insert(l["id"]);
  }
  EXPECT_EQ(all_done.size(), 6u);
  int kpis = 0;
  for (std::size_t i = before; i < lines.size(); ++i) kpis += lines[i]["type"] == "kpi" ? 1 : 0;
  EXPECT_EQ(kpis, 6);  // judged over all six steps, old and new
  EXPECT_EQ(lines.back()["exit_code"], 0);

  // The same results file with a changed plan is refused.
  write_file(plan, hosts_toml({&a, &b, &c}) + "[[tests]]\nname = \"m\"\npattern = \"all-pairs\"\ntime = 2\n");
  const auto r2 = run_fabperf({"run", plan, "--resume", results, "--no-preflight"}, 30s);
  EXPECT_EQ(r2.exit_code, 2);
  EXPECT_NE(r2.err.find("different plan"), std::string::npos) << r2.err;
}

TEST(Plans, MalformedPlansGiveFileLineAndField) {
  const std::string p = temp_path("bad.toml");
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases{
      {"[[hosts]]\nname = \"a\"\naddress = \"127.0.0.1:1\"\n[[hosts]]\nname = \"b\"\naddress = \"127.0.0.1:2\"\n"
       "[[tests]]\nname = \"t\"\npattern = \"ring\"\nthreads = \"many\"\n",
       p + ":10: field 'threads': "},
      {"[[hosts]]\nname = \"a\"\naddress = \"127.0.0.1:1\"\n[[tests]]\nname = \"t\"\npattern = \"ring\"\n",
       p + ":4: field 'pattern': "},
      {"[[hosts]]\nname = \"a\"\naddress = \"127.0.0.1:1\"\n\n[[tests]]\nname = \"t\"\npattern = \"ring\"\ntim = 5\n",
       p + ":8: field 'tim': unknown test field"},
      {"[[hosts]]\nname = \"a\"\naddress = 7\n", p + ":3: field 'address': expected a string, got an integer"},
      {"hosts = [\n", p + ":1:11: Error while parsing array: encountered end-of-file"},
  };
  for (const auto& c : cases) {
    write_file(p, c.text);
    const auto r = run_fabperf({"plan", "check", p});
    EXPECT_EQ(r.exit_code, 2) << c.text;
    EXPECT_EQ(r.err.rfind("fabperf: " + c.expect, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    const auto run = run_fabperf({"run", p});
    EXPECT_EQ(run.exit_code, 2);
  }
  const auto missing = run_fabperf({"plan", "check", temp_path("nonexistent.toml")});
  EXPECT_EQ(missing.exit_code, 2);
  // A plan sets its own knobs: a command-line one would be ignored silently.
  write_file(p,
             "[[hosts]]\nname = \"a\"\naddress = \"127.0.0.1:1\"\n[[hosts]]\nname = \"b\"\naddress = \"127.0.0.1:2\"\n"
             "[[tests]]\nname = \"t\"\npattern = \"ring\"\n");
  const auto r = run_fabperf({"run", p, "--time", "3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--time: not with a plan file"), std::string::npos) << r.err;
}

TEST(Plans, UnreachableAgentIsInfrastructureFailure) {
  AgentProcess a, b;
  // A port nobody listens on: bind and close one.
  const std::string plan = temp_path("dead.toml");
  write_file(plan, hosts_toml({&a, &b}) +
                       "[[hosts]]\nname = \"dead\"\naddress = \"127.0.0.1:9\"\n"
                       "[[tests]]\nname = \"t\"\npattern = \"each-vs-rest\"\ntime = 0.5\n");
  const auto pf = run_fabperf({"run", plan, "--results", temp_path("dead1.jsonl"), "--connect-timeout", "1"}, 60s);
  EXPECT_EQ(pf.exit_code, 3) << pf.out << pf.err;
  EXPECT_NE(pf.out.find("dead: "), std::string::npos) << pf.out;
  EXPECT_NE(pf.out.find("preflight: FAILED"), std::string::npos) << pf.out;

  const std::string results = temp_path("dead2.jsonl");
  const auto r = run_fabperf({"run", plan, "--results", results, "--connect-timeout", "1", "--no-preflight"}, 60s);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  const auto lines = read_lines(results);
  int failed = 0;
  for (const auto& l : lines) {
    if (l["type"] == "step" && l["status"] == "failed") {
      ++failed;
      EXPECT_NE(l["error"].get<std::string>().find("127.0.0.1:9"), std::string::npos) << l.dump();
      EXPECT_FALSE(l.contains("result"));
    }
  }
  EXPECT_EQ(failed, 3);  // every step involves the dead host
  EXPECT_EQ(lines.back()["exit_code"], 3);
}

TEST(Plans, PreflightReportsOnLoopback) {
  const auto ok = run_fabperf({"preflight", "--local", "2"}, 60s);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("preflight: ok"), std::string::npos) << ok.out;
  // 64M, more than this host's rmem_max: named per node, with the sysctl that fixes it.
  if (std::stoull(read_file("/proc/sys/net/core/rmem_max")) >= (64u << 20))
    GTEST_SKIP() << "rmem_max is already >= 64M here";
  const auto r = run_fabperf({"preflight", "--local", "3", "--socksize", "64M"}, 60s);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("all 6 ordered pairs opened a data connection"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("n2: net.core.rmem_max"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sysctl -w net.core.rmem_max=67108864"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wall clocks agree"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every test interface has MTU 65536"), std::string::npos) << r.out;
}
