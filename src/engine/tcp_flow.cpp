// TcpFlow: a data connection's socket and what the kernel says about it. In a translation unit
// of its own: tcpi_bytes_acked is only in the kernel's <linux/tcp.h>, whose struct tcp_info
// clashes with glibc's <netinet/tcp.h>.
#include "engine/tcp_engine.hpp"

#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <cstddef>

namespace fabperf {
namespace {

// TCP_INFO as far as the running kernel fills it: the length it wrote, 0 when it failed.
socklen_t read_tcp_info(int fd, tcp_info& ti) {
  socklen_t len = sizeof ti;
  return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 ? len : 0;
}

}  // namespace

TcpFlow::TcpFlow(int fd, FlowRole r, FlowOp o, std::uint32_t peer, std::string local_addr, std::string remote_addr)
    : Flow(r, o, peer, std::move(local_addr), std::move(remote_addr)), fd_(fd) {}

void TcpFlow::shutdown_both() noexcept {
  ::shutdown(fd(), SHUT_RDWR);
}

TcpSample TcpFlow::sample_transport() const {
  tcp_info ti{};
  if (read_tcp_info(fd(), ti) == 0) return {};
  return {.valid = true,
          .total_retrans = ti.tcpi_total_retrans,
          .rtt_us = ti.tcpi_rtt,
          .rttvar_us = ti.tcpi_rttvar,
          .snd_mss = ti.tcpi_snd_mss,
          .rcv_mss = ti.tcpi_rcv_mss,
          .pmtu = ti.tcpi_pmtu,
          .snd_cwnd = ti.tcpi_snd_cwnd};
}

std::optional<std::uint64_t> TcpFlow::delivered_tx() const {
  tcp_info ti{};
  // Kernels before 4.1 stop short of the field: no answer rather than a zero.
  if (read_tcp_info(fd(), ti) < offsetof(tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked) return std::nullopt;
  // Framing written but not yet acknowledged (a few headers in the send queue) is the error left.
  const std::uint64_t framing = counters.framing_tx.load(std::memory_order_relaxed);
  return ti.tcpi_bytes_acked > framing ? ti.tcpi_bytes_acked - framing : 0;
}

std::optional<std::uint64_t> TcpFlow::queued_rx() const {
  // A stream carries only payload after its handshake, so what arrived and is not counted yet is
  // the kernel's count of bytes received less the reader's: the queue and a read in progress,
  // which SIOCINQ misses (a reader preempted between its copy and its count holds a chunk). The
  // reader's count is taken first, so a read finished in between is not taken off twice. rpc
  // flows also receive headers the reader does not count: the queue alone.
  if (op == FlowOp::write || op == FlowOp::read) {
    const std::uint64_t counted = counters.rx_bytes.load(std::memory_order_relaxed);
    tcp_info ti{};
    if (read_tcp_info(fd(), ti) >= offsetof(tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
      return ti.tcpi_bytes_received > counted ? ti.tcpi_bytes_received - counted : 0;
  }
  int n = 0;
  if (ioctl(fd(), SIOCINQ, &n) != 0 || n < 0) return std::nullopt;
  return static_cast<std::uint64_t>(n);
}

}  // namespace fabperf
