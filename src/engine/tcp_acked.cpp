// TcpFlow::delivered_tx (and queued_rx) in a translation unit of its own: tcpi_bytes_acked is only in the
// kernel's <linux/tcp.h>, whose struct tcp_info clashes with glibc's <netinet/tcp.h>.
#include "engine/tcp_engine.hpp"

#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <cstddef>

namespace fabperf {

std::optional<std::uint64_t> TcpFlow::delivered_tx() const {
  tcp_info ti{};
  socklen_t len = sizeof ti;
  // Kernels before 4.1 stop short of the field: no answer rather than a zero.
  if (getsockopt(fd(), IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked) {
    return std::nullopt;
  }
  // Framing written but not yet acknowledged (a few headers in the send queue) is the error left.
  const std::uint64_t framing = counters.framing_tx.load(std::memory_order_relaxed);
  return ti.tcpi_bytes_acked > framing ? ti.tcpi_bytes_acked - framing : 0;
}

std::optional<std::uint64_t> TcpFlow::queued_rx() const {
  int n = 0;
  if (ioctl(fd(), SIOCINQ, &n) != 0 || n < 0) return std::nullopt;
  return static_cast<std::uint64_t>(n);
}

}  // namespace fabperf
