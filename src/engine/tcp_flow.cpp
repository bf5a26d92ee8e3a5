// TcpFlow: a data connection's socket and what the kernel says about it. In a translation unit
// of its own: tcpi_bytes_acked is only in the kernel's <linux/tcp.h>, whose struct tcp_info
// clashes with glibc's <netinet/tcp.h>.
#include "engine/tcp_engine.hpp"

#include <linux/tcp.h>
#include <netinet/in.h>
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

Flow::Edge TcpFlow::edge(std::uint64_t counted_rx) const {
  // Both framing counts are read before the kernel's figures: a header read or written in
  // between is then in the kernel's count and not yet in ours, the error left (16 bytes).
  const std::uint64_t framing_tx = counters.framing_tx.load(std::memory_order_relaxed);
  const std::uint64_t counted = counted_rx + counters.framing_rx.load(std::memory_order_relaxed);
  tcp_info ti{};
  const socklen_t len = read_tcp_info(fd(), ti);
  Edge e;
  // Kernels before 4.1 stop short of these fields: no answer rather than a zero.
  if (len >= offsetof(tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked)
    e.delivered = ti.tcpi_bytes_acked > framing_tx ? ti.tcpi_bytes_acked - framing_tx : 0;
  if (len >= offsetof(tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
    e.queued = ti.tcpi_bytes_received > counted ? ti.tcpi_bytes_received - counted : 0;
  return e;
}

}  // namespace fabperf
