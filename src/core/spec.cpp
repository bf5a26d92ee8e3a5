#include <fabperf/error.hpp>
#include <fabperf/spec.hpp>
#include <fabperf/units.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace fabperf {

std::string_view to_string(TestKind t) {
  switch (t) {
    case TestKind::write: return "write";
    case TestKind::read: return "read";
    case TestKind::rw: return "rw";
  }
  return "?";
}
std::string_view to_string(Mode m) { return m == Mode::rpc ? "rpc" : "stream"; }
std::string_view to_string(Transport t) { return t == Transport::tcp ? "tcp" : "rdma"; }

TestKind parse_test_kind(std::string_view s) {
  if (s == "write") return TestKind::write;
  if (s == "read") return TestKind::read;
  if (s == "rw") return TestKind::rw;
  throw UsageError(fmt::format("--test '{}': unknown test (write, read or rw)", s));
}
Mode parse_mode(std::string_view s) {
  if (s == "rpc") return Mode::rpc;
  if (s == "stream") return Mode::stream;
  throw UsageError(fmt::format("--mode '{}': unknown mode (rpc or stream)", s));
}
Transport parse_transport(std::string_view s) {
  if (s == "tcp") return Transport::tcp;
  if (s == "rdma") return Transport::rdma;
  throw UsageError(fmt::format("--transport '{}': unknown transport (tcp or rdma)", s));
}

namespace {
double secs(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e9; }
}  // namespace

TestSpec TestSpec::make(const SpecParams& p) {
  TestSpec s;
  s.test_ = p.test.value_or(TestKind::write);
  s.mode_ = p.mode.value_or(Mode::rpc);
  s.transport_ = p.transport.value_or(Transport::tcp);
  s.buffsize_ = p.buffsize.value_or(4 * 1024 * 1024);
  s.socksize_ = p.socksize.value_or(0);
  s.threads_ = p.threads.value_or(4);
  s.parallel_ = p.parallel.value_or(1);
  s.time_ = p.time.value_or(std::chrono::seconds(10));

  if (s.buffsize_ < limits::kMinBuffsize || s.buffsize_ > limits::kMaxBuffsize) {
    throw UsageError(fmt::format("--buffsize {}: out of range (4K..16M)", format_size(s.buffsize_)));
  }
  if (s.socksize_ > limits::kMaxSocksize) {
    throw UsageError(fmt::format("--socksize {}: out of range (0 = OS default, up to 100M)",
                                 format_size(s.socksize_)));
  }
  if (s.threads_ < 1 || s.threads_ > limits::kMaxThreads) {
    throw UsageError(fmt::format("--threads {}: out of range (1..{})", s.threads_,
                                 limits::kMaxThreads));
  }
  if (s.parallel_ < 1 || s.parallel_ > limits::kMaxParallel) {
    throw UsageError(fmt::format("--parallel {}: out of range (1..{})", s.parallel_,
                                 limits::kMaxParallel));
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
  if (s.warmup_ + s.cooldown_ >= s.time_) {
    throw UsageError(fmt::format(
        "--warmup {} s + --cooldown {} s leave no measurement window in --time {} s",
        secs(s.warmup_), secs(s.cooldown_), secs(s.time_)));
  }
  if (s.window() < std::chrono::milliseconds(100)) {
    throw UsageError(fmt::format("measurement window {} s is shorter than 0.1 s", secs(s.window())));
  }
  return s;
}

std::uint32_t TestSpec::connections_per_pair() const {
  if (mode_ == Mode::stream && test_ == TestKind::rw) return 2 * parallel_;
  return parallel_;
}

nlohmann::json to_json(const TestSpec& s) {
  return {{"test", to_string(s.test())},
          {"mode", to_string(s.mode())},
          {"transport", to_string(s.transport())},
          {"buffsize", s.buffsize()},
          {"socksize", s.socksize()},
          {"threads", s.threads()},
          {"parallel", s.parallel()},
          {"time_ns", s.time().count()},
          {"warmup_ns", s.warmup().count()},
          {"cooldown_ns", s.cooldown().count()}};
}

namespace {
template <typename T>
T field(const nlohmann::json& j, const char* name, T lo, T hi) {
  const auto it = j.find(name);
  if (it == j.end()) throw ProtocolError(fmt::format("spec: missing field '{}'", name));
  if (!it->is_number_integer()) throw ProtocolError(fmt::format("spec.{}: not an integer", name));
  if (it->is_number_unsigned() ? it->get<std::uint64_t>() > static_cast<std::uint64_t>(hi)
                               : (it->get<std::int64_t>() < static_cast<std::int64_t>(lo) ||
                                  it->get<std::int64_t>() > static_cast<std::int64_t>(hi))) {
    throw ProtocolError(fmt::format("spec.{}: out of range", name));
  }
  return it->get<T>();
}
std::string str_field(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().size() > 32) {
    throw ProtocolError(fmt::format("spec.{}: missing or not a short string", name));
  }
  return it->get<std::string>();
}
}  // namespace

TestSpec spec_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw ProtocolError("spec: not an object");
  SpecParams p;
  try {
    p.test = parse_test_kind(str_field(j, "test"));
    p.mode = parse_mode(str_field(j, "mode"));
    p.transport = parse_transport(str_field(j, "transport"));
    p.buffsize = field<std::uint64_t>(j, "buffsize", 0, limits::kMaxBuffsize);
    p.socksize = field<std::uint64_t>(j, "socksize", 0, limits::kMaxSocksize);
    p.threads = field<std::uint32_t>(j, "threads", 1, limits::kMaxThreads);
    p.parallel = field<std::uint32_t>(j, "parallel", 1, limits::kMaxParallel);
    const auto max_ns = limits::kMaxTime.count();
    p.time = std::chrono::nanoseconds(field<std::int64_t>(j, "time_ns", 0, max_ns));
    p.warmup = std::chrono::nanoseconds(field<std::int64_t>(j, "warmup_ns", 0, max_ns));
    p.cooldown = std::chrono::nanoseconds(field<std::int64_t>(j, "cooldown_ns", 0, max_ns));
    return TestSpec::make(p);
  } catch (const UsageError& e) {
    throw ProtocolError(fmt::format("spec: {}", e.what()));
  }
}

std::string HostPort::str() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

HostPort parse_host_port(std::string_view text, std::string_view what) {
  HostPort hp;
  auto bad = [&](std::string_view why) {
    return UsageError(fmt::format("{} '{}': {}", what, text, why));
  };
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
    if (first != std::string_view::npos && text.find(':', first + 1) != std::string_view::npos) {
      hp.host = std::string(text);  // bare IPv6 literal, default port
    } else if (first != std::string_view::npos) {
      hp.host = std::string(text.substr(0, first));
      port_text = text.substr(first + 1);
      if (port_text.empty()) throw bad("empty port");
    } else {
      hp.host = std::string(text);
    }
  }
  if (hp.host.empty()) throw bad("empty host");
  if (hp.host.size() > 253) throw bad("host name too long");
  for (char c : hp.host) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
          c == ':' || c == '%')) {
      throw bad(fmt::format("invalid character '{}' in host", c));
    }
  }
  if (!port_text.empty()) {
    hp.port = static_cast<std::uint16_t>(parse_int(port_text, fmt::format("{} port", what), 0, 65535));
  }
  return hp;
}

}  // namespace fabperf
