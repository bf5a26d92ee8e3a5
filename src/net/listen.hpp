// A TCP listening socket on a numeric address with a port chosen by the kernel: the data plane's
// and the RDMA set-up plane's servers open theirs the same way.
#pragma once

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace fabperf::net {

struct Listener {
  int fd{-1};
  std::uint16_t port{0};
};

// Binds bind_address (numeric, IPv4 or IPv6) on a kernel-chosen port with SO_REUSEADDR and
// listens. `configure` runs on the socket before bind (options that accepted sockets inherit).
// Errors are SystemError naming the step and the address: "resolve KIND address",
// "socket", "listen for KIND connections on". The caller owns the descriptor.
// accept(2) failed for want of descriptors, buffers or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM):
// the connection stays in the backlog and the listener stays readable, so an accept loop that
// retried at once would spin. Such loops pause accepting for kAcceptPauseNs instead.
bool accept_out_of_resources(int err);
inline constexpr std::int64_t kAcceptPauseNs = 100'000'000;

// Log lines about strangers (refused, evicted, timed out, failed handshakes) at a bounded rate:
// a flood of bad connections must not flood the log. At most kBurst lines per kWindow; the
// number left out is reported with the next line that is let through.
class RateLimitedLog {
 public:
  explicit RateLimitedLog(std::string what) : what_(std::move(what)) {}
  template <typename... Args>
  void warn(fmt::format_string<Args...> f, Args&&... args) {
    const auto now = std::chrono::steady_clock::now();
    if (now - window_start_ >= kWindow) {
      window_start_ = now;
      used_ = 0;
    }
    if (used_ >= kBurst) {
      ++suppressed_;
      return;
    }
    ++used_;
    std::string line = fmt::format(f, std::forward<Args>(args)...);
    if (suppressed_ > 0) {
      line += fmt::format(" ({} similar lines about {} were not logged)", suppressed_, what_);
      suppressed_ = 0;
    }
    spdlog::warn("{}", line);
  }

 private:
  static constexpr std::chrono::seconds kWindow{10};
  static constexpr int kBurst = 10;
  std::string what_;
  std::chrono::steady_clock::time_point window_start_{};
  int used_{0};
  std::uint64_t suppressed_{0};
};

Listener listen_any_port(const std::string& bind_address, int backlog, const std::string& kind,
                         const std::function<void(int fd)>& configure = {});

}  // namespace fabperf::net
