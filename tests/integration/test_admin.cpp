// Administration outside a test, through the real binary and real agents: the remote link
// inventory (`fabperf links HOST...`) and the shell's kill/killall (SHUTDOWN).
#include "integration/harness.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <nlohmann/json.hpp>
#include <thread>

using namespace fabperf::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// An address where nothing listens: a port the kernel gave us and we closed again.
std::string closed_port() {
  AgentProcess a;
  const std::string addr = a.address();
  a.kill(SIGKILL);
  a.wait_exit(5s);
  return addr;
}

}  // namespace

TEST(Links, RemoteInventoryFromTwoAgentsAsJsonAndTable) {
  AgentProcess a({"--key-file", key_file(1)}), b({"--key-file", key_file(1)});
  auto r = run_fabperf({"links", a.address(), b.address(), "--json", "--all", "--key-file", key_file(1)}, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.at("hosts").size(), 2u) << r.out;
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& h = j["hosts"][i];
    EXPECT_EQ(h.at("agent"), i == 0 ? a.address() : b.address());
    EXPECT_FALSE(h.at("hostname").get<std::string>().empty());
    EXPECT_GT(h.at("socket_limits").at("rmem_max").get<std::uint64_t>(), 0u);
    bool lo = false;
    for (const auto& l : h.at("links")) {
      if (l.at("name") == "lo") {
        lo = true;
        EXPECT_EQ(l.at("kind"), "loopback");
        EXPECT_NE(l.at("addresses").dump().find("127.0.0.1"), std::string::npos) << l.dump();
      }
    }
    EXPECT_TRUE(lo) << h.dump();
  }
  r = run_fabperf({"links", a.address(), "--all", "--key-file", key_file(1)}, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("== " + a.address() + " ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("interface"), std::string::npos);
  EXPECT_NE(r.out.find("socket limits: net.core.rmem_max"), std::string::npos);
}

TEST(Links, UnreachableHostIsNamedAndTheOthersStillPrinted) {
  AgentProcess a;
  const std::string dead = closed_port();
  const auto r = run_fabperf({"links", a.address(), dead, "--connect-timeout", "2"}, 30s);
  EXPECT_EQ(r.exit_code, 3) << r.err << r.out;
  EXPECT_NE(r.err.find("cannot reach agent " + dead), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(a.address()), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("== " + a.address()), std::string::npos) << r.out;
}

TEST(Links, WrongKeyIsAnAuthenticationFailureNamingTheAgent) {
  AgentProcess a({"--key-file", key_file(1)});
  const auto r = run_fabperf({"links", a.address(), "--key-file", key_file(2), "--json"}, 30s);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("authentication failed for " + a.address()), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("\"error\""), std::string::npos) << r.out;
}

TEST(ShellKill, KillallStopsEveryAgentCleanly) {
  AgentProcess s({"--key-file", key_file(1)}), c({"--key-file", key_file(1)});
  const auto r = run_fabperf(
      {"shell", "--key-file", key_file(1), "server " + s.address() + "; client " + c.address() + "; killall; status"},
      30s);
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("Killed " + s.address()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Killed " + c.address()), std::string::npos) << r.out;
  for (auto* a : {&s, &c}) {
    int status = -1;
    ASSERT_TRUE(a->wait_exit(5s, &status)) << a->address() << " still running";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
}

TEST(ShellKill, KillNamesOneAgentAndRefusalsAreReported) {
  AgentProcess a, b, guarded({"--no-remote-kill"});
  auto r = run_fabperf({"shell", "server " + a.address() + " " + b.address() + "; kill " + a.address()}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(a.wait_exit(5s));
  EXPECT_FALSE(b.wait_exit(500ms)) << "kill stopped an agent it did not name";
  r = run_fabperf({"shell", "kill " + guarded.address()}, 30s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("shutdown refused: this agent was started with --no-remote-kill"), std::string::npos) << r.err;
  EXPECT_FALSE(guarded.wait_exit(500ms));
  const std::string dead = closed_port();
  r = run_fabperf({"shell", "kill " + dead}, 30s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot reach agent " + dead), std::string::npos) << r.err;
}

// `fabperf report` counts no stop request, so Ctrl-C must end it at once: here it waits on a FIFO
// nobody writes to (as it would read a file of gigabytes for minutes); before, SIGINT was counted
// and the read carried on.
TEST(Report, CtrlCEndsAReportThatIsStillReading) {
  const std::string fifo = temp_path("results.fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int pid = spawn_fabperf({"report", fifo}, temp_path("fifo.out"), temp_path("fifo.err"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int st = 0;
  int done = 0;
  for (int i = 0; i < 50 && done == 0; ++i) {
    done = ::waitpid(pid, &st, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
  }
  ::unlink(fifo.c_str());
  ASSERT_EQ(done, pid) << "still running 5 s after SIGINT";
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT) << st;
}
