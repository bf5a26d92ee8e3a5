// The nsdperf-compatible shell through the real binary.
#include <fabperf/core/build_config.hpp>
#include "integration/harness.hpp"

#include <gtest/gtest.h>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>

using namespace fabperf::test;
using namespace std::chrono_literals;

namespace {
std::string script(const std::string& name, const std::string& text) {
  const std::string p = temp_path(name);
  std::ofstream(p) << text;
  return p;
}

// The regex IBM-style wrappers use on nsdperf's result line.
const std::regex kResultLine(
    R"((\d+)-(\d+) (write|read|nwrite|swrite|sread|rw) (\d+) MB/sec \((\d+) msg/sec\), cli (\d+)% srv (\d+)%, time (\d+), buff (\d+)(, sock \d+)?(, th \d+)?(, parallel \d+)?)");
}  // namespace

TEST(Shell, ScriptRunsEveryTestKindWithNsdperfOutput) {
  AgentProcess s, c1, c2;
  const std::string in = script("all.nsd",
                                "# a comment line\n"
                                "server " +
                                    s.address() +
                                    "\n"
                                    "client " +
                                    c1.address() + " " + c2.address() +
                                    "  # trailing comment\n"
                                    "ttime 1; buffsize 256K; th 4 / par 1\n"
                                    "verify on\n"
                                    "test write read nwrite swrite sread rw\n"
                                    "status\n"
                                    "plot " +
                                    temp_path("plot.dat") +
                                    "\n"
                                    "quit\n"
                                    "test write\n");  // after quit: never runs
  const auto r = run_fabperf({"shell", "-i", in}, 120s);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("Test time set to 1 seconds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Buffer size set to 262144 bytes"), std::string::npos);
  EXPECT_NE(r.out.find("Data verification on"), std::string::npos);
  int results = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), kResultLine), end; it != end; ++it) {
    const auto& m = *it;
    EXPECT_EQ(m[1], "2");  // clients
    EXPECT_EQ(m[2], "1");  // servers
    EXPECT_GT(std::stoll(m[4]), 0) << m[0];
    EXPECT_EQ(m[8], "1");
    EXPECT_EQ(m[9], "262144");
    ++results;
  }
  EXPECT_EQ(results, 6) << r.out;
  // One "network delay times" block per client per test, in nsdperf's layout.
  const std::regex delay(
      R"((\S+) network delay times \(average [\d.]+ msec, median [\d.]+ msec, std deviation [\d.]+ msec\)\n     msec  nevents\n(\s+\d+\s+\d+\n)+)");
  int blocks = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), delay), end; it != end; ++it) ++blocks;
  EXPECT_EQ(blocks, 12) << r.out;
  EXPECT_EQ(r.out.find("verification failed"), std::string::npos) << r.out;
  EXPECT_NE(read_file(temp_path("plot.dat")).find("# t_s"), std::string::npos);
  EXPECT_NE(r.out.find("servers: " + s.address()), std::string::npos);
}

TEST(Shell, HistOnPrintsBlockTransmitTimes) {
  AgentProcess s, c;
  const auto r = run_fabperf(
      {"shell", "server", s.address(), ";", "client", c.address(), ";", "ttime", "1;", "hist", "on;", "test", "read"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(
          R"(\S+ block transmit times \(average [\d.]+ msec, median [\d.]+ msec, std deviation [\d.]+ msec\)\n     msec  nevents\n)")))
      << r.out;
  EXPECT_NE(r.out.find("block transmit times, fine buckets"), std::string::npos);
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n1-1 read \d+ MB/sec)")));
}

TEST(Shell, ScriptStopsAtTheFirstErrorWithNonZeroExit) {
  const std::string in = script("bad.nsd", "ttime 2\nbogus 1\nttime 3\n");
  const auto r = run_fabperf({"shell", "-i", in});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("Unknown command 'bogus'"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("Test time set to 2 seconds"), std::string::npos);
  EXPECT_EQ(r.out.find("Test time set to 3 seconds"), std::string::npos);
}

// nsdperf's names of test settings are described by the settings table, default included.
TEST(Shell, HelpListsEveryCommand) {
  const auto r = run_fabperf({"shell", "help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"ttime SECONDS        test time in seconds (default 10)",
                           "buffsize SIZE        block size, 4K..16M (default 4M)",
                           "threads N            tester threads per client (rpc mode) (default 4)",
                           "verify on|off        receivers check every byte against the sent pattern (default off)",
                           "parallel N ", "socksize SIZE|auto ", "server HOST...", "killall"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  // What the help offers works: socksize auto, sized from the links as `run --socksize auto` is.
  AgentProcess s, c;
  const std::string in = script(
      "auto.nsd", "server " + s.address() + "\nclient " + c.address() + "\nttime 1\nsocksize auto\ntest write\n");
  const auto a = run_fabperf({"shell", "-i", in}, 60s);
  ASSERT_EQ(a.exit_code, 0) << a.err << a.out;
  EXPECT_NE(a.out.find("Socket buffer size set to auto"), std::string::npos) << a.out;
  EXPECT_TRUE(std::regex_search(a.out, kResultLine)) << a.out;
}

TEST(Shell, BadValuesAndAmbiguityAreOneLineErrors) {
  struct Case {
    const char* cmd;
    const char* msg;
  };
  for (const Case& c :
       {Case{"buffsize 1K", "Buffer size 1024 out of range"}, Case{"threads 0", "threads 0: out of range"},
        Case{"ttime x", "not a whole number"}, Case{"s 1", "Ambiguous command 's'"},
        Case{"hist maybe", "Usage: hist on|off"}, Case{"rdma all", "not available"},
        Case{"test", "Need at least one server and one client"}, Case{"test swim", "Unknown test 'swim'"},
        Case{"server no-such-host.invalid", "Cannot find address for host"},
        Case{"delete 127.0.0.1:9", "is not a node"}, Case{"source /nonexistent", "Cannot open /nonexistent"},
        Case{"plot /tmp/x", "No test has run yet"}, Case{"killall", "killall: no nodes defined"},
        Case{"kill", "Usage: kill HOST..."}}) {
    const auto r = run_fabperf({"shell", c.cmd});
    EXPECT_EQ(r.exit_code, 2) << c.cmd;
    EXPECT_NE(r.err.find(c.msg), std::string::npos) << c.cmd << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.cmd << ": " << r.err;
  }
}

TEST(Shell, PromptContinuesAfterErrorsAndAbbreviationsWork) {
  const std::string in = script("interactive.txt",
                                "ttim 4\nnonsense\nbuf 64K\nrdma off\nusecm on\nsinl off\nmaxrdma 2\n"
                                "debug 0\nversion\nhelp\nreset\nexit\n");
  // Not -i: commands arrive on stdin (as at the prompt), so an error does not stop the shell.
  const std::string out = temp_path("interactive.out"), err = temp_path("interactive.err");
  const std::string cmd = std::string(fabperf_bin()) + " shell < " + in + " > " + out + " 2> " + err;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string o = read_file(out);
  EXPECT_NE(o.find("Test time set to 4 seconds"), std::string::npos) << o;
  EXPECT_NE(o.find("Buffer size set to 65536 bytes"), std::string::npos) << o;
  EXPECT_NE(o.find("RDMA off"), std::string::npos);
  EXPECT_NE(o.find("usecm on"), std::string::npos);
  if (FABPERF_HAVE_RDMA) {
    EXPECT_NE(o.find("usecm on (used once rdma is on"), std::string::npos) << o;
  }
  EXPECT_NE(o.find("sinline off: no effect: fabperf's RDMA requests and replies carry no payload"), std::string::npos)
      << o;
  EXPECT_NE(o.find("maxrdma 2: no effect"), std::string::npos) << o;
  EXPECT_NE(o.find("fabperf "), std::string::npos);
  EXPECT_NE(o.find("Reset to defaults"), std::string::npos);
  EXPECT_NE(read_file(err).find("Unknown command 'nonsense'"), std::string::npos);
}
