// Socket tuning and addresses for the TCP engine: --socksize, the data-plane options
// (congestion control, pacing, busy poll, not-sent low-water mark, zerocopy), --bind-dev
// resolution, timeouts, and the set-up's bounded blocking I/O. Failures of options become
// reported warnings (the kernel lacks the feature or refuses the value), never silent changes.
#include "engine/tcp_internal.hpp"

#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/sysinfo/links.hpp>
#include <fabperf/sysinfo/sysstat.hpp>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <cerrno>
#include <fstream>

namespace fabperf::tcp {
namespace {

std::uint64_t read_sysctl(const char* path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  in >> v;
  return v;
}

}  // namespace

void set_port(sockaddr* sa, std::uint16_t port) {
  if (sa->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(sa)->sin_port = htons(port);
  if (sa->sa_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(sa)->sin6_port = htons(port);
}

void set_timeouts(int fd, int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>(ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

void prepare_socket(int fd, RunContext& ctx, std::atomic<bool>& warned) {
  const TestSpec& spec = ctx.spec();
  // Set later, the host's default would have had the connection first: bbr switches on TCP's own
  // pacing (a timer per transmit, firing on any CPU), and switching to cubic leaves it on. On a
  // veth pair that reorders the flow's packets (docs/performance.md, 2026-12-05).
  if (!spec.congestion().empty() && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, spec.congestion().data(),
                                               static_cast<socklen_t>(spec.congestion().size())) != 0) {
    ctx.warn(
        fmt::format("--congestion {}: refused by the kernel ({}; see "
                    "/proc/sys/net/ipv4/tcp_available_congestion_control)",
                    spec.congestion(), errno_text(errno)));
  }
  const auto want = spec.socksize();
  if (want == 0) return;
  const int v = static_cast<int>(want);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
  int snd = 0, rcv = 0;
  socklen_t len = sizeof snd;
  getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &len);
  len = sizeof rcv;
  getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &len);
  // Linux doubles the requested value for bookkeeping; half of what it reports is usable data.
  const auto snd_got = static_cast<std::uint64_t>(snd) / 2;
  const auto rcv_got = static_cast<std::uint64_t>(rcv) / 2;
  if ((snd_got < want || rcv_got < want) && !warned.exchange(true)) {
    ctx.warn(
        fmt::format("socksize {}: the kernel clamped SO_SNDBUF to {} and SO_RCVBUF to {} (net.core.wmem_max={}, "
                    "net.core.rmem_max={}); raise them with sysctl to get the requested size",
                    format_size(want), format_size(snd_got), format_size(rcv_got),
                    read_sysctl("/proc/sys/net/core/wmem_max"), read_sysctl("/proc/sys/net/core/rmem_max")));
  }
}

// Applies the test's data-plane tuning to one connection; failures become reported warnings
// (the kernel lacks the feature, or the value is refused), never silent changes.
void tune_socket(int fd, RunContext& ctx) {
  const TestSpec& spec = ctx.spec();
  auto opt = [&](int level, int name, const void* v, socklen_t len, const std::string& what) {
    if (setsockopt(fd, level, name, v, len) != 0)
      ctx.warn(fmt::format("{}: refused by the kernel ({})", what, errno_text(errno)));
  };
  if (spec.rate() != 0) {
    const std::uint64_t r = spec.rate();
    opt(SOL_SOCKET, SO_MAX_PACING_RATE, &r, sizeof r, fmt::format("--rate {} B/s", r));
  }
  if (spec.busy_poll_us() != 0) {
    const int v = static_cast<int>(spec.busy_poll_us());
    opt(SOL_SOCKET, SO_BUSY_POLL, &v, sizeof v,
        fmt::format("--busy-poll {} us (needs CAP_NET_ADMIN above net.core.busy_poll)", v));
  }
  if (spec.notsent_lowat() != 0) {
    const int v = static_cast<int>(spec.notsent_lowat());
    opt(IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof v, fmt::format("--notsent-lowat {}", v));
  }
  if (spec.zerocopy()) {
    const int one = 1;
    opt(SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one, "--zerocopy (SO_ZEROCOPY)");
  }
}

// Blocking handshake helpers used only during set-up (deadline in ms via poll).
bool io_exact(int fd, std::uint8_t* p, std::size_t n, bool sending, int timeout_ms) {
  const std::int64_t deadline = mono_now_ns() + std::int64_t{timeout_ms} * 1'000'000;
  std::size_t done = 0;
  while (done < n) {
    const auto left_ms = static_cast<int>((deadline - mono_now_ns()) / 1'000'000);
    if (left_ms <= 0) {
      errno = ETIMEDOUT;
      return false;
    }
    pollfd pfd{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
    const int pr = ::poll(&pfd, 1, left_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      errno = pr == 0 ? ETIMEDOUT : errno;
      return false;
    }
    const ssize_t k = sending ? ::send(fd, p + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                              : ::recv(fd, p + done, n - done, MSG_DONTWAIT);
    if (k > 0) {
      done += static_cast<std::size_t>(k);
    } else if (k == 0) {
      errno = ECONNRESET;
      return false;
    } else if (errno != EAGAIN && errno != EINTR) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> resolve_bind_devs(const ClientPlan& plan) {
  std::vector<std::string> out;
  if (plan.bind_devs.size() == 1 && plan.bind_devs.front() == "auto") {
    if (plan.source_addrs.empty()) {
      throw UsageError("--bind-dev auto: this client has no link addresses (give it as NAME@ADDR+ADDR)");
    }
    for (const auto& a : plan.source_addrs) {
      std::string dev = interface_of_address(a);
      if (dev.empty()) {
        throw UsageError(fmt::format("--bind-dev auto: no interface of {} owns link address {}", local_hostname(), a));
      }
      out.push_back(std::move(dev));
    }
    return out;
  }
  for (const auto& d : plan.bind_devs) {
    if (::if_nametoindex(d.c_str()) == 0) {
      throw UsageError(fmt::format("--bind-dev {}: no such network interface on {}", d, local_hostname()));
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace fabperf::tcp
