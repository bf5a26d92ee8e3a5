// TcpFlow::delivered_tx in a translation unit of its own: tcpi_bytes_acked is only in the
// kernel's <linux/tcp.h>, whose struct tcp_info clashes with glibc's <netinet/tcp.h>.
#include "engine/tcp_engine.hpp"

#include <linux/tcp.h>
#include <netinet/in.h>
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

}  // namespace fabperf
