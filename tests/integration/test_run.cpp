// End-to-end tests through the real binary: agents are separate processes on loopback.
#include "engine/tcp_internal.hpp"
#include "integration/harness.hpp"

#include <fabperf/report/report.hpp>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

using namespace fabperf::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

json run_json(const std::vector<std::string>& args, int expect_exit = 0) {
  std::vector<std::string> a = {"run"};
  a.insert(a.end(), args.begin(), args.end());
  a.push_back("--json");
  a.push_back("-");
  const auto r = run_fabperf(a, 60s);
  EXPECT_EQ(r.exit_code, expect_exit) << r.err;
  try {
    return json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "stdout is not JSON: " << e.what() << "\n" << r.out << "\n" << r.err;
    return json::object();
  }
}

// Client-counted and server-counted bytes over the whole test, per direction.
struct Totals {
  std::uint64_t client_tx{0}, client_rx{0}, server_tx{0}, server_rx{0};
};
Totals totals(const json& doc) {
  Totals t;
  for (const auto& c : doc["connections"]) {
    if (c["role"] == "client") {
      t.client_tx += c["tx_bytes_total"].get<std::uint64_t>();
      t.client_rx += c["rx_bytes_total"].get<std::uint64_t>();
    } else {
      t.server_tx += c["tx_bytes_total"].get<std::uint64_t>();
      t.server_rx += c["rx_bytes_total"].get<std::uint64_t>();
    }
  }
  return t;
}

}  // namespace

class TestKinds : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

namespace {
// threads > parallel: rpc testers share each connection and a receiver thread hands the replies
// out; threads <= parallel: each tester reads its own replies.
void expect_both_ends_count_the_same_bytes(const std::string& test, const std::string& mode,
                                           const std::string& parallel) {
  AgentProcess s1, c1, c2;
  const json doc =
      run_json({"--servers", s1.address(), "--clients", c1.address() + "," + c2.address(), "--test", test, "--mode",
                mode, "--time", "1.5", "--buffsize", "256K", "--threads", "2", "--parallel", parallel});
  ASSERT_TRUE(doc.contains("aggregate"));
  EXPECT_EQ(doc["schema"], "fabperf.result");
  EXPECT_EQ(doc["schema_version"], fabperf::kResultSchemaVersion);
  EXPECT_TRUE(doc["complete"].get<bool>()) << doc["findings"].dump();
  EXPECT_GT(doc["aggregate"]["mb_per_s"].get<double>(), 1.0);
  EXPECT_EQ(doc["clients"], 2);
  EXPECT_EQ(doc["servers"], 1);
  EXPECT_EQ(doc["pairs"].size(), 2u);
  const Totals t = totals(doc);
  // Every byte one end sent was received by the other: the stop is clean on both sides.
  EXPECT_EQ(t.client_tx, t.server_rx);
  EXPECT_EQ(t.client_rx, t.server_tx);
  if (test == "write") {
    EXPECT_GT(t.client_tx, 0u);
    EXPECT_EQ(t.client_rx, 0u);
  } else if (test == "read") {
    EXPECT_GT(t.client_rx, 0u);
    EXPECT_EQ(t.client_tx, 0u);
  } else {
    EXPECT_GT(t.client_rx, 0u);
    EXPECT_GT(t.client_tx, 0u);
  }
  // The aggregate is the sum of the pairs.
  double sum = 0;
  for (const auto& p : doc["pairs"]) sum += p["mb_per_s"].get<double>();
  EXPECT_NEAR(doc["aggregate"]["mb_per_s"].get<double>(), sum, 1e-6 * sum + 1e-9);
  if (mode == "rpc") {
    ASSERT_FALSE(doc["latency"].is_null());
    EXPECT_GT(doc["latency"]["count"].get<std::uint64_t>(), 0u);
    EXPECT_LE(doc["latency"]["p50_us"].get<double>(), doc["latency"]["p99_us"].get<double>());
    EXPECT_GT(doc["aggregate"]["msg_per_s"].get<double>(), 0.0);
  }
  const std::string summary = doc["summary"];
  EXPECT_EQ(summary.rfind("2-1 " + test + " ", 0), 0u) << summary;
  // /proc/net/snmp is readable here, so every node knows its host's retransmits over the window.
  for (const auto& n : doc["nodes"]) EXPECT_GE(n["retrans_segs"].get<std::int64_t>(), 0) << n.dump();
}
}  // namespace

TEST_P(TestKinds, BothEndsCountTheSameBytes) {
  const auto& [test, mode] = GetParam();
  expect_both_ends_count_the_same_bytes(test, mode, "1");
}

TEST(Run, RpcTestersThatShareNoConnectionReadTheirOwnReplies) {
  expect_both_ends_count_the_same_bytes("rw", "rpc", "2");
}

// More connections than a server gives a thread each: its threads poll several connections, and
// every request is still answered and counted at both ends.
TEST(Run, AnRpcServerOfMoreConnectionsThanThreadsAnswersThemAll) {
  expect_both_ends_count_the_same_bytes("rw", "rpc", std::to_string(fabperf::tcp::rpc_serve_threads() / 2 + 8));
}

INSTANTIATE_TEST_SUITE_P(Run, TestKinds,
                         ::testing::Combine(::testing::Values("write", "read", "rw"),
                                            ::testing::Values("rpc", "stream")),
                         [](const auto& pi) { return std::get<0>(pi.param) + "_" + std::get<1>(pi.param); });

TEST(Run, TextReportEndsWithNsdperfSummaryLine) {
  AgentProcess s, c;
  const auto r =
      run_fabperf({"run", "--servers", s.address(), "--clients", c.address(), "--time", "1", "--buffsize", "1M"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The line wrappers parse: "C-S test N MB/sec (M msg/sec), cli X% srv Y%, time T, buff B"
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(\n1-1 write \d+ MB/sec \(\d+ msg/sec\), cli \d+% srv \d+%, time 1, buff 1048576\n$)")))
      << r.out;
  EXPECT_NE(r.out.find("Pairs (client -> server)"), std::string::npos);
}

TEST(Run, LocalModeStartsAndStopsItsOwnAgents) {
  const auto r = run_fabperf({"run", "--local", "2", "--time", "1", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("1-1 write ", 0), 0u) << r.out;
}

TEST(Run, SecondCoordinatorGetsBusyNamingTheHolder) {
  AgentProcess s, c1, c2;
  const std::string out = temp_path("busy.out"), err = temp_path("busy.err");
  const int first =
      spawn_fabperf({"run", "--servers", s.address(), "--clients", c1.address(), "--time", "3"}, out, err);
  std::this_thread::sleep_for(1200ms);
  const auto second = run_fabperf({"run", "--servers", s.address(), "--clients", c2.address(), "--time", "1"});
  EXPECT_EQ(second.exit_code, 3) << second.err;
  EXPECT_NE(second.err.find("busy"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find(s.address()), std::string::npos) << second.err;
  int st = 0;
  ASSERT_EQ(::waitpid(first, &st, 0), first);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(err);
  // The holder's test was not disturbed and the agent serves the next test.
  const auto again = run_fabperf({"run", "--servers", s.address(), "--clients", c2.address(), "--time", "1", "-q"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

TEST(Run, UnreachableAgentIsNamedAndOthersReleased) {
  AgentProcess c;
  const auto r = run_fabperf({"run", "--servers", "127.0.0.1:1", "--clients", c.address(), "--time", "1"}, 30s);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("cannot reach agent 127.0.0.1:1: Connection refused"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  AgentProcess s;
  const auto ok = run_fabperf({"run", "--servers", s.address(), "--clients", c.address(), "--time", "1", "-q"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST(Run, NotAnAgentIsReportedAsWrongProtocol) {
  // A listener that answers with garbage: e.g. an HTTP server. Here: a socket that sends junk.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const int pid = ::fork();
  if (pid == 0) {
    // Child: python-free junk server on an ephemeral port, reporting the port through the pipe.
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 4);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    const std::uint16_t port = ntohs(a.sin_port);
    (void)!::write(p[1], &port, sizeof port);
    for (int i = 0; i < 2; ++i) {
      const int c = ::accept(fd, nullptr, nullptr);
      const char junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
      (void)!::write(c, junk, sizeof junk);
      ::sleep(1);
      ::close(c);
    }
    ::_exit(0);
  }
  std::uint16_t port = 0;
  ASSERT_EQ(::read(p[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  AgentProcess c;
  const auto r =
      run_fabperf({"run", "--servers", "127.0.0.1:" + std::to_string(port), "--clients", c.address(), "--time", "1"});
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("not a fabperf agent"), std::string::npos) << r.err;
}

TEST(Run, AgentKilledMidTestGivesPartialResultNotHang) {
  AgentProcess s1, s2, c;
  const std::string json_path = temp_path("killed.json");
  const std::string out = temp_path("killed.out"), err = temp_path("killed.err");
  const int coord = spawn_fabperf({"run", "--servers", s1.address() + "," + s2.address(), "--clients", c.address(),
                                   "--time", "4", "--mode", "stream", "--json", json_path},
                                  out, err);
  std::this_thread::sleep_for(2s);
  s2.kill(SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  int st = 0;
  bool exited = false;
  while (std::chrono::steady_clock::now() - t0 < 20s) {
    if (::waitpid(coord, &st, WNOHANG) == coord) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  if (!exited) {
    ::kill(coord, SIGKILL);
    ::waitpid(coord, &st, 0);
  }
  ASSERT_TRUE(exited) << "coordinator hung after an agent died";
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3) << read_file(err);
  const json doc = json::parse(read_file(json_path));
  EXPECT_FALSE(doc["complete"].get<bool>());
  bool saw_lost = false;
  for (const auto& n : doc["nodes"]) {
    if (n["node"] == s2.address()) {
      EXPECT_EQ(n["status"], "lost");
      saw_lost = true;
    } else {
      EXPECT_EQ(n["status"], "ok");
    }
  }
  EXPECT_TRUE(saw_lost);
  // The surviving pair was measured and reported.
  bool surviving_pair = false;
  for (const auto& p : doc["pairs"]) {
    if (p["server"] == 0) surviving_pair = p["mb_per_s"].get<double>() > 0;
  }
  EXPECT_TRUE(surviving_pair) << doc["pairs"].dump();
  EXPECT_NE(read_file(out).find("lost"), std::string::npos);
}

TEST(Run, InterruptedCoordinatorStillWritesResults) {
  AgentProcess s, c;
  const std::string json_path = temp_path("int.json");
  const int coord = spawn_fabperf({"run", "--servers", s.address(), "--clients", c.address(), "--time", "6", "--json",
                                   json_path, "--log-level", "info"},
                                  temp_path("int.out"), temp_path("int.err"));
  // The interrupt comes inside the window (it opens 0.9 s after set-up: start lead and warm-up), not
  // after a fixed time: under a sanitizer beside other tests, set-up alone can pass 2 s.
  for (int i = 0; i < 600 && read_file(temp_path("int.err")).find("agents set up in") == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(read_file(temp_path("int.err")).find("agents set up in"), std::string::npos)
      << read_file(temp_path("int.err"));
  std::this_thread::sleep_for(2000ms);
  ::kill(coord, SIGINT);
  int st = 0;
  ASSERT_EQ(::waitpid(coord, &st, 0), coord);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3);
  const json doc = json::parse(read_file(json_path));
  EXPECT_TRUE(doc["interrupted"].get<bool>());
  EXPECT_GT(doc["aggregate"]["mb_per_s"].get<double>(), 0.0);
}

// Issue 31: Ctrl-C during `run --repeat` leaves the finished trials' statistics as they were:
// the interrupted trial stays in the results file, marked, and compare lists it as excluded.
TEST(Run, CtrlCInARepeatLeavesTheFinishedTrialsStatistics) {
  AgentProcess s, c;
  const std::string trials = temp_path("rep.jsonl");
  const int coord = spawn_fabperf({"run", "--servers", s.address(), "--clients", c.address(), "--time", "1.5",
                                   "--warmup", "0", "--repeat", "5", "--no-preflight", "--results", trials},
                                  temp_path("rep.out"), temp_path("rep.err"));
  // The plan record and two trials written, then Ctrl-C inside the third.
  for (int i = 0; i < 300 && read_lines(trials).size() < 3; ++i) std::this_thread::sleep_for(100ms);
  ASSERT_EQ(read_lines(trials).size(), 3u) << read_file(temp_path("rep.err"));
  std::this_thread::sleep_for(700ms);
  ::kill(coord, SIGINT);
  int st = 0;
  ASSERT_EQ(::waitpid(coord, &st, 0), coord);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3) << st;
  const auto lines = read_lines(trials);
  ASSERT_EQ(lines.size(), 5u);  // plan, three steps, end
  EXPECT_EQ(lines[3]["status"], "interrupted") << lines[3].dump();
  EXPECT_EQ(lines[4]["type"], "end");
  const auto r = run_fabperf({"compare", trials, trials, "--json", "-"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json cmp = json::parse(r.out);
  bool aggregate = false;
  for (const auto& m : cmp["metrics"]) {
    if (m["kind"] != "aggregate") continue;
    aggregate = true;
    EXPECT_EQ(m["n_a"], 2);  // the two finished trials, not the interrupted one
    EXPECT_EQ(m["n_b"], 2);
  }
  EXPECT_TRUE(aggregate) << r.out;
  EXPECT_NE(cmp["notes"].dump().find(": interrupted"), std::string::npos) << cmp["notes"].dump();
  // FILE,FILE,... is one side, as --help and docs/statistics.md say (cxxopts once split it at the comma).
  const auto joined = run_fabperf({"compare", trials + "," + trials, trials, "--json", "-"});
  ASSERT_EQ(joined.exit_code, 0) << joined.err;
  const json joined_cmp = json::parse(joined.out);  // named: a loop over a temporary's member reads freed memory
  for (const auto& m : joined_cmp["metrics"]) {
    if (m["kind"] == "aggregate") {
      EXPECT_EQ(m["n_a"], 4);
    }
  }
  const auto three = run_fabperf({"compare", trials, trials, trials});
  EXPECT_EQ(three.exit_code, 2);
  EXPECT_NE(three.err.find("unexpected argument"), std::string::npos) << three.err;
}

struct BadArgs {
  std::vector<std::string> args;
  std::string expect;
};

void PrintTo(const BadArgs& b, std::ostream* os) {
  for (const auto& a : b.args) *os << a << ' ';
}

class CliErrors : public ::testing::TestWithParam<BadArgs> {};

TEST_P(CliErrors, OneLineExitTwoNothingStarted) {
  const auto& p = GetParam();
  std::vector<std::string> a = {"run"};
  a.insert(a.end(), p.args.begin(), p.args.end());
  const auto r = run_fabperf(a, 30s);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(p.expect), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Run, CliErrors,
    ::testing::Values(
        BadArgs{{"--local", "2", "--buffsize", "4Q"}, "--buffsize '4Q': unknown size suffix 'Q'"},
        BadArgs{{"--local", "2", "--buffsize", "1K"}, "--buffsize 1K: out of range"},
        BadArgs{{"--local", "2", "--threads", "0"}, "--threads 0: out of range"},
        BadArgs{{"--local", "2", "--time", "-1"}, "--time '-1': duration cannot be negative"},
        BadArgs{{"--local", "2", "--parallel", "x"}, "--parallel 'x': not a whole number"},
        BadArgs{{"--local", "2", "--test", "swim"}, "--test 'swim': unknown test"},
        BadArgs{{"--local", "2", "--frobnicate"}, "frobnicate"},
        BadArgs{{"--servers", "no-such-host.invalid", "--clients", "127.0.0.1"}, "does not resolve"},
        BadArgs{{"--servers", "127.0.0.1:7000", "--clients", "127.0.0.1:7000"}, "is also a server"},
        BadArgs{{"--servers", "127.0.0.1"}, "give --servers and --clients"},
        BadArgs{{"--local", "1"}, "--local 1: out of range"},
        BadArgs{{"--local", "2", "--transport", "carrier-pigeon"}, "--transport 'carrier-pigeon'"},
        BadArgs{{"--launch", "pdsh", "--servers", "a", "--clients", "b"}, "--launch 'pdsh': expected ssh or slurm"},
        BadArgs{{"--launch", "ssh", "--key-file", "/k", "--servers", "127.0.0.1", "--clients", "127.0.0.2"},
                "--key-file: not used with --launch"},
        BadArgs{{"--launch", "ssh", "--servers", "127.0.0.1", "--clients", "127.0.0.1"}, "is also a server"},
        BadArgs{{"--launch", "ssh", "--local", "2"}, "--launch: cannot be combined with --local"}),
    [](const auto& pi) { return "case" + std::to_string(pi.index); });

TEST(Run, StickyTestsKeepEachThreadOnOneServer) {
  AgentProcess s1, s2, c;
  const std::string servers = s1.address() + "," + s2.address();
  // One tester thread: write cycles over both servers, swrite stays with the first.
  const json cyc = run_json({"--servers", servers, "--clients", c.address(), "--test", "write", "--threads", "1",
                             "--time", "1", "--buffsize", "64K"});
  const json stk = run_json({"--servers", servers, "--clients", c.address(), "--test", "swrite", "--threads", "1",
                             "--time", "1", "--buffsize", "64K"});
  ASSERT_EQ(cyc["pairs"].size(), 2u);
  ASSERT_EQ(stk["pairs"].size(), 2u);
  EXPECT_GT(cyc["pairs"][0]["bytes"].get<std::uint64_t>(), 0u);
  EXPECT_GT(cyc["pairs"][1]["bytes"].get<std::uint64_t>(), 0u);
  const auto a = stk["pairs"][0]["bytes"].get<std::uint64_t>(), b = stk["pairs"][1]["bytes"].get<std::uint64_t>();
  EXPECT_TRUE((a > 0) != (b > 0)) << a << " " << b;
  EXPECT_EQ(stk["summary"].get<std::string>().rfind("1-2 swrite ", 0), 0u);
}

TEST(Run, VerifyChecksEveryByteAcrossPartialSendsAndReceives) {
  AgentProcess s, c;
  for (const char* mode : {"rpc", "stream"}) {
    for (const char* test : {"write", "read"}) {
      // An odd block size makes partial sends and receives straddle block boundaries.
      const json doc = run_json({"--servers", s.address(), "--clients", c.address(), "--test", test, "--mode", mode,
                                 "--time", "1", "--buffsize", "100003", "--verify"});
      ASSERT_TRUE(doc["verify"].is_object()) << mode << " " << test;
      EXPECT_EQ(doc["verify"]["errors"], 0) << mode << " " << test << " " << doc["findings"].dump();
      EXPECT_GT(doc["aggregate"]["bytes"].get<std::uint64_t>(), 10'000'000u) << mode << " " << test;
    }
  }
  const auto bad = run_fabperf({"run", "--local", "2", "--verify", "--skip-rx-copy"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("verify"), std::string::npos);
}

// The host running the suite has no RDMA device (real RDMA runs in the VM lab, label rdma): the
// RDMA transport must say what it looked for, or that the build lacks it, and start nothing.
TEST(Run, RdmaWithoutDeviceOrSupportFailsClearly) {
  if (std::filesystem::exists("/sys/class/infiniband") && !std::filesystem::is_empty("/sys/class/infiniband")) {
    GTEST_SKIP() << "this host has RDMA devices";
  }
  const auto r = run_fabperf({"run", "--local", "2", "--transport", "rdma", "--time", "1", "--quiet"});
  if (r.exit_code == 2) {
    EXPECT_NE(r.err.find("fabperf was built without RDMA support"), std::string::npos) << r.err;
  } else {
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("no RDMA device found"), std::string::npos) << r.err;
  }
}

// The JSON result is written as results arrive (docs/results-format.md): a coordinator killed
// after the start leaves the header on disk, and `fabperf report` names the file partial. The
// same agents then give a complete file that report reads.
TEST(Run, CoordinatorKilledMidTestLeavesAPartialResultThatReportNames) {
  AgentProcess s, c;
  const std::string json_path = temp_path("killed.json");
  const int coord =
      spawn_fabperf({"run", "--servers", s.address(), "--clients", c.address(), "--time", "4", "--json", json_path},
                    temp_path("killed.out"), temp_path("killed.err"));
  bool header = false;
  for (int i = 0; i < 100 && !header; ++i) {
    std::this_thread::sleep_for(100ms);
    header = read_file(json_path).find("\"nodes\": [") != std::string::npos;
  }
  ::kill(coord, SIGKILL);
  ::waitpid(coord, nullptr, 0);
  ASSERT_TRUE(header) << "no result header 10 s after the run began: " << read_file(temp_path("killed.err"));
  const std::string text = read_file(json_path);
  EXPECT_NE(text.find("\"schema\": \"fabperf.result\""), std::string::npos) << text.substr(0, 300);
  EXPECT_NE(text.find("\"settings\": {"), std::string::npos);
  const auto r = run_fabperf({"report", json_path}, 30s);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("a partial fabperf result"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0 complete node sections"), std::string::npos) << r.err;

  // The agents noticed the coordinator's death (their test was aborted); a full run now.
  std::this_thread::sleep_for(1500ms);
  const auto full = run_fabperf(
      {"run", "--servers", s.address(), "--clients", c.address(), "--time", "1", "--json", json_path, "--quiet"}, 60s);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const json doc = json::parse(read_file(json_path));
  EXPECT_EQ(doc.at("nodes").size(), 2u);
  EXPECT_TRUE(doc.at("complete").get<bool>());
  EXPECT_GT(doc.at("aggregate").at("bytes").get<std::uint64_t>(), 0u);
  const auto rep = run_fabperf({"report", json_path}, 30s);
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
}
