// Peer text defused before it reaches a log or a terminal (printable.hpp), and at the protocol
// layer, where every string a peer sends passes (Fields).
#include <fabperf/core/error.hpp>
#include <fabperf/core/printable.hpp>
#include <fabperf/proto/agent_result.hpp>
#include <fabperf/proto/proto.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace fabperf;

TEST(Printable, ControlCharactersAreShownNotObeyed) {
  EXPECT_EQ(printable("eth0"), "eth0");
  EXPECT_EQ(printable("a\nb"), "a\\x0ab");
  EXPECT_EQ(printable("\x1b[2Jx"), "\\x1b[2Jx");
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("\x7f"), "\\x7f");
  EXPECT_EQ(printable("\xc2\x9b"
                      "31m"),
            "\\u009b31m");                                                 // C1 CSI, UTF-8 encoded
  EXPECT_EQ(printable("caf\xc3\xa9 \xc2\xa0x"), "caf\xc3\xa9 \xc2\xa0x");  // ordinary UTF-8 stays
}

// Issue 28: direction controls reorder what a reader sees ("Trojan Source"), and bytes that are
// not UTF-8 reached terminals as they came.
TEST(Printable, DirectionControlsAndInvalidUtf8AreShown) {
  EXPECT_EQ(printable("ok\xe2\x80\xae"
                      "gnp.exe"),
            "ok\\u202egnp.exe");                                         // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(printable("\xe2\x81\xa6x\xe2\x81\xa9"), "\\u2066x\\u2069");  // isolates
  EXPECT_EQ(printable("\xe2\x80\x8f"), "\\u200f");                       // RIGHT-TO-LEFT MARK
  EXPECT_EQ(printable("a\xff"
                      "b"),
            "a\\xff"
            "b");                                                                          // never UTF-8
  EXPECT_EQ(printable("\xc3"), "\\xc3");                                                   // truncated
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                                          // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");                                 // a surrogate
  EXPECT_EQ(printable("\xe2\x82\xac \xf0\x9f\x98\x80"), "\xe2\x82\xac \xf0\x9f\x98\x80");  // euro, emoji stay
}

// Counter names come from the peer too: the text report prints them (issue 28).
TEST(Printable, CounterNamesFromAResultArriveDefused) {
  nlohmann::json j = to_json(AgentResult{});
  nlohmann::json values = nlohmann::json::object();
  values["tcp.\x1b[31mRetrans\xe2\x80\xae"] = 1u;
  j["host_counters"] = nlohmann::json::array();
  j["host_counters"].push_back({{"t_ns", 0}, {"values", values}});
  const AgentResult r = parse_agent_result(j);
  ASSERT_EQ(r.host_counters.size(), 1u);
  ASSERT_EQ(r.host_counters[0].values.size(), 1u);
  EXPECT_EQ(r.host_counters[0].values[0].first, "tcp.\\x1b[31mRetrans\\u202e");
}

TEST(Printable, ProtocolStringsArriveDefused) {
  // The audit's input: an ERROR whose message would forge a log line.
  const auto e = proto::parse_error(
      {{"code", "x"}, {"message", "\n2025-01-01 12:00:00.000 info agent: coordinator ops connected, key verified"}});
  EXPECT_EQ(e.message.find('\n'), std::string::npos);
  EXPECT_EQ(e.message.rfind("\\x0a2025-01-01", 0), 0u) << e.message;
  const auto h = proto::parse_hello({{"proto_min", proto::kVersion},
                                     {"proto_max", proto::kVersion},
                                     {"coordinator", "\x1b]0;owned\x07"},
                                     {"caps", {"tls13-psk\r"}}});
  EXPECT_EQ(h.coordinator, "\\x1b]0;owned\\x07");
  EXPECT_EQ(h.caps.at(0), "tls13-psk\\x0d");
}
