// A TCP listening socket on a numeric address with a port chosen by the kernel: the data plane's
// and the RDMA set-up plane's servers open theirs the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

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

Listener listen_any_port(const std::string& bind_address, int backlog, const std::string& kind,
                         const std::function<void(int fd)>& configure = {});

}  // namespace fabperf::net
