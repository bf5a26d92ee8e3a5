#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/core/child.hpp>
#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/proto/proto.hpp>
#include <fabperf/sysinfo/sysstat.hpp>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <unistd.h>
#include <csignal>

namespace fabperf {
namespace {

// Reads one "LISTENING host:port" line from the agent's stdout within timeout_ms.
std::string read_ready_line(Child& c, int timeout_ms) {
  std::string text;
  const std::int64_t deadline = mono_now_ns() + std::int64_t{timeout_ms} * 1'000'000;
  for (;;) {
    const auto nl = text.find('\n');
    if (nl != std::string::npos) return text.substr(0, nl);
    const int left = static_cast<int>((deadline - mono_now_ns()) / 1'000'000);
    if (left <= 0 || c.out < 0) return text;
    pollfd p{c.out, POLLIN, 0};
    if (::poll(&p, 1, left) > 0 && !read_some(c.out, text, 256)) c.close_out();
  }
}

}  // namespace

LocalAgents::LocalAgents(int count, const std::string& log_level, const std::string& key_file) {
  const std::string exe = self_exe();
  std::vector<std::string> args = {exe, "agent",       "--listen", "127.0.0.1:0",        "--ready-fd",
                                   "1", "--log-level", log_level,  "--exit-on-stdin-eof"};
  std::string key_line;
  if (key_file.empty()) {
    const auth::Nonce raw = auth::make_nonce();  // 32 random bytes: a one-time key
    key_ = auth::Key(std::vector<std::uint8_t>(raw.begin(), raw.end()));
    key_line = to_hex(key_.bytes()) + "\n";
    args.emplace_back("--key-stdin");
  } else {
    args.insert(args.end(), {"--key-file", key_file});
  }
  agents_.reserve(static_cast<std::size_t>(count));
  try {
    for (int i = 0; i < count; ++i) {
      Child& c = agents_.emplace_back("local agent", args, Child::Stderr::inherited);
      // A pipe holds far more than one key line: this write never waits.
      if (!key_line.empty() &&
          ::write(c.in, key_line.data(), key_line.size()) != static_cast<ssize_t>(key_line.size())) {
        throw SystemError("start local agent", fmt::format("pid {}", c.pid), "could not pass it its key");
      }
      const std::string line = read_ready_line(c, 10000);
      c.close_out();
      constexpr std::string_view kPrefix = "LISTENING ";
      if (line.rfind(kPrefix, 0) != 0) {
        throw SystemError("start local agent", fmt::format("pid {}", c.pid),
                          "it did not report a listening port within 10 s");
      }
      endpoints_.push_back(parse_host_port(line.substr(kPrefix.size()), "local agent address"));
    }
  } catch (...) {
    OPENSSL_cleanse(key_line.data(), key_line.size());
    stop_all();
    throw;
  }
  OPENSSL_cleanse(key_line.data(), key_line.size());
}

LocalAgents::~LocalAgents() {
  stop_all();
}

void LocalAgents::stop_all() noexcept {
  for (auto& c : agents_) c.signal(SIGTERM);
  for (auto& c : agents_) c.stop(std::chrono::milliseconds(1000));
  agents_.clear();
}

}  // namespace fabperf
