// Data-plane options through the real binary: --send-method sendfile (bytes verified end to
// end) and --socksize auto (runs; on loopback the speed is unknown, so the OS keeps sizing).
#include "integration/harness.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace fabperf::test;
using nlohmann::json;
using namespace std::chrono_literals;

TEST(SendMethod, SendfileFromAMemfdDeliversVerifiedBytes) {
  // 100K blocks: receive chunks straddle the sender's pattern period, as in the write path's test.
  const auto r = run_fabperf({"run", "--local", "2", "--mode", "stream", "--send-method", "sendfile", "--verify",
                              "--parallel", "2", "--time", "1", "--buffsize", "100K", "--json", "-"},
                             60s);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json doc = json::parse(r.out);
  EXPECT_TRUE(doc.at("complete").get<bool>()) << doc.at("findings").dump();
  EXPECT_EQ(doc.at("settings").at("send_method"), "sendfile");
  EXPECT_EQ(doc.at("verify").at("errors").get<std::uint64_t>(), 0u);
  EXPECT_GT(doc.at("aggregate").at("bytes").get<std::uint64_t>(), 10'000'000u) << doc.at("aggregate").dump();
}

// The trial the agent ran for `auto`: on the node that sent, both candidates moved bytes in the
// warm-up and the one it kept is named with its reason; or, on a loaded host where a call outlasted
// one arm's slices, the trial says it did not compare them and the first candidate ran. Over a
// test's send-method trials at least one compared both (`compared`, counted by the caller).
namespace {
void expect_send_trial(const json& doc, const std::string& what, int& compared) {
  int trials = 0;
  for (const auto& n : doc.at("nodes")) {
    for (const auto& t : n.at("trials")) {
      const std::string chosen = t.at("chosen");
      if (t.at("what") == "receive chunk") {  // blocks over 256 KiB: 256K against min(block, 1M)
        EXPECT_TRUE(chosen == "256K" || chosen == t.at("arms").at(1).at("name")) << what << t.dump();
      } else {
        ++trials;
        EXPECT_EQ(t.at("what"), "send method") << what;
        EXPECT_TRUE(chosen == "write" || chosen == "sendfile") << what << t.dump();
      }
      ASSERT_EQ(t.at("arms").size(), 2u) << what << t.dump();
      const std::string reason = t.at("reason");
      if (t.at("arms").at(0).at("mb_per_s") > 0.0 && t.at("arms").at(1).at("mb_per_s") > 0.0) {
        compared += t.at("what") == "send method" ? 1 : 0;
      } else {
        EXPECT_EQ(reason.rfind("not compared: ", 0), 0u) << what << t.dump();
        EXPECT_EQ(chosen, t.at("arms").at(0).at("name")) << what << t.dump();
      }
      EXPECT_FALSE(reason.empty()) << what;
    }
  }
  EXPECT_GE(trials, 1) << what << ": no node reports the send-method trial";
}
}  // namespace

TEST(SendMethod, AutoTriesWriteAndSendfileAndSaysWhichRan) {
  // The two methods alternate during the warm-up on the same connection: --verify shows the byte
  // stream stayed the pattern across every switch.
  const auto r = run_fabperf({"run", "--local", "2", "--mode", "stream", "--time", "2", "--buffsize", "256K",
                              "--verify", "--parallel", "2", "--json", "-"},
                             60s);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("settings").at("send_method"), "auto");
  EXPECT_EQ(doc.at("verify").at("errors").get<std::uint64_t>(), 0u);
  int compared = 0;
  expect_send_trial(doc, "stream auto", compared);
  EXPECT_GE(compared, 1) << doc.at("nodes").dump();
  // A method the user chose runs as chosen, with no trial.
  const auto w = run_fabperf({"run", "--local", "2", "--mode", "stream", "--send-method", "write", "--time", "1",
                              "--buffsize", "256K", "--verify", "--json", "-"},
                             60s);
  ASSERT_EQ(w.exit_code, 0) << w.err << w.out;
  const json wd = json::parse(w.out);
  EXPECT_EQ(wd.at("settings").at("send_method"), "write");
  for (const auto& n : wd.at("nodes")) EXPECT_TRUE(n.at("trials").empty()) << n.dump();
  // The text report says it was auto and what each host chose.
  const auto t = run_fabperf({"run", "--local", "2", "--mode", "stream", "--time", "2", "--buffsize", "256K"}, 60s);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("send method auto"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("Chosen by measurement on each host"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("send method "), std::string::npos) << t.out;
}

TEST(SendMethod, RpcBlocksTryBothMethodsBothWays) {
  // write: the client's blocks; read: the server's replies; rw: both.
  int compared = 0;
  for (const char* test : {"write", "read", "rw"}) {
    const auto r = run_fabperf(
        {"run", "--local", "2", "--test", test, "--verify", "--time", "2", "--buffsize", "300K", "--json", "-"}, 60s);
    ASSERT_EQ(r.exit_code, 0) << test << r.err << r.out;
    const json doc = json::parse(r.out);
    expect_send_trial(doc, test, compared);
    EXPECT_TRUE(doc.at("complete").get<bool>()) << test << doc.at("findings").dump();
    EXPECT_EQ(doc.at("verify").at("errors").get<std::uint64_t>(), 0u) << test;
    EXPECT_GT(doc.at("aggregate").at("bytes").get<std::uint64_t>(), 3'000'000u) << test;
  }
  EXPECT_GE(compared, 1) << "no trial of write, read or rw compared both methods";
}

TEST(SendMethod, BlocksLargerThanThePatternPeriodVerify) {
  // 3M: sendfile goes round a 1 MiB memfd three times per block; 1536K is no multiple of 1 MiB,
  // so its pattern does not repeat within a block. Receivers compare at the block offset either
  // way: a sender whose bytes differed from tx_buf_ at that offset would show verify errors.
  struct Case {
    const char* buffsize;
    const char* mode;
    const char* test;
  };
  for (const Case& c : {Case{"3M", "stream", "write"}, Case{"3M", "rpc", "write"}, Case{"3M", "rpc", "read"},
                        Case{"1536K", "stream", "write"}, Case{"1536K", "rpc", "rw"}}) {
    const std::string what = std::string(c.buffsize) + " " + c.mode + " " + c.test;
    const auto r = run_fabperf({"run", "--local", "2", "--mode", c.mode, "--test", c.test, "--verify", "--time", "1",
                                "--buffsize", c.buffsize, "--json", "-"},
                               60s);
    ASSERT_EQ(r.exit_code, 0) << what << r.err << r.out;
    const json doc = json::parse(r.out);
    EXPECT_TRUE(doc.at("complete").get<bool>()) << what << doc.at("findings").dump();
    EXPECT_EQ(doc.at("verify").at("errors").get<std::uint64_t>(), 0u) << what;
    EXPECT_GT(doc.at("aggregate").at("bytes").get<std::uint64_t>(), 6'000'000u) << what;
  }
}

TEST(SendMethod, BadCombinationsAreUsageErrors) {
  struct Case {
    std::vector<std::string> args;
    const char* msg;
  };
  for (const Case& c : {Case{{"--transport", "rdma", "--send-method", "sendfile"},
                             "--send-method: TCP only (this test's transport is rdma)"},
                        Case{{"--mode", "stream", "--send-method", "carrier-pigeon"}, "--send-method 'carrier-pigeon'"},
                        Case{{"--mode", "stream", "--zerocopy", "--send-method", "sendfile"},
                             "--zerocopy and --send-method sendfile: alternatives"},
                        Case{{"--zerocopy"}, "--zerocopy (--send-method zerocopy): TCP stream mode only"}}) {
    std::vector<std::string> args = {"run", "--local", "2", "--time", "1"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = run_fabperf(args, 30s);
    EXPECT_EQ(r.exit_code, 2) << c.msg;
    EXPECT_NE(r.err.find(c.msg), std::string::npos) << r.err;
  }
}

TEST(SocksizeAuto, RunsAndSaysHowTheSizeWasChosen) {
  const auto r = run_fabperf({"run", "--local", "2", "--mode", "stream", "--socksize", "auto", "--time", "1",
                              "--buffsize", "256K", "--json", "-"},
                             60s);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json doc = json::parse(r.out);
  EXPECT_TRUE(doc.at("complete").get<bool>());
  const auto& a = doc.at("socksize_auto");
  // Loopback has no link speed: the product is unknown and the kernel's autotuning stays.
  EXPECT_NE(a.at("basis").get<std::string>().find("link speed unknown (lo (127.0.0.1)"), std::string::npos) << a.dump();
  EXPECT_EQ(a.at("socksize").get<std::uint64_t>(), 0u);
  EXPECT_EQ(doc.at("settings").at("socksize").get<std::uint64_t>(), 0u);
  const auto t = run_fabperf({"run", "--local", "2", "--socksize", "auto", "--time", "1", "--buffsize", "256K"}, 60s);
  EXPECT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("socksize auto: link speed unknown"), std::string::npos) << t.out;
}
