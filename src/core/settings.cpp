#include <fabperf/settings.hpp>

#include <fmt/format.h>

#include <array>

#include <fabperf/error.hpp>
#include <fabperf/units.hpp>

namespace fabperf {
namespace {

bool flag_value(std::string_view text, std::string_view what) {
  if (text == "true" || text == "on" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "off" || text == "0" || text == "no") return false;
  throw UsageError(fmt::format("{} '{}': expected on or off", what, text));
}

template <typename T>
T whole(std::string_view text, std::string_view what, std::int64_t lo, std::int64_t hi) {
  return static_cast<T>(parse_int(text, what, lo, hi));
}

// Parsers that take the setting's own words: the message names `what`.
template <typename F>
auto named(std::string_view what, F&& f) {
  try {
    return f();
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{} {}", what, e.what()));
  }
}

// The table. Ranges are TestSpec::make's (which checks them again, for every source); a parser
// here only turns text into a value.
constexpr Setting kSettings[] = {
    {"test", "test", "test", SettingKind::value, "TEST", "write", "test", "write, read, rw, nwrite, swrite or sread",
     "",
     [](SpecParams& p, std::string_view t, std::string_view w) {
       p.test = named(w, [&] { return parse_test_kind(t); });
     },
     [](const SpecParams& p) { return p.test.has_value(); }},
    {"mode", "mode", "test", SettingKind::value, "MODE", "rpc", "",
     "rpc (nsdperf-like blocks with a reply) or stream (continuous)", "",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.mode = named(w, [&] { return parse_mode(t); }); },
     [](const SpecParams& p) { return p.mode.has_value(); }},
    {"transport", "transport", "test", SettingKind::value, "tcp|rdma", "tcp", "rdma", "tcp or rdma", "",
     [](SpecParams& p, std::string_view t, std::string_view w) {
       p.transport = named(w, [&] { return parse_transport(t); });
     },
     [](const SpecParams& p) { return p.transport.has_value(); }},
    {"time", "time_ns", "test", SettingKind::value, "SECONDS", "10", "ttime", "test time in seconds", "",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.time = parse_duration(t, w); },
     [](const SpecParams& p) { return p.time.has_value(); }},
    {"buffsize", "buffsize", "test", SettingKind::value, "SIZE", "4M", "buffsize", "block size, 4K..16M", "",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.buffsize = parse_size(t, w); },
     [](const SpecParams& p) { return p.buffsize.has_value(); }},
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
     [](const SpecParams& p) { return p.socksize.has_value() || p.socksize_auto.has_value(); }},
    {"threads", "threads", "test", SettingKind::value, "N", "4", "threads", "tester threads per client (rpc mode)", "",
     [](SpecParams& p, std::string_view t, std::string_view w) {
       p.threads = whole<std::uint32_t>(t, w, 1, limits::kMaxThreads);
     },
     [](const SpecParams& p) { return p.threads.has_value(); }},
    {"parallel", "parallel", "test", SettingKind::value, "N", "1", "parallel", "TCP connections per client-server pair",
     "",
     [](SpecParams& p, std::string_view t, std::string_view w) {
       p.parallel = whole<std::uint32_t>(t, w, 1, limits::kMaxParallel);
     },
     [](const SpecParams& p) { return p.parallel.has_value(); }},
    {"warmup", "warmup_ns", "test", SettingKind::value, "SECONDS", "10% of time", "",
     "seconds excluded at the start (the host-dependent choices are tried in it)", "",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.warmup = parse_duration(t, w); },
     [](const SpecParams& p) { return p.warmup.has_value(); }},
    {"cooldown", "cooldown_ns", "test", SettingKind::value, "SECONDS", "10% of time", "", "seconds excluded at the end",
     "", [](SpecParams& p, std::string_view t, std::string_view w) { p.cooldown = parse_duration(t, w); },
     [](const SpecParams& p) { return p.cooldown.has_value(); }},
    {"verify", "verify", "test", SettingKind::flag, "", "off", "verify",
     "receivers check every byte against the sent pattern", "",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.verify = flag_value(t, w); },
     [](const SpecParams& p) { return p.verify.has_value(); }},
    {"send-method", "send_method", "tuning", SettingKind::value, "METHOD", "auto", "",
     "TCP senders: auto (each agent tries write and sendfile in the warm-up and keeps the faster on its host), write "
     "(send from a buffer), zerocopy (MSG_ZEROCOPY, stream mode) or sendfile (from a memfd)",
     "tcp",
     [](SpecParams& p, std::string_view t, std::string_view w) {
       p.send_method = named(w, [&] { return parse_send_method(t); });
     },
     [](const SpecParams& p) { return p.send_method.has_value(); }},
    {"zerocopy", "zerocopy", "tuning", SettingKind::flag, "", "off", "",
     "stream senders use MSG_ZEROCOPY (completions reaped); the same as send-method zerocopy", "tcp",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.zerocopy = flag_value(t, w); },
     [](const SpecParams& p) { return p.zerocopy.has_value(); }},
    {"skip-rx-copy", "skip_rx_copy", "tuning", SettingKind::flag, "", "off", "",
     "receivers discard data in the kernel (MSG_TRUNC) instead of copying it", "tcp",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.skip_rx_copy = flag_value(t, w); },
     [](const SpecParams& p) { return p.skip_rx_copy.has_value(); }},
    {"congestion", "congestion", "tuning", SettingKind::value, "NAME", "the host's", "",
     "TCP congestion control, e.g. cubic or bbr", "tcp",
     [](SpecParams& p, std::string_view t, std::string_view) { p.congestion = std::string(t); },
     [](const SpecParams& p) { return p.congestion.has_value(); }},
    {"rate", "rate", "tuning", SettingKind::value, "BYTES/S", "off", "",
     "pace each connection to this many bytes/s (SO_MAX_PACING_RATE), e.g. 100M", "tcp",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.rate = parse_size(t, w); },
     [](const SpecParams& p) { return p.rate.has_value(); }},
    {"busy-poll", "busy_poll_us", "tuning", SettingKind::value, "US", "off", "", "SO_BUSY_POLL microseconds", "tcp",
     [](SpecParams& p, std::string_view t, std::string_view w) {
       p.busy_poll_us = whole<std::uint32_t>(t, w, 0, 1'000'000);
     },
     [](const SpecParams& p) { return p.busy_poll_us.has_value(); }},
    {"notsent-lowat", "notsent_lowat", "tuning", SettingKind::value, "SIZE", "kernel's", "", "TCP_NOTSENT_LOWAT bytes",
     "tcp", [](SpecParams& p, std::string_view t, std::string_view w) { p.notsent_lowat = parse_size(t, w); },
     [](const SpecParams& p) { return p.notsent_lowat.has_value(); }},
    {"cpus", "cpus", "tuning", SettingKind::value, "LIST", "the NIC's NUMA node", "",
     "pin data threads round-robin to these CPUs, e.g. 0-3,8", "",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.cpus = parse_cpu_list(t, w); },
     [](const SpecParams& p) { return p.cpus.has_value(); }},
    {"no-affinity", "no_affinity", "tuning", SettingKind::flag, "", "off", "", "never pin data threads", "",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.no_affinity = flag_value(t, w); },
     [](const SpecParams& p) { return p.no_affinity.has_value(); }},
    {"spread-ports", "spread_ports", "bonding", SettingKind::flag, "", "off", "",
     "clients bind source ports chosen so that their flows cover every member of the local bond evenly under its "
     "xmit_hash_policy (802.3ad/balance-xor with layer3+4); the ports used are reported",
     "tcp", [](SpecParams& p, std::string_view t, std::string_view w) { p.spread_ports = flag_value(t, w); },
     [](const SpecParams& p) { return p.spread_ports.has_value(); }},
    {"rdma-device", "rdma_device", "rdma", SettingKind::value, "DEV[:PORT],...",
     "the port whose RoCE v2 GID matches the test address", "", "RDMA devices to use", "rdma",
     [](SpecParams& p, std::string_view t, std::string_view) { p.rdma_device = std::string(t); },
     [](const SpecParams& p) { return p.rdma_device.has_value(); }},
    {"gid-index", "gid_index", "rdma", SettingKind::value, "N", "matched to the test address", "",
     "use this GID index instead of matching the test address", "rdma",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.gid_index = whole<std::int32_t>(t, w, 0, 65535); },
     [](const SpecParams& p) { return p.gid_index.has_value(); }},
    {"rdma-verb", "rdma_verb", "rdma", SettingKind::value, "write|send", "write", "",
     "how write-like blocks move: write (RDMA WRITE_WITH_IMM) or send (SEND/RECV)", "rdma",
     [](SpecParams& p, std::string_view t, std::string_view w) {
       p.rdma_verb = named(w, [&] { return parse_rdma_verb(t); });
     },
     [](const SpecParams& p) { return p.rdma_verb.has_value(); }},
    {"qdepth", "qdepth", "rdma", SettingKind::value, "N", "16", "", "work requests in flight per QP (stream mode)",
     "rdma",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.qdepth = whole<std::uint32_t>(t, w, 1, 4096); },
     [](const SpecParams& p) { return p.qdepth.has_value(); }},
    {"inline", "inline_size", "rdma", SettingKind::value, "BYTES", "0", "",
     "max_inline_data asked for each QP; blocks up to it are sent inline", "rdma",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.inline_size = whole<std::uint32_t>(t, w, 0, 4096); },
     [](const SpecParams& p) { return p.inline_size.has_value(); }},
    {"cq-mod", "cq_mod", "rdma", SettingKind::value, "N", "1", "",
     "stream senders ask for a completion every N posts (CQ moderation)", "rdma",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.cq_mod = whole<std::uint32_t>(t, w, 1, 4096); },
     [](const SpecParams& p) { return p.cq_mod.has_value(); }},
    {"rdma-events", "rdma_events", "rdma", SettingKind::flag, "", "off", "",
     "posting side and rpc wait for completion events instead of busy polling (a stream's counting end always does)",
     "rdma", [](SpecParams& p, std::string_view t, std::string_view w) { p.rdma_events = flag_value(t, w); },
     [](const SpecParams& p) { return p.rdma_events.has_value(); }},
    {"rdma-cm", "rdma_cm", "rdma", SettingKind::flag, "", "off", "usecm",
     "connect queue pairs with librdmacm (rdma_cm) instead of through the coordinator", "rdma",
     [](SpecParams& p, std::string_view t, std::string_view w) { p.rdma_cm = flag_value(t, w); },
     [](const SpecParams& p) { return p.rdma_cm.has_value(); }},
};

}  // namespace

std::span<const Setting> spec_settings() {
  return kSettings;
}

const Setting* find_setting(std::string_view name) {
  for (const auto& s : kSettings) {
    if (name == s.name) return &s;
  }
  return nullptr;
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
