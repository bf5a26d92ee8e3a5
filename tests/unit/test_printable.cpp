// Peer text defused before it reaches a log or a terminal (printable.hpp), and at the protocol
// layer, where every string a peer sends passes (proto::Fields).
#include <fabperf/error.hpp>
#include <fabperf/printable.hpp>
#include <fabperf/proto.hpp>

#include <gtest/gtest.h>

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
