#include <fabperf/core/error.hpp>
#include <fabperf/core/spec.hpp>
#include <fabperf/core/units.hpp>

#include <fmt/format.h>
#include <netdb.h>
#include <algorithm>
#include <span>

namespace fabperf {

namespace {
template <class E>
E parse_named(std::span<const std::string_view> names, std::string_view s, std::string_view expected) {
  if (const auto it = std::ranges::find(names, s); it != names.end()) return static_cast<E>(it - names.begin());
  throw UsageError(fmt::format("'{}': {}", s, expected));
}
double secs(std::chrono::nanoseconds d) {
  return static_cast<double>(d.count()) / 1e9;
}
HostPort parse_plain_host_port(std::string_view text, std::string_view what) {
  HostPort hp;
  auto bad = [&](std::string_view why) { return UsageError(fmt::format("{} '{}': {}", what, text, why)); };
  if (text.empty()) throw bad("empty host");
  std::string_view port_text;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) throw bad("missing ']' after IPv6 address");
    hp.host = std::string(text.substr(1, close - 1));
    const auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') throw bad("expected ':PORT' after ']'");
      port_text = rest.substr(1);
      if (port_text.empty()) throw bad("empty port");
    }
  } else {
    const auto first = text.find(':');
    const bool bare_v6 = first != std::string_view::npos && text.find(':', first + 1) != std::string_view::npos;
    if (first != std::string_view::npos && !bare_v6) {
      hp.host = std::string(text.substr(0, first));
      port_text = text.substr(first + 1);
      if (port_text.empty()) throw bad("empty port");
    } else {
      hp.host = std::string(text);  // a name or address without a port, or a bare IPv6 literal
    }
  }
  if (hp.host.empty()) throw bad("empty host");
  if (hp.host.size() > 253) throw bad("host name too long");
  for (char c : hp.host) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == ':' || c == '%')) {
      throw bad(fmt::format("invalid character '{}' in host", c));
    }
  }
  if (!port_text.empty()) {
    hp.port = static_cast<std::uint16_t>(parse_int(port_text, fmt::format("{} port", what), 0, 65535));
  }
  return hp;
}
}  // namespace

// An enum's names in value order, declared once for both directions: its to_string and its parser
// (whose error says what it expected).
#define FABPERF_ENUM_NAMES(E, parse, expected, ...)         \
  constexpr std::string_view k##E##Names[] = {__VA_ARGS__}; \
  std::string_view to_string(E v) {                         \
    return k##E##Names[static_cast<int>(v)];                \
  }                                                         \
  E parse(std::string_view s) {                             \
    return parse_named<E>(k##E##Names, s, expected);        \
  }
FABPERF_ENUM_NAMES(TestKind, parse_test_kind, "unknown test (write, read, rw, nwrite, swrite or sread)", "write",
                   "read", "rw", "nwrite", "swrite", "sread")
FABPERF_ENUM_NAMES(Mode, parse_mode, "unknown mode (rpc or stream)", "rpc", "stream")
FABPERF_ENUM_NAMES(Transport, parse_transport, "unknown transport (tcp or rdma)", "tcp", "rdma")
FABPERF_ENUM_NAMES(RdmaVerb, parse_rdma_verb, "unknown verb (write or send)", "write", "send")
FABPERF_ENUM_NAMES(SendMethod, parse_send_method, "expected auto, write, zerocopy or sendfile", "auto", "write",
                   "sendfile", "zerocopy")
#undef FABPERF_ENUM_NAMES

bool is_write_like(TestKind t) {
  return t == TestKind::write || t == TestKind::nwrite || t == TestKind::swrite;
}
bool is_sticky(TestKind t) {
  return t == TestKind::swrite || t == TestKind::sread;
}

TestSpec TestSpec::with_auto_socksize(std::uint64_t bytes) const {
  if (bytes > limits::kMaxSocksize) throw UsageError(fmt::format("--socksize auto: {} B is past the maximum", bytes));
  TestSpec s = *this;
  s.socksize_ = bytes;
  return s;
}

TestSpec TestSpec::make(const SpecParams& p) {
  TestSpec s;  // the defaults, then what p gives
#define FABPERF_SPEC_RESOLVE(T, name, deflt) \
  if (p.name) s.name##_ = *p.name;
  FABPERF_SPEC_FIELDS(FABPERF_SPEC_RESOLVE)
#undef FABPERF_SPEC_RESOLVE

  if (s.buffsize_ < limits::kMinBuffsize || s.buffsize_ > limits::kMaxBuffsize) {
    throw UsageError(fmt::format("--buffsize {}: out of range ({}..{})", format_size(s.buffsize_),
                                 format_size(limits::kMinBuffsize), format_size(limits::kMaxBuffsize)));
  }
  if (s.socksize_ > limits::kMaxSocksize) {
    throw UsageError(fmt::format("--socksize {}: out of range (0 = OS default, up to {})", format_size(s.socksize_),
                                 format_size(limits::kMaxSocksize)));
  }
  if (s.threads_ < 1 || s.threads_ > limits::kMaxThreads) {
    throw UsageError(fmt::format("--threads {}: out of range (1..{})", s.threads_, limits::kMaxThreads));
  }
  if (s.parallel_ < 1 || s.parallel_ > limits::kMaxParallel) {
    throw UsageError(fmt::format("--parallel {}: out of range (1..{})", s.parallel_, limits::kMaxParallel));
  }
  if (s.time_ < limits::kMinTime || s.time_ > limits::kMaxTime) {
    throw UsageError(fmt::format("--time {}: out of range (0.2 s .. 1 week)", secs(s.time_)));
  }
  if (s.test_ == TestKind::rw && s.mode_ == Mode::rpc && s.threads_ < 2) {
    throw UsageError("--test rw in rpc mode needs --threads >= 2 (half the threads read, half write)");
  }
  // nsdperf measures from 10% to 90% of the test time.
  s.warmup_ = p.warmup.value_or(s.time_ / 10);
  s.cooldown_ = p.cooldown.value_or(s.time_ / 10);
  // Checked one by one before they are added: a decoded spec may carry any 64-bit count.
  if (s.warmup_.count() < 0 || s.cooldown_.count() < 0) {
    throw UsageError(fmt::format("--warmup {} s, --cooldown {} s: negative", secs(s.warmup_), secs(s.cooldown_)));
  }
  if (s.warmup_ >= s.time_ || s.cooldown_ >= s.time_ || s.warmup_ + s.cooldown_ >= s.time_) {
    throw UsageError(fmt::format("--warmup {} s + --cooldown {} s leave no measurement window in --time {} s",
                                 secs(s.warmup_), secs(s.cooldown_), secs(s.time_)));
  }
  if (s.window() < std::chrono::milliseconds(100)) {
    throw UsageError(fmt::format("measurement window {} s is shorter than 0.1 s", secs(s.window())));
  }
  if (p.zerocopy.value_or(false)) {
    if (p.send_method && *p.send_method != SendMethod::zerocopy) {
      throw UsageError(
          fmt::format("--zerocopy and --send-method {}: alternatives, choose one", to_string(*p.send_method)));
    }
    s.send_method_ = SendMethod::zerocopy;
  }
  if (s.transport_ != Transport::tcp && s.send_method_ != SendMethod::automatic) {
    throw UsageError(fmt::format("--send-method {}: TCP only (--transport tcp)", to_string(s.send_method_)));
  }
  // Only the stream sender implements MSG_ZEROCOPY: refused elsewhere rather than ignored.
  if (s.zerocopy() && s.mode_ != Mode::stream) {
    throw UsageError("--zerocopy (--send-method zerocopy): TCP stream mode only (--mode stream)");
  }
  if (s.congestion_.size() > 15 ||
      s.congestion_.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    throw UsageError(
        fmt::format("--congestion '{}': not a congestion control name (e.g. cubic, bbr, reno)", s.congestion_));
  }
  if (s.rate_ != 0 && s.rate_ < 1000) throw UsageError(fmt::format("--rate {}: below 1000 bytes/s", s.rate_));
  if (s.busy_poll_us_ > limits::kMaxBusyPollUs)
    throw UsageError(fmt::format("--busy-poll {}: out of range (0..{} us)", s.busy_poll_us_, limits::kMaxBusyPollUs));
  if (s.notsent_lowat_ > limits::kMaxSocksize)
    throw UsageError(fmt::format("--notsent-lowat: out of range (up to {})", format_size(limits::kMaxSocksize)));
  if (s.delay_probe_.count() != 0 &&
      (s.delay_probe_ < std::chrono::milliseconds(1) || s.delay_probe_ > std::chrono::seconds(10)))
    throw UsageError(fmt::format("--delay-probe {}: out of range (off, or 0.001..10 s)", secs(s.delay_probe_)));
  if (s.cpus_.size() > limits::kMaxCpus) throw UsageError(fmt::format("--cpus: more than {} CPUs", limits::kMaxCpus));
  for (int c : s.cpus_) {
    if (c < 0 || c >= limits::kMaxCpus)
      throw UsageError(fmt::format("--cpus: CPU {} out of range (0..{})", c, limits::kMaxCpus - 1));
  }
  if (s.verify_ && s.skip_rx_copy_)
    throw UsageError("verify needs the received data: it cannot be combined with --skip-rx-copy");
  if (s.no_affinity_ && !s.cpus_.empty()) throw UsageError("--cpus and --no-affinity contradict each other");
  if (s.rdma_device_.size() > 256 ||
      s.rdma_device_.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:,") !=
          std::string::npos) {
    throw UsageError(
        fmt::format("--rdma-device '{}': not a list of DEV[:PORT] (e.g. mlx5_0:1,mlx5_1)", s.rdma_device_));
  }
  if (s.gid_index_ < -1 || s.gid_index_ > limits::kMaxGidIndex)
    throw UsageError(fmt::format("--gid-index {}: out of range (0..{})", s.gid_index_, limits::kMaxGidIndex));
  if (s.qdepth_ < 1 || s.qdepth_ > limits::kMaxQdepth)
    throw UsageError(fmt::format("--qdepth {}: out of range (1..{})", s.qdepth_, limits::kMaxQdepth));
  if (s.inline_size_ > limits::kMaxInline)
    throw UsageError(fmt::format("--inline {}: out of range (0..{} bytes)", s.inline_size_, limits::kMaxInline));
  if (s.cq_mod_ < 1 || s.cq_mod_ > s.qdepth_) {
    throw UsageError(fmt::format("--cq-mod {}: out of range (1..--qdepth {})", s.cq_mod_, s.qdepth_));
  }
  if (s.rdma_cm_ && s.transport_ != Transport::rdma) throw UsageError("--rdma-cm: only with --transport rdma");
  if (s.transport_ == Transport::rdma && s.verify_) {
    throw UsageError("--verify is not available with --transport rdma (RDMA blocks land in one shared buffer)");
  }
  return s;
}

std::vector<int> parse_cpu_list(std::string_view text, std::string_view what) {
  std::vector<int> out;
  for (const std::string& item : split_list(text, ',')) {
    const auto dash = item.find('-');
    const std::int64_t lo = parse_int(item.substr(0, dash), what, 0, limits::kMaxCpus - 1);
    const std::int64_t hi =
        dash == std::string::npos ? lo : parse_int(item.substr(dash + 1), what, 0, limits::kMaxCpus - 1);
    if (hi < lo) throw UsageError(fmt::format("{} '{}': range {} runs backwards", what, text, item));
    for (auto c = lo; c <= hi; ++c) out.push_back(static_cast<int>(c));
  }
  return out;
}

std::uint32_t TestSpec::connections_per_pair() const {
  if (mode_ == Mode::stream && test_ == TestKind::rw) return 2 * parallel_;
  return parallel_;
}

std::string HostPort::str() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

const char* resolve_error(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) return gai_strerror(rc);
  freeaddrinfo(res);
  return nullptr;
}

HostPort parse_host_port(std::string_view text, std::string_view what) {
  const auto at = text.find('@');
  if (at == std::string_view::npos) return parse_plain_host_port(text, what);
  HostPort hp = parse_plain_host_port(text.substr(0, at), what);
  std::string_view rest = text.substr(at + 1);
  if (rest.empty()) throw UsageError(fmt::format("{} '{}': no link address after '@'", what, text));
  for (const std::string& item : split_list(rest, '+')) {
    std::string_view a = item;
    if (!a.empty() && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
    if (a.empty()) throw UsageError(fmt::format("{} '{}': empty link address", what, text));
    if (a.find_first_not_of("0123456789abcdefABCDEF.:%") != std::string_view::npos) {
      throw UsageError(fmt::format("{} '{}': link address '{}' is not a numeric IPv4 or IPv6 address", what, text, a));
    }
    hp.links.emplace_back(a);
    if (hp.links.size() > 64) throw UsageError(fmt::format("{} '{}': more than 64 links", what, text));
  }
  return hp;
}

std::string host_of(std::string_view endpoint) {
  if (endpoint.starts_with('[') && endpoint.find(']') != std::string_view::npos)
    return std::string(endpoint.substr(1, endpoint.find(']') - 1));
  if (std::ranges::count(endpoint, ':') == 1) return std::string(endpoint.substr(0, endpoint.find(':')));
  return std::string(endpoint);
}

}  // namespace fabperf
