// The one table of test settings: names unique, every setting parses, the docs carry the table.
#include <fabperf/core/settings.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include <fabperf/core/error.hpp>
#include <nlohmann/json.hpp>

using namespace fabperf;

TEST(SettingsTable, NamesAndKeysAreUniqueAndFound) {
  std::set<std::string> names, keys;
  for (const auto& st : spec_settings()) {
    EXPECT_TRUE(names.insert(st.name).second) << st.name;
    EXPECT_TRUE(keys.insert(st.key).second) << st.key;
    EXPECT_EQ(find_setting(st.name), &st);
    EXPECT_NE(std::string(st.help), "");
    EXPECT_TRUE(std::string(st.only).empty() || std::string(st.only) == "tcp" || std::string(st.only) == "rdma")
        << st.name;
  }
  EXPECT_EQ(find_setting("no-such-setting"), nullptr);
}

TEST(SettingsTable, EveryKeyIsInTheSpecsJson) {
  const auto j = to_json(TestSpec::make({}));
  for (const auto& st : spec_settings()) EXPECT_TRUE(j.contains(st.key)) << st.name << " -> " << st.key;
}

// The spec's JSON is the table's: its keys are the settings' keys and the two companions kept for
// older readers, nothing else; each setting reads its own key back.
TEST(SettingsTable, TheWireCodecIsTheTables) {
  const auto j = to_json(TestSpec::make({}));
  std::set<std::string> want{"socksize_auto", "sendfile"};
  for (const auto& st : spec_settings()) want.insert(st.key);
  std::set<std::string> got;
  for (const auto& [k, v] : j.items()) got.insert(k);
  EXPECT_EQ(got, want);

  // Protocol 1's first keys are required; every later one may be absent (an older coordinator):
  // then its default applies.
  const std::set<std::string> required{"test",    "mode",     "transport", "buffsize",  "socksize",
                                       "threads", "parallel", "time_ns",   "warmup_ns", "cooldown_ns"};
  SpecParams p;
  p.mode = Mode::stream;
  p.time = std::chrono::seconds(3);
  p.socksize = 1 << 20;
  p.skip_rx_copy = true;
  p.send_method = SendMethod::write;
  p.congestion = "reno";
  p.rate = 1'000'000;
  p.busy_poll_us = 5;
  p.notsent_lowat = 65536;
  p.cpus = std::vector<int>{1, 2};
  p.spread_ports = true;
  const auto s = TestSpec::make(p);
  const auto defaults = to_json(TestSpec::make({}));
  for (const auto& st : spec_settings()) {
    auto k = to_json(s);
    k.erase(st.key);
    if (required.count(st.key)) {
      try {
        (void)spec_from_json(k);
        ADD_FAILURE() << st.key << " is required";
      } catch (const ProtocolError& e) {
        EXPECT_EQ(std::string(e.what()), std::string("spec.") + st.key + ": missing field");
      }
    } else {
      EXPECT_EQ(to_json(spec_from_json(k))[st.key], defaults[st.key]) << st.key;
    }
  }
  EXPECT_EQ(spec_from_json(to_json(s)), s);
}

TEST(SettingsTable, FlagsTakeOnOffAndErrorsNameTheSetting) {
  const Setting* v = find_setting("verify");
  SpecParams p;
  v->apply(p, "on", "--verify");
  EXPECT_TRUE(v->given(p));
  EXPECT_TRUE(*p.verify);
  v->apply(p, "false", "--verify");
  EXPECT_FALSE(*p.verify);
  try {
    v->apply(p, "maybe", "--verify");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--verify 'maybe': expected on or off");
  }
  try {
    find_setting("mode")->apply(p, "bulk", "--mode");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--mode 'bulk': unknown mode (rpc or stream)");
  }
  SpecParams a;
  find_setting("socksize")->apply(a, "auto", "--socksize");
  EXPECT_TRUE(TestSpec::make(a).socksize_auto());
  EXPECT_EQ(TestSpec::make(a).socksize(), 0u);
}

TEST(SettingsTable, SettingsOfTheOtherTransportAreRefused) {
  SpecParams p;
  find_setting("qdepth")->apply(p, "8", "--qdepth");
  EXPECT_THROW(refuse_inapplicable(p), UsageError);
  p.transport = Transport::rdma;
  EXPECT_NO_THROW(refuse_inapplicable(p));
  find_setting("congestion")->apply(p, "bbr", "--congestion");
  try {
    refuse_inapplicable(p);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--congestion: TCP only (this test's transport is rdma)");
  }
}

// docs/usage.md carries the table as the code has it: a setting added or changed without its
// docs fails here (the expected text is printed to paste).
TEST(SettingsTable, DocsCarryTheTable) {
  std::ifstream in(std::string(FABPERF_TEST_DATA) + "/../../docs/usage.md");
  ASSERT_TRUE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string table = settings_markdown();
  EXPECT_NE(ss.str().find(table), std::string::npos) << "docs/usage.md lacks the settings table; it should read:\n"
                                                     << table;
}
