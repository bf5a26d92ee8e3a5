// Every test setting in every mode, through the real binary: each one reaches the TestSpec the
// agents get (a result's "settings") or is refused with an error that names it. The settings
// come from the one table (include/fabperf/core/settings.hpp), so a setting added there without a
// sample here fails this test: nothing can be dropped silently, now or later.
#include "integration/harness.hpp"

#include <fabperf/core/settings.hpp>

#include <gtest/gtest.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

using namespace fabperf;
using namespace fabperf::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A value for a setting and what its key in "settings" must then hold. Two groups run together
// (A and B) because some settings exclude each other (verify / skip-rx-copy, cpus / no-affinity,
// send-method write / zerocopy); RDMA-only settings cannot run here and must be refused on TCP.
struct Sample {
  std::string value;  // command-line / shell text; "" for a flag
  std::string toml;   // the plan file's value
  json want;          // settings[key]
  char group;         // 'A', 'B', or 'R' (RDMA only: refused on TCP)
};

const std::map<std::string, Sample>& samples() {
  static const std::map<std::string, Sample> s{
      {"test", {"write", "\"write\"", "write", 'A'}},
      {"mode", {"stream", "\"stream\"", "stream", 'A'}},
      {"transport", {"tcp", "\"tcp\"", "tcp", 'A'}},
      {"time", {"2", "2", 2'000'000'000LL, 'A'}},
      {"buffsize", {"256K", "\"256K\"", 262144, 'A'}},
      {"socksize", {"1M", "\"1M\"", 1048576, 'A'}},
      {"threads", {"2", "2", 2, 'A'}},
      {"parallel", {"2", "2", 2, 'A'}},
      {"warmup", {"0.4", "0.4", 400'000'000LL, 'A'}},
      {"cooldown", {"0.3", "0.3", 300'000'000LL, 'A'}},
      {"verify", {"", "true", true, 'A'}},
      {"send-method", {"write", "\"write\"", "write", 'A'}},
      {"congestion", {"reno", "\"reno\"", "reno", 'A'}},
      {"rate", {"1G", "\"1G\"", 1073741824, 'A'}},
      {"busy-poll", {"10", "10", 10, 'A'}},
      {"notsent-lowat", {"1M", "\"1M\"", 1048576, 'A'}},
      {"cpus", {"0", "[0]", json::array({0}), 'A'}},
      {"spread-ports", {"", "true", true, 'A'}},
      {"zerocopy", {"", "true", true, 'B'}},
      {"skip-rx-copy", {"", "true", true, 'B'}},
      {"no-affinity", {"", "true", true, 'B'}},
      {"delay-probe", {"off", "\"off\"", 0, 'B'}},  // no probe connection: the counts still agree
      {"rdma-device", {"rxe0", "\"rxe0\"", "rxe0", 'R'}},
      {"gid-index", {"1", "1", 1, 'R'}},
      {"rdma-verb", {"send", "\"send\"", "send", 'R'}},
      {"qdepth", {"8", "8", 8, 'R'}},
      {"inline", {"64", "64", 64, 'R'}},
      {"cq-mod", {"4", "4", 4, 'R'}},
      {"rdma-events", {"", "true", true, 'R'}},
      {"rdma-cm", {"", "true", true, 'R'}},
  };
  return s;
}

const Sample& sample(const Setting& st) {
  const auto it = samples().find(st.name);
  if (it == samples().end()) {
    ADD_FAILURE() << "setting '" << st.name << "' has no sample in test_settings_modes.cpp: add one (and make sure "
                  << "every mode applies or refuses it)";
    static const Sample none{};
    return none;
  }
  return it->second;
}

std::vector<std::string> cli_args(char group) {
  std::vector<std::string> a;
  for (const auto& st : spec_settings()) {
    const Sample& s = sample(st);
    if (s.group != group) continue;
    a.push_back(std::string("--") + st.name);
    if (st.kind == SettingKind::value) a.push_back(s.value);
  }
  if (group == 'B') {  // B's companions: a stream that can use zerocopy
    for (const char* x : {"--mode", "stream", "--time", "2", "--buffsize", "256K"}) a.push_back(x);
  }
  return a;
}

std::string toml_lines(char group) {
  std::string t;
  for (const auto& st : spec_settings()) {
    const Sample& s = sample(st);
    if (s.group == group) t += std::string(st.name) + " = " + s.toml + "\n";
  }
  if (group == 'B') t += "mode = \"stream\"\ntime = 2\nbuffsize = \"256K\"\n";
  return t;
}

void expect_settings(const json& settings, char group, const std::string& mode) {
  for (const auto& st : spec_settings()) {
    const Sample& s = sample(st);
    if (s.group != group) continue;
    ASSERT_TRUE(settings.contains(st.key)) << mode << ": no settings." << st.key;
    EXPECT_EQ(settings.at(st.key), s.want) << mode << ": " << st.name << " did not reach the spec";
  }
}

std::string write_plan(const std::string& name, const AgentProcess& a, const AgentProcess& b,
                       const std::string& knobs) {
  const std::string p = temp_path(name);
  std::ofstream(p) << "[[hosts]]\nname = \"a\"\naddress = \"" << a.address()
                   << "\"\n[[hosts]]\nname = \"b\"\naddress = \"" << b.address()
                   << "\"\n[[tests]]\nname = \"t\"\npattern = \"pairs\"\npairs = [\"a->b\"]\n"
                   << knobs;
  return p;
}

}  // namespace

TEST(SettingsModes, EverySettingHasASample) {
  for (const auto& st : spec_settings()) (void)sample(st);
  EXPECT_EQ(samples().size(), spec_settings().size()) << "a sample names a setting the table no longer has";
}

TEST(SettingsModes, RunAppliesEverySetting) {
  for (char g : {'A', 'B'}) {
    std::vector<std::string> args = {"run", "--local", "2", "--json", "-"};
    for (auto& a : cli_args(g)) args.push_back(a);
    const auto r = run_fabperf(args, 60s);
    ASSERT_EQ(r.exit_code, 0) << g << r.err << r.out;
    expect_settings(json::parse(r.out).at("settings"), g, std::string("run, group ") + g);
  }
}

TEST(SettingsModes, PatternAppliesEverySetting) {
  for (char g : {'A', 'B'}) {
    const std::string results = temp_path(std::string("settings-pattern-") + g + ".jsonl");
    std::vector<std::string> args = {"run",    "--local",   "2",     "--pattern",      "pairs",  "--pairs",
                                     "n2->n1", "--results", results, "--no-preflight", "--quiet"};
    for (auto& a : cli_args(g)) args.push_back(a);
    const auto r = run_fabperf(args, 60s);
    ASSERT_EQ(r.exit_code, 0) << g << r.err << r.out;
    const auto lines = read_lines(results);
    ASSERT_GE(lines.size(), 2u);
    expect_settings(lines[0].at("plan").at("tests").at(0).at("settings"), g, std::string("pattern plan, group ") + g);
    expect_settings(lines[1].at("result").at("settings"), g, std::string("pattern step, group ") + g);
  }
}

TEST(SettingsModes, PlanFileAppliesEverySetting) {
  AgentProcess a, b;
  for (char g : {'A', 'B'}) {
    const std::string plan = write_plan(std::string("settings-") + g + ".toml", a, b, toml_lines(g));
    const std::string results = temp_path(std::string("settings-plan-") + g + ".jsonl");
    const auto r = run_fabperf({"run", plan, "--results", results, "--no-preflight", "--quiet"}, 60s);
    ASSERT_EQ(r.exit_code, 0) << g << r.err << r.out;
    const auto lines = read_lines(results);
    ASSERT_GE(lines.size(), 2u);
    expect_settings(lines[1].at("result").at("settings"), g, std::string("plan, group ") + g);
  }
}

TEST(SettingsModes, ShellSetAppliesEverySetting) {
  AgentProcess s, c;
  for (char g : {'A', 'B'}) {
    std::string script = "server " + s.address() + "\nclient " + c.address() + "\n";
    // B's companions first: each 'set' is checked against the settings so far (zerocopy: stream).
    if (g == 'B') script += "set mode stream\nset time 2\nset buffsize 256K\n";
    json want = json::object();
    for (const auto& st : spec_settings()) {
      const Sample& x = sample(st);
      if (x.group != g || std::string_view(st.name) == "test") continue;  // the test command chooses the test
      script += std::string("set ") + st.name + " " + (st.kind == SettingKind::flag ? "on" : x.value) + "\n";
      want[st.name] = x.want;
    }
    script += "status\ntest write\n";
    const std::string path = temp_path(std::string("settings-") + g + ".nsd");
    std::ofstream(path) << script;
    const auto r = run_fabperf({"shell", "-i", path}, 60s);
    ASSERT_EQ(r.exit_code, 0) << g << r.err << r.out;
    const auto line = r.out.substr(r.out.find("set:"));
    for (const auto& [name, v] : want.items()) {
      EXPECT_NE(line.find(" " + name + "=" + v.dump()), std::string::npos)
          << "shell, group " << g << ": " << name << "\n"
          << line;
    }
    EXPECT_NE(r.out.find(" MB/sec ("), std::string::npos) << "shell, group " << g << ": the test did not run\n"
                                                          << r.out;
  }
}

// A setting the test's transport does not use is refused by name in every mode, before anything
// runs; so is every option given beside a plan file.
TEST(SettingsModes, InapplicableSettingsAreRefusedByName) {
  AgentProcess a, b;
  const std::string plan = write_plan("settings-ok.toml", a, b, "time = 1\n");
  for (const auto& st : spec_settings()) {
    const Sample& s = sample(st);
    std::vector<std::string> given = {std::string("--") + st.name};
    if (st.kind == SettingKind::value) given.push_back(s.value);
    // Beside a plan file: refused, whatever the setting.
    std::vector<std::string> with_plan = {"run", plan};
    with_plan.insert(with_plan.end(), given.begin(), given.end());
    const auto rp = run_fabperf(with_plan, 30s);
    EXPECT_EQ(rp.exit_code, 2) << st.name << rp.err;
    EXPECT_NE(rp.err.find(std::string("--") + st.name + ": not with a plan file"), std::string::npos) << rp.err;
    if (s.group != 'R') continue;
    const std::string want =
        std::string("--") + st.name + ": RDMA (--transport rdma) only (this test's transport is tcp)";
    // run and pattern (both --local), a plan file, the shell.
    for (const auto& mode :
         {std::vector<std::string>{"run", "--local", "2"},
          std::vector<std::string>{"run", "--local", "2", "--pattern", "pairs", "--pairs", "n2->n1"}}) {
      auto args = mode;
      args.insert(args.end(), given.begin(), given.end());
      const auto r = run_fabperf(args, 30s);
      EXPECT_EQ(r.exit_code, 2) << st.name << r.err;
      EXPECT_NE(r.err.find(want), std::string::npos) << st.name << ": " << r.err;
    }
    const std::string bad =
        write_plan(std::string("settings-") + st.name + ".toml", a, b, std::string(st.name) + " = " + s.toml + "\n");
    const auto rf = run_fabperf({"plan", "check", bad}, 30s);
    EXPECT_NE(rf.exit_code, 0) << st.name;
    EXPECT_NE(rf.err.find(want), std::string::npos) << st.name << ": " << rf.err;
    const std::string sh = temp_path(std::string("settings-") + st.name + ".nsd");
    std::ofstream(sh) << "set " << st.name << " " << (st.kind == SettingKind::flag ? "on" : s.value) << "\n";
    const auto rs = run_fabperf({"shell", "-i", sh}, 30s);
    EXPECT_NE((rs.out + rs.err).find(want), std::string::npos) << st.name << ": " << rs.out << rs.err;
  }
  // The per-link options reach patterns too (a plan's `per-link`, `bind-dev`), and are refused by
  // what is wrong: --local's hosts have no link addresses.
  for (const auto& [opt, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--bind-dev", "lo+lo"}, "--bind-dev 'lo+lo': 2 devices for 0 links per host"},
           {{"--per-link", "sequential"}, "--per-link sequential: needs hosts with the same number of links"}}) {
    std::vector<std::string> args = {"run", "--local", "2", "--pattern", "pairs", "--pairs", "n2->n1"};
    args.insert(args.end(), opt.begin(), opt.end());
    const auto r = run_fabperf(args, 30s);
    EXPECT_EQ(r.exit_code, 2) << opt[0] << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  }
}
