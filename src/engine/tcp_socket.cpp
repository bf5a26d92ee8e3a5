// Socket tuning for the TCP engine: --socksize, the data-plane options (congestion control,
// pacing, busy poll, not-sent low-water mark, zerocopy) and timeouts. Failures of options become
// reported warnings (the kernel lacks the feature or refuses the value), never silent changes.
#include "engine/tcp_internal.hpp"

#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

}  // namespace fabperf::tcp
