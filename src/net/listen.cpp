#include "net/listen.hpp"

#include <fabperf/core/error.hpp>
#include <fabperf/core/fd.hpp>

#include "net/sockaddr.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <cerrno>

namespace fabperf::net {

bool accept_out_of_resources(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

Listener listen_any_port(const std::string& bind_address, int backlog, const std::string& kind,
                         const std::function<void(int fd)>& configure) {
  const Resolved a =
      resolve(bind_address, 0, AI_NUMERICHOST | AI_PASSIVE, AF_UNSPEC, "resolve " + kind + " address", bind_address);
  UniqueFd fd(::socket(a.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw SystemError("socket", bind_address, errno);
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (configure) configure(fd.get());
  if (::bind(fd.get(), a.addr(), a.len) != 0 || ::listen(fd.get(), backlog) != 0)
    throw SystemError("listen for " + kind + " connections on", bind_address, errno);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  const std::uint16_t port = port_of(ss);
  return {fd.release(), port};
}

}  // namespace fabperf::net
