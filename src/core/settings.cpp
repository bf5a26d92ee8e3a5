#include <fabperf/core/settings.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>

#include <nlohmann/json.hpp>

#include <fabperf/core/error.hpp>
#include <fabperf/core/fields.hpp>
#include <fabperf/core/units.hpp>

namespace fabperf {
namespace {

bool flag_value(std::string_view text, std::string_view what) {
  if (text == "true" || text == "on" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "off" || text == "0" || text == "no") return false;
  throw UsageError(fmt::format("{} '{}': expected on or off", what, text));
}

// Setting::apply for the usual shapes: a parser of (text, what), or of the text alone (an enum's:
// its message gets `what` in front); a whole number in [Lo, Hi] (of SpecParams or RunParams).
template <auto Member, auto Parse>
void set(SpecParams& p, std::string_view text, std::string_view what) {
  if constexpr (std::is_invocable_v<decltype(Parse), std::string_view>) {
    try {
      p.*Member = Parse(text);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{} {}", what, e.what()));
    }
  } else {
    p.*Member = Parse(text, what);
  }
}
template <auto Member, std::int64_t Lo, std::int64_t Hi, class Params>
void set_whole(Params& p, std::string_view text, std::string_view what) {
  using T = typename decltype(std::optional(p.*Member))::value_type;  // the member's type, or its optional's value
  p.*Member = static_cast<T>(parse_int(text, what, Lo, Hi));
}

// ---- the wire codec, by value type ----------------------------------------------------------

template <typename T>
nlohmann::json to_wire(const T& v) {
  if constexpr (std::is_enum_v<T>) {
    return to_string(v);  // by name
  } else if constexpr (std::is_same_v<T, std::chrono::nanoseconds>) {
    return v.count();
  } else {
    return v;
  }
}

// Names of values are short; free text (a device list) is bounded by what make() accepts.
constexpr std::size_t kMaxName = 32;
constexpr std::size_t kMaxText = 256;

template <typename T>
T from_wire(const Fields& f, const char* k) {
  if constexpr (std::is_same_v<T, bool>) {
    return f.boolean(k);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return f.str(k, kMaxText);
  } else if constexpr (std::is_same_v<T, std::chrono::nanoseconds>) {
    return std::chrono::nanoseconds(f.i64(k, INT64_MIN, INT64_MAX));
  } else if constexpr (std::is_enum_v<T>) {  // by name, through the parser of its type
    constexpr auto kParsers =
        std::make_tuple(&parse_test_kind, &parse_mode, &parse_transport, &parse_send_method, &parse_rdma_verb);
    return std::get<T (*)(std::string_view)>(kParsers)(f.str(k, kMaxName));
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    std::vector<int> out;
    for (const auto& e : f.array(k, 4096)) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < INT_MIN || e.get<std::int64_t>() > INT_MAX ||
          (e.is_number_unsigned() && e.get<std::uint64_t>() > INT_MAX)) {
        throw ProtocolError(fmt::format("{}: entries must be integers", f.ctx(k)));
      }
      out.push_back(e.get<int>());
    }
    return out;
  } else if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(f.u64(k, 0, std::numeric_limits<T>::max()));
  } else {
    static_assert(std::is_signed_v<T>);
    return static_cast<T>(f.i64(k, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  }
}

constexpr bool kRequired = true;

// A setting that is one field of SpecParams and one getter of TestSpec.
template <auto Member, auto Getter, bool Required = false>
struct Plain {
  static void encode(const TestSpec& s, nlohmann::json& j, const char* key) { j[key] = to_wire((s.*Getter)()); }
  static void decode(const Fields& f, SpecParams& p, const char* key) {
    using T = typename std::remove_reference_t<decltype(p.*Member)>::value_type;
    if (Required || f.has(key)) p.*Member = from_wire<T>(f, key);
  }
  static bool given(const SpecParams& p) { return (p.*Member).has_value(); }
};
template <auto Member, auto Getter, bool Required = false>
constexpr SettingCodec wire{&Plain<Member, Getter, Required>::encode, &Plain<Member, Getter, Required>::decode,
                            &Plain<Member, Getter, Required>::given};

// socksize carries "auto" beside the size (0 while the coordinator has not sized it).
void socksize_encode(const TestSpec& s, nlohmann::json& j, const char* key) {
  j[key] = s.socksize();
  j["socksize_auto"] = s.socksize_auto();
}
void socksize_decode(const Fields& f, SpecParams& p, const char* key) {
  p.socksize = from_wire<std::uint64_t>(f, key);
  if (f.has("socksize_auto")) p.socksize_auto = f.boolean("socksize_auto");
}
// "sendfile" is kept for readers of results from before send_method (they only add fields): what
// was asked, not what ran (with auto, each agent's choice is in nodes[].trials). Never read back.
void send_method_encode(const TestSpec& s, nlohmann::json& j, const char* key) {
  j[key] = to_string(s.send_method());
  j["sendfile"] = s.send_method() == SendMethod::sendfile;
}

// The table. Ranges are TestSpec::make's (which checks them again, for every source); a parser
// here only turns text into a value.
constexpr Setting kSettings[] = {
    {"test", "test", "test", SettingKind::value, "TEST", "write", "test", "write, read, rw, nwrite, swrite or sread",
     "", set<&SpecParams::test, parse_test_kind>, wire<&SpecParams::test, &TestSpec::test, kRequired>},
    {"mode", "mode", "test", SettingKind::value, "MODE", "rpc", "",
     "rpc (nsdperf-like blocks with a reply) or stream (continuous)", "", set<&SpecParams::mode, parse_mode>,
     wire<&SpecParams::mode, &TestSpec::mode, kRequired>},
    {"transport", "transport", "test", SettingKind::value, "tcp|rdma", "tcp", "rdma", "tcp or rdma", "",
     set<&SpecParams::transport, parse_transport>, wire<&SpecParams::transport, &TestSpec::transport, kRequired>},
    {"time", "time_ns", "test", SettingKind::value, "SECONDS", "10", "ttime", "test time in seconds", "",
     set<&SpecParams::time, parse_duration>, wire<&SpecParams::time, &TestSpec::time, kRequired>},
    {"buffsize", "buffsize", "test", SettingKind::value, "SIZE", "4M", "buffsize", "block size, 4K..16M", "",
     set<&SpecParams::buffsize, parse_size>, wire<&SpecParams::buffsize, &TestSpec::buffsize, kRequired>},
    {"socksize", "socksize", "test", SettingKind::value, "SIZE|auto", "0", "socksize",
     "socket buffer size, 0 = OS default, auto = twice the bandwidth-delay product of the slowest link", "tcp",
     [](SpecParams& p, std::string_view t, std::string_view w) {
       if (t == "auto") {
         p.socksize_auto = true;
         p.socksize = 0;
       } else {
         p.socksize_auto = false;
         p.socksize = parse_size(t, w);
       }
     },
     SettingCodec{&socksize_encode, &socksize_decode,
                  [](const SpecParams& p) { return p.socksize.has_value() || p.socksize_auto.has_value(); }}},
    {"threads", "threads", "test", SettingKind::value, "N", "4", "threads", "tester threads per client (rpc mode)", "",
     set_whole<&SpecParams::threads, 1, limits::kMaxThreads>,
     wire<&SpecParams::threads, &TestSpec::threads, kRequired>},
    {"parallel", "parallel", "test", SettingKind::value, "N", "1", "parallel", "TCP connections per client-server pair",
     "", set_whole<&SpecParams::parallel, 1, limits::kMaxParallel>,
     wire<&SpecParams::parallel, &TestSpec::parallel, kRequired>},
    {"warmup", "warmup_ns", "test", SettingKind::value, "SECONDS", "10% of time", "",
     "seconds excluded at the start (the host-dependent choices are tried in it)", "",
     set<&SpecParams::warmup, parse_duration>, wire<&SpecParams::warmup, &TestSpec::warmup, kRequired>},
    {"cooldown", "cooldown_ns", "test", SettingKind::value, "SECONDS", "10% of time", "", "seconds excluded at the end",
     "", set<&SpecParams::cooldown, parse_duration>, wire<&SpecParams::cooldown, &TestSpec::cooldown, kRequired>},
    {"verify", "verify", "test", SettingKind::flag, "", "off", "verify",
     "receivers check every byte against the sent pattern", "", set<&SpecParams::verify, flag_value>,
     wire<&SpecParams::verify, &TestSpec::verify>},
    {"send-method", "send_method", "tuning", SettingKind::value, "METHOD", "auto", "",
     "TCP senders: auto (each agent tries write and sendfile in the warm-up and keeps the faster on its host), write "
     "(send from a buffer), zerocopy (MSG_ZEROCOPY, stream mode) or sendfile (from a memfd)",
     "tcp", set<&SpecParams::send_method, parse_send_method>,
     SettingCodec{&send_method_encode, &Plain<&SpecParams::send_method, &TestSpec::send_method>::decode,
                  &Plain<&SpecParams::send_method, &TestSpec::send_method>::given}},
    {"zerocopy", "zerocopy", "tuning", SettingKind::flag, "", "off", "",
     "stream senders use MSG_ZEROCOPY (completions reaped); the same as send-method zerocopy", "tcp",
     set<&SpecParams::zerocopy, flag_value>, wire<&SpecParams::zerocopy, &TestSpec::zerocopy>},
    {"skip-rx-copy", "skip_rx_copy", "tuning", SettingKind::flag, "", "off", "",
     "receivers discard data in the kernel (MSG_TRUNC) instead of copying it", "tcp",
     set<&SpecParams::skip_rx_copy, flag_value>, wire<&SpecParams::skip_rx_copy, &TestSpec::skip_rx_copy>},
    {"congestion", "congestion", "tuning", SettingKind::value, "NAME", "the host's", "",
     "TCP congestion control, e.g. cubic or bbr", "tcp",
     [](SpecParams& p, std::string_view t, std::string_view) { p.congestion = std::string(t); },
     wire<&SpecParams::congestion, &TestSpec::congestion>},
    {"rate", "rate", "tuning", SettingKind::value, "BYTES/S", "off", "",
     "pace each connection to this many bytes/s (SO_MAX_PACING_RATE), e.g. 100M", "tcp",
     set<&SpecParams::rate, parse_size>, wire<&SpecParams::rate, &TestSpec::rate>},
    {"busy-poll", "busy_poll_us", "tuning", SettingKind::value, "US", "off", "", "SO_BUSY_POLL microseconds", "tcp",
     set_whole<&SpecParams::busy_poll_us, 0, limits::kMaxBusyPollUs>,
     wire<&SpecParams::busy_poll_us, &TestSpec::busy_poll_us>},
    {"notsent-lowat", "notsent_lowat", "tuning", SettingKind::value, "SIZE", "kernel's", "", "TCP_NOTSENT_LOWAT bytes",
     "tcp", set<&SpecParams::notsent_lowat, parse_size>, wire<&SpecParams::notsent_lowat, &TestSpec::notsent_lowat>},
    {"delay-probe", "delay_probe_ns", "tuning", SettingKind::value, "SECONDS|off", "0.01", "",
     "ping every server this often for the network-delay histogram; off: no pings (many agents on few cores)", "tcp",
     [](SpecParams& p, std::string_view t, std::string_view w) {
       p.delay_probe = t == "off" ? std::chrono::nanoseconds(0) : parse_duration(t, w);
     },
     wire<&SpecParams::delay_probe, &TestSpec::delay_probe>},
    {"cpus", "cpus", "tuning", SettingKind::value, "LIST", "the NIC's NUMA node", "",
     "pin data threads round-robin to these CPUs, e.g. 0-3,8", "", set<&SpecParams::cpus, parse_cpu_list>,
     wire<&SpecParams::cpus, &TestSpec::cpus>},
    {"no-affinity", "no_affinity", "tuning", SettingKind::flag, "", "off", "", "never pin data threads", "",
     set<&SpecParams::no_affinity, flag_value>, wire<&SpecParams::no_affinity, &TestSpec::no_affinity>},
    {"spread-ports", "spread_ports", "bonding", SettingKind::flag, "", "off", "",
     "clients bind source ports chosen so that their flows cover every member of the local bond evenly under its "
     "xmit_hash_policy (802.3ad/balance-xor with layer3+4); the ports used are reported",
     "tcp", set<&SpecParams::spread_ports, flag_value>, wire<&SpecParams::spread_ports, &TestSpec::spread_ports>},
    {"rdma-device", "rdma_device", "rdma", SettingKind::value, "DEV[:PORT],...",
     "the port whose RoCE v2 GID matches the test address", "", "RDMA devices to use", "rdma",
     [](SpecParams& p, std::string_view t, std::string_view) { p.rdma_device = std::string(t); },
     wire<&SpecParams::rdma_device, &TestSpec::rdma_device>},
    {"gid-index", "gid_index", "rdma", SettingKind::value, "N", "matched to the test address", "",
     "use this GID index instead of matching the test address", "rdma",
     set_whole<&SpecParams::gid_index, 0, limits::kMaxGidIndex>, wire<&SpecParams::gid_index, &TestSpec::gid_index>},
    {"rdma-verb", "rdma_verb", "rdma", SettingKind::value, "write|send", "write", "",
     "how write-like blocks move: write (RDMA WRITE_WITH_IMM) or send (SEND/RECV)", "rdma",
     set<&SpecParams::rdma_verb, parse_rdma_verb>, wire<&SpecParams::rdma_verb, &TestSpec::rdma_verb>},
    {"qdepth", "qdepth", "rdma", SettingKind::value, "N", "16", "", "work requests in flight per QP (stream mode)",
     "rdma", set_whole<&SpecParams::qdepth, 1, limits::kMaxQdepth>, wire<&SpecParams::qdepth, &TestSpec::qdepth>},
    {"inline", "inline_size", "rdma", SettingKind::value, "BYTES", "0", "",
     "max_inline_data asked for each QP; blocks up to it are sent inline", "rdma",
     set_whole<&SpecParams::inline_size, 0, limits::kMaxInline>,
     wire<&SpecParams::inline_size, &TestSpec::inline_size>},
    {"cq-mod", "cq_mod", "rdma", SettingKind::value, "N", "1", "",
     "stream senders ask for a completion every N posts (CQ moderation)", "rdma",
     set_whole<&SpecParams::cq_mod, 1, limits::kMaxQdepth>, wire<&SpecParams::cq_mod, &TestSpec::cq_mod>},
    {"rdma-events", "rdma_events", "rdma", SettingKind::flag, "", "off", "",
     "posting side and rpc wait for completion events instead of busy polling (a stream's counting end always does)",
     "rdma", set<&SpecParams::rdma_events, flag_value>, wire<&SpecParams::rdma_events, &TestSpec::rdma_events>},
    {"rdma-cm", "rdma_cm", "rdma", SettingKind::flag, "", "off", "usecm",
     "connect queue pairs with librdmacm (rdma_cm) instead of through the coordinator", "rdma",
     set<&SpecParams::rdma_cm, flag_value>, wire<&SpecParams::rdma_cm, &TestSpec::rdma_cm>},
};

constexpr RunSetting kRunSettings[] = {
    {"interval", "interval", "test", "1", "sampling interval of the time series",
     [](RunParams& p, std::string_view t, std::string_view w) {
       p.interval = parse_duration(t, w);
       if (p.interval < std::chrono::milliseconds(10)) throw UsageError(fmt::format("{}: must be at least 0.01 s", w));
     }},
    {"concurrent-pairs", "concurrent-pairs", "plan", "1", "all-pairs: disjoint pairs per step",
     set_whole<&RunParams::concurrent_pairs, 1, 4096>},
    {"ring-k", "k", "plan", "1", "ring: node i loads node i+k", set_whole<&RunParams::ring_k, 1, 65535>},
    {"per-link", "per-link", "per-link", "all",
     "with several links per host: 'all' at once (default) or 'sequential' (one test step per link)",
     [](RunParams& p, std::string_view t, std::string_view w) {
       if (t != "all" && t != "sequential") throw UsageError(fmt::format("{} '{}': expected all or sequential", w, t));
       p.per_link_sequential = t == "sequential";
     }},
};

}  // namespace

std::span<const RunSetting> run_settings() {
  return kRunSettings;
}

std::span<const Setting> spec_settings() {
  return kSettings;
}

const Setting* find_setting(std::string_view name) {
  const auto* it = std::ranges::find(kSettings, name, [](const Setting& s) { return std::string_view(s.name); });
  return it == std::end(kSettings) ? nullptr : it;
}

void refuse_inapplicable(const SpecParams& p) {
  const std::string_view transport = to_string(p.transport.value_or(Transport::tcp));
  for (const auto& st : kSettings) {
    if (*st.only && transport != st.only && st.given(p)) {
      throw UsageError(fmt::format("--{}: {} only (this test's transport is {})", st.name,
                                   std::string_view(st.only) == "rdma" ? "RDMA (--transport rdma)" : "TCP", transport));
    }
  }
}

nlohmann::json to_json(const TestSpec& s) {
  auto j = nlohmann::json::object();
  for (const auto& st : kSettings) st.wire.encode(s, j, st.key);
  return j;
}

TestSpec spec_from_json(const nlohmann::json& j) {
  const Fields f(j, "spec");
  SpecParams p;
  for (const auto& st : kSettings) {
    try {
      st.wire.decode(f, p, st.key);
    } catch (const UsageError& e) {  // a name the parser does not know
      throw ProtocolError(fmt::format("{}: {}", f.ctx(st.key), e.what()));
    }
  }
  try {
    return TestSpec::make(p);
  } catch (const UsageError& e) {
    throw ProtocolError(fmt::format("spec: {}", e.what()));
  }
}

std::string settings_markdown() {
  std::string out =
      "| setting | nsdperf | default | transport | what it does |\n"
      "|---|---|---|---|---|\n";
  for (const auto& s : kSettings) {
    out += fmt::format("| `{}{}{}` | {} | {} | {} | {} |\n", s.name, s.kind == SettingKind::value ? " " : "", s.value,
                       *s.nsdperf ? fmt::format("`{}`", s.nsdperf) : std::string("-"), s.deflt,
                       *s.only ? s.only : "both", s.help);
  }
  return out;
}

}  // namespace fabperf
