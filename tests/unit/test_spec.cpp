#include <gtest/gtest.h>
#include <fabperf/core/error.hpp>
#include <fabperf/core/spec.hpp>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "common/unit_helpers.hpp"

using namespace fabperf;
using namespace fabperf::testutil;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "nothing was thrown";
  return "";
}

std::string make_error(const SpecParams& p) {
  return error_of<UsageError>([&] { (void)TestSpec::make(p); });
}

}  // namespace

// ---- enums ----------------------------------------------------------------------------------

TEST(SpecEnums, NamesRoundTrip) {
  for (auto t : {TestKind::write, TestKind::read, TestKind::rw}) EXPECT_EQ(parse_test_kind(to_string(t)), t);
  for (auto m : {Mode::rpc, Mode::stream}) EXPECT_EQ(parse_mode(to_string(m)), m);
  for (auto t : {Transport::tcp, Transport::rdma}) EXPECT_EQ(parse_transport(to_string(t)), t);
  EXPECT_EQ(to_string(TestKind::rw), "rw");
  EXPECT_EQ(to_string(Mode::stream), "stream");
  EXPECT_EQ(to_string(Transport::rdma), "rdma");
}

TEST(SpecEnums, UnknownNamesRejected) {
  EXPECT_TRUE(contains(error_of<UsageError>([] { (void)parse_test_kind("Write"); }), "'Write': unknown test"));
  EXPECT_TRUE(contains(error_of<UsageError>([] { (void)parse_mode("rdma"); }), "'rdma': unknown mode"));
  EXPECT_TRUE(contains(error_of<UsageError>([] { (void)parse_transport(""); }), "'': unknown transport"));
}

// ---- defaults -------------------------------------------------------------------------------

TEST(TestSpecMake, NsdperfDefaults) {
  const auto s = TestSpec::make({});
  EXPECT_EQ(s.test(), TestKind::write);
  EXPECT_EQ(s.mode(), Mode::rpc);
  EXPECT_EQ(s.transport(), Transport::tcp);
  EXPECT_EQ(s.time(), 10s);
  EXPECT_EQ(s.buffsize(), 4u * 1024 * 1024);
  EXPECT_EQ(s.socksize(), 0u);
  EXPECT_EQ(s.threads(), 4u);
  EXPECT_EQ(s.parallel(), 1u);
  // Measured from 10% to 90% of the test time.
  EXPECT_EQ(s.warmup(), 1s);
  EXPECT_EQ(s.cooldown(), 1s);
  EXPECT_EQ(s.window(), 8s);
}

TEST(TestSpecMake, WindowScalesWithTime) {
  SpecParams p;
  p.time = 30s;
  const auto s = TestSpec::make(p);
  EXPECT_EQ(s.warmup(), 3s);
  EXPECT_EQ(s.cooldown(), 3s);
  EXPECT_EQ(s.window(), 24s);
}

TEST(TestSpecMake, ExplicitValuesKept) {
  SpecParams p;
  p.test = TestKind::rw;
  p.mode = Mode::stream;
  p.transport = Transport::rdma;
  p.buffsize = 256 * 1024;
  p.socksize = 8 * 1024 * 1024;
  p.threads = 16;
  p.parallel = 3;
  p.time = 20s;
  p.warmup = 0s;
  p.cooldown = 500ms;
  const auto s = TestSpec::make(p);
  EXPECT_EQ(s.test(), TestKind::rw);
  EXPECT_EQ(s.mode(), Mode::stream);
  EXPECT_EQ(s.transport(), Transport::rdma);
  EXPECT_EQ(s.buffsize(), 256u * 1024);
  EXPECT_EQ(s.socksize(), 8u * 1024 * 1024);
  EXPECT_EQ(s.threads(), 16u);
  EXPECT_EQ(s.parallel(), 3u);
  EXPECT_EQ(s.time(), 20s);
  EXPECT_EQ(s.warmup(), 0s);
  EXPECT_EQ(s.cooldown(), 500ms);
  EXPECT_EQ(s.window(), 19500ms);
}

// ---- range errors ---------------------------------------------------------------------------

TEST(TestSpecMake, BuffsizeRange) {
  SpecParams p;
  p.buffsize = 4 * 1024;
  EXPECT_EQ(TestSpec::make(p).buffsize(), 4096u);
  p.buffsize = 16 * 1024 * 1024;
  EXPECT_EQ(TestSpec::make(p).buffsize(), 16u << 20);
  p.buffsize = 4 * 1024 - 1;
  auto msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--buffsize 4095")) << msg;
  EXPECT_TRUE(contains(msg, "4K..16M")) << msg;
  p.buffsize = 16 * 1024 * 1024 + 1;
  msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--buffsize")) << msg;
  p.buffsize = 32 * 1024 * 1024;
  msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--buffsize 32M")) << msg;
  p.buffsize = 0;
  EXPECT_TRUE(contains(make_error(p), "--buffsize"));
}

TEST(TestSpecMake, SocksizeRange) {
  SpecParams p;
  p.socksize = 100 * 1024 * 1024;
  EXPECT_EQ(TestSpec::make(p).socksize(), 100u << 20);
  p.socksize = 100 * 1024 * 1024 + 1;
  const auto msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--socksize")) << msg;
  EXPECT_TRUE(contains(msg, "100M")) << msg;
}

TEST(TestSpecMake, ThreadsRange) {
  SpecParams p;
  p.threads = 1;
  EXPECT_EQ(TestSpec::make(p).threads(), 1u);
  p.threads = 4096;
  EXPECT_EQ(TestSpec::make(p).threads(), 4096u);
  p.threads = 0;
  auto msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--threads 0")) << msg;
  EXPECT_TRUE(contains(msg, "1..4096")) << msg;
  p.threads = 4097;
  msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--threads 4097")) << msg;
}

TEST(TestSpecMake, ParallelRange) {
  SpecParams p;
  p.parallel = 8191;
  EXPECT_EQ(TestSpec::make(p).parallel(), 8191u);
  p.parallel = 0;
  auto msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--parallel 0")) << msg;
  EXPECT_TRUE(contains(msg, "1..8191")) << msg;
  p.parallel = 8192;
  msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--parallel 8192")) << msg;
}

TEST(TestSpecMake, TimeRange) {
  SpecParams p;
  p.time = 200ms;
  EXPECT_EQ(TestSpec::make(p).time(), 200ms);
  p.time = std::chrono::hours(24 * 7);
  EXPECT_EQ(TestSpec::make(p).time(), std::chrono::hours(168));
  p.time = 199ms;
  auto msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--time 0.199")) << msg;
  EXPECT_TRUE(contains(msg, "0.2 s .. 1 week")) << msg;
  p.time = std::chrono::hours(24 * 7) + 1ns;
  msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--time")) << msg;
  p.time = 0s;
  EXPECT_TRUE(contains(make_error(p), "--time"));
}

TEST(TestSpecMake, WarmupPlusCooldownMustLeaveAWindow) {
  SpecParams p;
  p.time = 10s;
  p.warmup = 5s;
  p.cooldown = 5s;
  auto msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--warmup 5 s")) << msg;
  EXPECT_TRUE(contains(msg, "--cooldown 5 s")) << msg;
  EXPECT_TRUE(contains(msg, "--time 10 s")) << msg;
  p.warmup = 6s;
  EXPECT_TRUE(contains(make_error(p), "no measurement window"));
  p.warmup = 11s;
  p.cooldown = 0s;
  EXPECT_TRUE(contains(make_error(p), "no measurement window"));
  // A window of at least 0.1 s is required.
  p.warmup = 4950ms;
  p.cooldown = 5s;
  msg = make_error(p);
  EXPECT_TRUE(contains(msg, "shorter than 0.1 s")) << msg;
  p.warmup = 4900ms;
  EXPECT_EQ(TestSpec::make(p).window(), 100ms);
}

TEST(TestSpecMake, RwRpcNeedsTwoThreads) {
  SpecParams p;
  p.test = TestKind::rw;
  p.threads = 1;
  const auto msg = make_error(p);
  EXPECT_TRUE(contains(msg, "--test rw")) << msg;
  EXPECT_TRUE(contains(msg, "--threads >= 2")) << msg;
  p.threads = 2;
  EXPECT_EQ(TestSpec::make(p).threads(), 2u);
  // Stream mode has no such constraint, nor do write/read.
  p.threads = 1;
  p.mode = Mode::stream;
  EXPECT_EQ(TestSpec::make(p).threads(), 1u);
  p.mode = Mode::rpc;
  p.test = TestKind::read;
  EXPECT_EQ(TestSpec::make(p).threads(), 1u);
}

TEST(TestSpecMake, ConnectionsPerPair) {
  SpecParams p;
  p.parallel = 3;
  for (auto t : {TestKind::write, TestKind::read, TestKind::rw}) {
    for (auto m : {Mode::rpc, Mode::stream}) {
      p.test = t;
      p.mode = m;
      const auto expect = (t == TestKind::rw && m == Mode::stream) ? 6u : 3u;
      EXPECT_EQ(TestSpec::make(p).connections_per_pair(), expect) << to_string(t) << " " << to_string(m);
    }
  }
  EXPECT_EQ(TestSpec::make({}).connections_per_pair(), 1u);
}

TEST(TestSpecMake, Equality) {
  SpecParams p;
  p.threads = 8;
  EXPECT_EQ(TestSpec::make(p), TestSpec::make(p));
  EXPECT_NE(TestSpec::make(p), TestSpec::make({}));
}

// ---- wire encoding --------------------------------------------------------------------------

TEST(SpecWire, ToJsonFields) {
  const auto j = to_json(TestSpec::make({}));
  EXPECT_EQ(j.at("test"), "write");
  EXPECT_EQ(j.at("mode"), "rpc");
  EXPECT_EQ(j.at("transport"), "tcp");
  EXPECT_EQ(j.at("buffsize"), 4194304);
  EXPECT_EQ(j.at("socksize"), 0);
  EXPECT_EQ(j.at("threads"), 4);
  EXPECT_EQ(j.at("parallel"), 1);
  EXPECT_EQ(j.at("time_ns"), 10'000'000'000LL);
  EXPECT_EQ(j.at("warmup_ns"), 1'000'000'000LL);
  EXPECT_EQ(j.at("cooldown_ns"), 1'000'000'000LL);
  EXPECT_EQ(j.at("skip_rx_copy"), false);
  EXPECT_EQ(j.at("send_method"), "auto");
  EXPECT_EQ(j.at("zerocopy"), false);
  EXPECT_EQ(j.at("sendfile"), false);  // asked for, not what ran
  EXPECT_EQ(j.at("socksize_auto"), false);
  EXPECT_EQ(j.at("congestion"), "");
  EXPECT_EQ(j.at("rate"), 0);
  EXPECT_EQ(j.at("busy_poll_us"), 0);
  EXPECT_EQ(j.at("notsent_lowat"), 0);
  EXPECT_EQ(j.at("cpus"), nlohmann::json::array());
  EXPECT_EQ(j.at("no_affinity"), false);
  EXPECT_EQ(j.at("verify"), false);
  EXPECT_EQ(j.at("gid_index"), -1);
  EXPECT_EQ(j.at("qdepth"), 16);
  EXPECT_EQ(j.at("spread_ports"), false);
  EXPECT_EQ(j.at("rdma_cm"), false);
  EXPECT_EQ(j.at("delay_probe_ns"), 10'000'000);
  EXPECT_EQ(j.size(), 32u);
}

TEST(SpecTuning, RoundTripsAndValidates) {
  SpecParams p;
  p.mode = Mode::stream;
  p.skip_rx_copy = true;
  p.zerocopy = true;
  p.congestion = "bbr";
  p.rate = 125'000'000;
  p.busy_poll_us = 50;
  p.notsent_lowat = 131072;
  p.cpus = std::vector<int>{0, 2, 3};
  p.delay_probe = std::chrono::milliseconds(250);
  const auto s = TestSpec::make(p);
  EXPECT_EQ(spec_from_json(to_json(s)), s);
  EXPECT_EQ(s.delay_probe(), std::chrono::milliseconds(250));
  EXPECT_EQ(s.cpus(), (std::vector<int>{0, 2, 3}));
  SpecParams bad = p;
  bad.congestion = "bbr; rm -rf";
  EXPECT_THROW(TestSpec::make(bad), UsageError);
  bad = p;
  bad.no_affinity = true;
  EXPECT_THROW(TestSpec::make(bad), UsageError);
  bad = p;
  bad.rate = 10;
  EXPECT_THROW(TestSpec::make(bad), UsageError);
  bad = p;
  bad.delay_probe = std::chrono::microseconds(500);  // off is 0; otherwise 1 ms..10 s
  EXPECT_THROW(TestSpec::make(bad), UsageError);
  bad.delay_probe = std::chrono::nanoseconds(0);
  EXPECT_EQ(TestSpec::make(bad).delay_probe().count(), 0);
  // Older coordinators send no tuning fields: defaults apply.
  auto j = to_json(TestSpec::make({}));
  for (const char* k : {"skip_rx_copy", "send_method", "zerocopy", "sendfile", "congestion", "rate", "busy_poll_us",
                        "notsent_lowat", "cpus", "no_affinity", "delay_probe_ns"}) {
    j.erase(k);
  }
  EXPECT_EQ(spec_from_json(j), TestSpec::make({}));
  j["cpus"] = {1, -1};
  EXPECT_THROW(spec_from_json(j), ProtocolError);
}

// auto is a value of the spec: the agents settle it by measurement (engine/trial.hpp), never a
// constant chosen here.
TEST(SpecTuning, SendMethodAutoStaysAutoInTheSpec) {
  SpecParams p;
  EXPECT_EQ(TestSpec::make(p).send_method(), SendMethod::automatic);  // rpc (the default mode)
  p.mode = Mode::stream;
  EXPECT_EQ(TestSpec::make(p).send_method(), SendMethod::automatic);
  SpecParams z = p;
  z.zerocopy = true;
  EXPECT_EQ(TestSpec::make(z).send_method(), SendMethod::zerocopy);
  EXPECT_TRUE(TestSpec::make(z).zerocopy());
  SpecParams w = p;
  w.send_method = SendMethod::write;
  EXPECT_EQ(TestSpec::make(w).send_method(), SendMethod::write);
  SpecParams r = p;
  r.transport = Transport::rdma;
  EXPECT_EQ(TestSpec::make(r).send_method(), SendMethod::automatic);
  for (auto m : {SendMethod::automatic, SendMethod::write, SendMethod::sendfile, SendMethod::zerocopy}) {
    EXPECT_EQ(parse_send_method(to_string(m)), m);
    SpecParams q = p;
    q.send_method = m;
    const auto s = TestSpec::make(q);
    EXPECT_EQ(spec_from_json(to_json(s)), s) << to_string(m);
  }
  EXPECT_THROW(parse_send_method("mmap"), UsageError);
}

TEST(SpecTuning, SendMethodsRefusedWhereTheyDoNotApply) {
  SpecParams p;
  p.mode = Mode::stream;
  p.send_method = SendMethod::sendfile;
  SpecParams bad = p;
  bad.zerocopy = true;  // --zerocopy --send-method sendfile
  EXPECT_THROW(TestSpec::make(bad), UsageError);
  bad = p;
  bad.transport = Transport::rdma;
  EXPECT_THROW(TestSpec::make(bad), UsageError);
  SpecParams zr;  // rpc mode
  zr.zerocopy = true;
  EXPECT_THROW(TestSpec::make(zr), UsageError);
}

TEST(SpecTuning, CpuLists) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11", "--cpus"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5", "--cpus"), (std::vector<int>{5}));
  EXPECT_THROW(parse_cpu_list("3-1", "--cpus"), UsageError);
  EXPECT_THROW(parse_cpu_list("a", "--cpus"), UsageError);
  EXPECT_THROW(parse_cpu_list("1,,2", "--cpus"), UsageError);
  EXPECT_THROW(parse_cpu_list("5000", "--cpus"), UsageError);
}

TEST(SpecWire, RoundTrip) {
  std::vector<SpecParams> cases(4);
  cases[1].test = TestKind::rw;
  cases[1].mode = Mode::stream;
  cases[1].parallel = 7;
  cases[1].socksize = 1 << 20;
  cases[2].test = TestKind::read;
  cases[2].transport = Transport::rdma;
  cases[2].buffsize = 4096;
  cases[2].threads = 4096;
  cases[2].time = 200ms;
  cases[2].warmup = 0ns;
  cases[2].cooldown = 0ns;
  cases[3].time = std::chrono::hours(168);
  cases[3].warmup = 123456789ns;
  cases[3].cooldown = 987654321ns;
  cases[3].parallel = 8191;
  for (const auto& p : cases) {
    const auto s = TestSpec::make(p);
    EXPECT_EQ(spec_from_json(to_json(s)), s);
    // Through text as well, where non-negative integers come back unsigned.
    EXPECT_EQ(spec_from_json(json::parse(to_json(s).dump())), s);
  }
}

namespace {
json good_spec() {
  return to_json(TestSpec::make({}));
}

std::string from_json_error(const json& j) {
  return error_of<ProtocolError>([&] { (void)spec_from_json(j); });
}
}  // namespace

TEST(SpecWire, RejectsNonObject) {
  EXPECT_TRUE(contains(from_json_error(json::array()), "spec: not a JSON object"));
  EXPECT_TRUE(contains(from_json_error(json(5)), "spec"));
  EXPECT_TRUE(contains(from_json_error(json(nullptr)), "spec"));
}

TEST(SpecWire, RejectsMissingFields) {
  for (const char* k : {"test", "mode", "transport", "buffsize", "socksize", "threads", "parallel", "time_ns",
                        "warmup_ns", "cooldown_ns"}) {
    auto j = good_spec();
    j.erase(k);
    const auto msg = from_json_error(j);
    EXPECT_TRUE(contains(msg, k)) << k << ": " << msg;
  }
}

TEST(SpecWire, RejectsWrongTypes) {
  for (const char* k : {"buffsize", "socksize", "threads", "parallel", "time_ns", "warmup_ns", "cooldown_ns"}) {
    for (const json& bad : {json("4"), json(4.5), json(true), json(nullptr), json::array({1}), json::object()}) {
      auto j = good_spec();
      j[k] = bad;
      const auto msg = from_json_error(j);
      EXPECT_TRUE(contains(msg, std::string("spec.") + k)) << k << "=" << bad.dump() << ": " << msg;
    }
  }
  for (const char* k : {"test", "mode", "transport"}) {
    for (const json& bad : {json(1), json(nullptr), json::array({"write"}), json(std::string(33, 'w'))}) {
      auto j = good_spec();
      j[k] = bad;
      const auto msg = from_json_error(j);
      EXPECT_TRUE(contains(msg, std::string("spec.") + k)) << k << "=" << bad.dump() << ": " << msg;
    }
  }
  // A float that happens to be whole is still not an integer on the wire.
  auto j = good_spec();
  j["threads"] = 4.0;
  EXPECT_TRUE(contains(from_json_error(j), "spec.threads"));
}

TEST(SpecWire, RejectsUnknownNames) {
  auto j = good_spec();
  j["test"] = "erase";
  auto msg = from_json_error(j);
  EXPECT_TRUE(contains(msg, "spec.test: 'erase': unknown test")) << msg;
  EXPECT_TRUE(contains(msg, "erase")) << msg;
  j = good_spec();
  j["mode"] = "RPC";
  EXPECT_TRUE(contains(from_json_error(j), "RPC"));
  j = good_spec();
  j["transport"] = "udp";
  EXPECT_TRUE(contains(from_json_error(j), "udp"));
}

TEST(SpecWire, RejectsOutOfRange) {
  struct Case {
    const char* key;
    json value;
  };
  const Case cases[] = {
      {"buffsize", json(16 * 1024 * 1024 + 1)},
      {"buffsize", json(1)},  // below 4K: caught by make()
      {"buffsize", json(-4096)},
      {"buffsize", json(18446744073709551615ull)},
      {"socksize", json(100 * 1024 * 1024 + 1)},
      {"socksize", json(-1)},
      {"threads", json(0)},
      {"threads", json(4097)},
      {"threads", json(-1)},
      {"threads", json(4294967297ull)},  // would truncate to 1 in a uint32
      {"parallel", json(0)},
      {"parallel", json(8192)},
      {"parallel", json(4294967297ull)},
      {"time_ns", json(0)},
      {"time_ns", json(-10'000'000'000LL)},
      {"time_ns", json(604'800'000'000'001LL)},
      {"time_ns", json(18446744073709551615ull)},
      {"warmup_ns", json(-1)},
      {"warmup_ns", json(10'000'000'000LL)},
      {"cooldown_ns", json(-1)},
      {"cooldown_ns", json(9'950'000'000LL)},
  };
  for (const auto& c : cases) {
    auto j = good_spec();
    j[c.key] = c.value;
    const auto msg = from_json_error(j);
    EXPECT_TRUE(contains(msg, "spec")) << c.key << "=" << c.value.dump() << ": " << msg;
  }
  // The UsageError from make() is rethrown as a ProtocolError that keeps its text.
  auto j = good_spec();
  j["buffsize"] = 1000;
  const auto msg = from_json_error(j);
  EXPECT_TRUE(contains(msg, "spec: --buffsize 1000")) << msg;
}

// ---- parse_host_port ------------------------------------------------------------------------

TEST(HostPortParse, NameDefaultsToNsdperfPort) {
  EXPECT_EQ(kDefaultAgentPort, 6668);
  const auto hp = parse_host_port("node1", "--servers");
  EXPECT_EQ(hp.host, "node1");
  EXPECT_EQ(hp.port, 6668);
  EXPECT_EQ(hp.str(), "node1:6668");
  EXPECT_EQ(parse_host_port("a-b_c.example.com", "x").host, "a-b_c.example.com");
}

TEST(HostPortParse, NameWithPort) {
  EXPECT_EQ(parse_host_port("node1:7000", "x"), (HostPort{"node1", 7000, {}}));
  EXPECT_EQ(parse_host_port("node1:0", "x"), (HostPort{"node1", 0, {}}));
  EXPECT_EQ(parse_host_port("node1:65535", "x"), (HostPort{"node1", 65535, {}}));
}

TEST(HostPortParse, Ipv4WithPort) {
  const auto hp = parse_host_port("10.0.0.1:6000", "x");
  EXPECT_EQ(hp, (HostPort{"10.0.0.1", 6000, {}}));
  EXPECT_EQ(hp.str(), "10.0.0.1:6000");
  EXPECT_EQ(parse_host_port("192.168.1.254", "x"), (HostPort{"192.168.1.254", 6668, {}}));
}

TEST(HostPortParse, BracketedIpv6) {
  const auto hp = parse_host_port("[fe80::1]:7001", "x");
  EXPECT_EQ(hp, (HostPort{"fe80::1", 7001, {}}));
  EXPECT_EQ(hp.str(), "[fe80::1]:7001");
  EXPECT_EQ(parse_host_port("[::1]", "x"), (HostPort{"::1", 6668, {}}));
  EXPECT_EQ(parse_host_port("[fe80::1%eth0]:9", "x"), (HostPort{"fe80::1%eth0", 9, {}}));
}

TEST(HostPortParse, BareIpv6) {
  const auto hp = parse_host_port("2001:db8::42", "x");
  EXPECT_EQ(hp, (HostPort{"2001:db8::42", 6668, {}}));
  EXPECT_EQ(hp.str(), "[2001:db8::42]:6668");
  EXPECT_EQ(parse_host_port("::1", "x"), (HostPort{"::1", 6668, {}}));
  // str() output parses back to the same value.
  EXPECT_EQ(parse_host_port(hp.str(), "x"), hp);
}

TEST(HostPortParse, BadInputs) {
  struct Case {
    const char* text;
    const char* why;
  };
  const Case cases[] = {
      {"", "empty host"},
      {"h:", "empty port"},
      {":80", "empty host"},
      {"[::1", "missing ']'"},
      {"[::1]x", "expected ':PORT'"},
      {"[::1]:", "empty port"},
      {"[]:80", "empty host"},
      {"[]", "empty host"},
      {"host name", "invalid character ' '"},
      {"host/1", "invalid character '/'"},
      {"ho;st:80", "invalid character ';'"},
      {"[::1;x]:80", "invalid character ';'"},
  };
  for (const auto& c : cases) {
    const auto msg = error_of<UsageError>([&] { (void)parse_host_port(c.text, "--servers"); });
    EXPECT_TRUE(contains(msg, "--servers")) << c.text << ": " << msg;
    EXPECT_TRUE(contains(msg, std::string("'") + c.text + "'")) << c.text << ": " << msg;
    EXPECT_TRUE(contains(msg, c.why)) << c.text << ": " << msg;
  }
}

TEST(HostPortParse, BadPorts) {
  for (const char* text : {"h:70000", "h:65536", "[::1]:70000", "h:-1", "h:80x", "h:http", "h:1.5"}) {
    const auto msg = error_of<UsageError>([&] { (void)parse_host_port(text, "--clients"); });
    EXPECT_TRUE(contains(msg, "--clients port")) << text << ": " << msg;
  }
  const auto msg = error_of<UsageError>([] { (void)parse_host_port("h:70000", "--clients"); });
  EXPECT_TRUE(contains(msg, "70000")) << msg;
  EXPECT_TRUE(contains(msg, "0..65535")) << msg;
}

TEST(HostPortParse, HostTooLong) {
  const std::string ok(253, 'a');
  EXPECT_EQ(parse_host_port(ok, "x").host, ok);
  const std::string longer(254, 'a');
  EXPECT_TRUE(contains(error_of<UsageError>([&] { (void)parse_host_port(longer, "x"); }), "too long"));
}

TEST(HostPortParse, LinkAddresses) {
  const auto hp = parse_host_port("h1:7000@198.18.0.1+198.18.1.1", "--clients");
  EXPECT_EQ(hp.host, "h1");
  EXPECT_EQ(hp.port, 7000);
  EXPECT_EQ(hp.links, (std::vector<std::string>{"198.18.0.1", "198.18.1.1"}));
  EXPECT_EQ(hp.str(), "h1:7000");
  const auto v6 = parse_host_port("[fd00::1]@[fd00::1]+fd01::1", "x");
  EXPECT_EQ(v6.links, (std::vector<std::string>{"fd00::1", "fd01::1"}));
  EXPECT_EQ(parse_host_port("h2@10.0.0.2", "x").links.size(), 1u);
  for (const char* bad : {"h1@", "h1@+10.0.0.1", "h1@10.0.0.1+", "h1@eth0", "h1@10.0.0.1;rm"}) {
    EXPECT_THROW(parse_host_port(bad, "--servers"), UsageError) << bad;
  }
}

TEST(HostPortParse, HostOfAnEndpoint) {
  EXPECT_EQ(host_of("10.0.0.1:6668"), "10.0.0.1");
  EXPECT_EQ(host_of("[fd00::1]:6668"), "fd00::1");
  EXPECT_EQ(host_of("fd00::1"), "fd00::1");
  EXPECT_EQ(host_of("h1"), "h1");
  EXPECT_EQ(host_of("[fd00::1"), "[fd00::1");
}

TEST(SpecRdma, DefaultsRoundTripAndValidation) {
  const auto d = TestSpec::make({});
  EXPECT_EQ(d.rdma_device(), "");
  EXPECT_EQ(d.gid_index(), -1);
  EXPECT_EQ(d.rdma_verb(), RdmaVerb::write);
  EXPECT_EQ(d.qdepth(), 16u);
  EXPECT_EQ(d.cq_mod(), 1u);
  SpecParams p;
  p.transport = Transport::rdma;
  p.rdma_device = "mlx5_0:1,mlx5_1";
  p.gid_index = 3;
  p.rdma_verb = RdmaVerb::send;
  p.qdepth = 128;
  p.inline_size = 220;
  p.cq_mod = 32;
  p.rdma_events = true;
  p.rdma_cm = true;
  const auto s = TestSpec::make(p);
  EXPECT_TRUE(s.rdma_cm());
  EXPECT_FALSE(d.rdma_cm());
  EXPECT_EQ(spec_from_json(to_json(s)), s);
  EXPECT_EQ(spec_from_json(json::parse(to_json(s).dump())), s);
  EXPECT_EQ(parse_rdma_verb("send"), RdmaVerb::send);
  EXPECT_TRUE(contains(error_of<UsageError>([] { (void)parse_rdma_verb("atomic"); }), "'atomic': unknown verb"));
  auto bad = [](auto edit, const char* want) {
    SpecParams q;
    q.transport = Transport::rdma;
    edit(q);
    EXPECT_TRUE(contains(error_of<UsageError>([&] { (void)TestSpec::make(q); }), want)) << want;
  };
  bad([](SpecParams& q) { q.qdepth = 0; }, "--qdepth 0");
  bad(
      [](SpecParams& q) {
        q.qdepth = 8;
        q.cq_mod = 9;
      },
      "--cq-mod 9");
  bad([](SpecParams& q) { q.inline_size = 5000; }, "--inline 5000");
  bad([](SpecParams& q) { q.rdma_device = "mlx5 0"; }, "--rdma-device 'mlx5 0'");
  bad([](SpecParams& q) { q.verify = true; }, "--verify is not available with --transport rdma");
  SpecParams tcp_cm;
  tcp_cm.rdma_cm = true;
  EXPECT_TRUE(
      contains(error_of<UsageError>([&] { (void)TestSpec::make(tcp_cm); }), "--rdma-cm: only with --transport rdma"));
  json j = to_json(s);
  j["gid_index"] = -2;
  EXPECT_THROW(spec_from_json(j), ProtocolError);
}
