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
                              "--parallel", "2", "--time", "1", "--buffsize", "100K", "--json", "-"}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json doc = json::parse(r.out);
  EXPECT_TRUE(doc.at("complete").get<bool>()) << doc.at("findings").dump();
  EXPECT_TRUE(doc.at("settings").at("sendfile").get<bool>());
  EXPECT_EQ(doc.at("verify").at("errors").get<std::uint64_t>(), 0u);
  EXPECT_GT(doc.at("aggregate").at("bytes").get<std::uint64_t>(), 10'000'000u) << doc.at("aggregate").dump();
}

TEST(SendMethod, StreamModeDefaultsToSendfileAndWriteCanBeChosen) {
  for (const auto& [method, want] : {std::pair<const char*, bool>{"auto", true}, {"write", false}}) {
    const auto r = run_fabperf({"run", "--local", "2", "--mode", "stream", "--send-method", method, "--time", "1",
                                "--buffsize", "256K", "--verify", "--json", "-"}, 60s);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    const json doc = json::parse(r.out);
    EXPECT_EQ(doc.at("settings").at("sendfile").get<bool>(), want) << method;
    EXPECT_EQ(doc.at("verify").at("errors").get<std::uint64_t>(), 0u) << method;
  }
  const auto r = run_fabperf({"run", "--local", "2", "--mode", "stream", "--time", "1", "--buffsize", "256K"}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("send method sendfile"), std::string::npos) << r.out;
}

TEST(SendMethod, RpcBlocksGoWithSendfileBothWays) {
  // write: the client's blocks; read: the server's replies; rw: both.
  for (const char* test : {"write", "read", "rw"}) {
    const auto r = run_fabperf({"run", "--local", "2", "--test", test, "--verify", "--time", "1", "--buffsize", "300K",
                                "--json", "-"}, 60s);
    ASSERT_EQ(r.exit_code, 0) << test << r.err << r.out;
    const json doc = json::parse(r.out);
    EXPECT_TRUE(doc.at("settings").at("sendfile").get<bool>()) << test;
    EXPECT_TRUE(doc.at("complete").get<bool>()) << test << doc.at("findings").dump();
    EXPECT_EQ(doc.at("verify").at("errors").get<std::uint64_t>(), 0u) << test;
    EXPECT_GT(doc.at("aggregate").at("bytes").get<std::uint64_t>(), 3'000'000u) << test;
  }
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
                                "--buffsize", c.buffsize, "--json", "-"}, 60s);
    ASSERT_EQ(r.exit_code, 0) << what << r.err << r.out;
    const json doc = json::parse(r.out);
    EXPECT_TRUE(doc.at("settings").at("sendfile").get<bool>()) << what;
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
  for (const Case& c : {Case{{"--transport", "rdma", "--send-method", "sendfile"}, "--send-method sendfile: TCP only"},
                        Case{{"--mode", "stream", "--send-method", "carrier-pigeon"}, "--send-method 'carrier-pigeon'"},
                        Case{{"--mode", "stream", "--zerocopy", "--send-method", "sendfile"}, "sendfile and zerocopy"},
                        Case{{"--zerocopy"}, "--zerocopy: TCP stream mode only"}}) {
    std::vector<std::string> args = {"run", "--local", "2", "--time", "1"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = run_fabperf(args, 30s);
    EXPECT_EQ(r.exit_code, 2) << c.msg;
    EXPECT_NE(r.err.find(c.msg), std::string::npos) << r.err;
  }
}

TEST(SocksizeAuto, RunsAndSaysHowTheSizeWasChosen) {
  const auto r = run_fabperf({"run", "--local", "2", "--mode", "stream", "--socksize", "auto", "--time", "1",
                              "--buffsize", "256K", "--json", "-"}, 60s);
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
