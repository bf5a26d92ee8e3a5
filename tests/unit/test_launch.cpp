// The launchers' pure parts: quoting, the remote command, ssh argv, error summaries, ready lines,
// scontrol and srun --label parsing.
#include <fabperf/launch/launch.hpp>

#include <gtest/gtest.h>
#include <algorithm>

using namespace fabperf::launch;

TEST(Launch, ShellQuoteSurvivesQuotesAndSpaces) {
  EXPECT_EQ(shell_quote("plain"), "'plain'");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
}

TEST(Launch, RemoteCommandListensWhereSshArrivedAndTakesTheKeyOnStdin) {
  SshOptions o;
  o.agent_path = "/opt/fab perf/fabperf";
  const auto cmd = ssh_remote_command(o);
  EXPECT_NE(cmd.find("set -- $SSH_CONNECTION;"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("exec '/opt/fab perf/fabperf' agent"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--listen \"[${3:-::}]:0\""), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--key-stdin --exit-on-stdin-eof"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--ready-fd 1"), std::string::npos) << cmd;
  o.agent_listen = "10.0.0.7";
  o.agent_port = 6700;
  EXPECT_NE(ssh_remote_command(o).find("--listen '[10.0.0.7]:6700'"), std::string::npos);
}

TEST(Launch, SshArgvIsBatchModeWithTheHostAfterTheOptions) {
  SshOptions o;
  o.ssh_command = {"ssh", "-F", "/dev/null"};
  o.extra = {"-p2222"};
  o.timeout = std::chrono::milliseconds(12000);
  const auto argv = ssh_argv(o, "node7");
  ASSERT_GE(argv.size(), 10u);
  EXPECT_EQ(argv[0], "ssh");
  EXPECT_EQ(argv[2], "/dev/null");
  auto has = [&](const std::string& a) { return std::find(argv.begin(), argv.end(), a) != argv.end(); };
  EXPECT_TRUE(has("BatchMode=yes"));
  EXPECT_TRUE(has("ConnectTimeout=12"));
  EXPECT_TRUE(has("-T"));
  EXPECT_EQ(argv[argv.size() - 2], "node7");
  EXPECT_EQ(argv[argv.size() - 3], "--");
  EXPECT_EQ(argv[argv.size() - 4], "-p2222");
}

TEST(Launch, StderrSummaryKeepsTheLastLines) {
  EXPECT_EQ(stderr_summary(""), "(no error output)");
  EXPECT_EQ(stderr_summary("ssh: connect to host h port 22: Connection refused\r\n"),
            "ssh: connect to host h port 22: Connection refused");
  EXPECT_EQ(stderr_summary("a\n\nb\nc\nd\n"), "b / c / d");
  EXPECT_LE(stderr_summary(std::string(1000, 'x')).size(), 400u);
}

TEST(Launch, ReadyPort) {
  EXPECT_EQ(ready_port("LISTENING 127.0.0.1:6668"), 6668);
  EXPECT_EQ(ready_port("LISTENING [::1]:41234"), 41234);
  EXPECT_EQ(ready_port("LISTENING [::]:0"), 0);
  EXPECT_EQ(ready_port("hello from .bashrc"), 0);
  EXPECT_EQ(ready_port("LISTENING host:99999"), 0);
  EXPECT_EQ(ready_port("LISTENING host:12a"), 0);
}

TEST(Launch, NodeAddrsFromScontrol) {
  const auto m = parse_node_addrs(
      "NodeName=n1 Arch=x86_64 CoresPerSocket=1 NodeAddr=127.0.0.11 NodeHostName=localhost\n"
      "NodeName=n2 Arch=x86_64 NodeAddr=127.0.0.12 NodeHostName=localhost\n"
      "NodeName=n3 NodeHostName=localhost\n");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at("n1"), "127.0.0.11");
  EXPECT_EQ(m.at("n2"), "127.0.0.12");
}

TEST(Launch, SrunLabels) {
  auto l = parse_labelled("0: NODE n1");
  EXPECT_EQ(l.task, 0);
  EXPECT_EQ(l.text, "NODE n1");
  l = parse_labelled(" 12: LISTENING [::]:4000");
  EXPECT_EQ(l.task, 12);
  EXPECT_EQ(l.text, "LISTENING [::]:4000");
  EXPECT_EQ(parse_labelled("srun: error: x").task, -1);
  EXPECT_EQ(parse_labelled("").task, -1);
}
