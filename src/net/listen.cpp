#include "net/listen.hpp"

#include <fabperf/core/error.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>
#include <memory>

namespace fabperf::net {

bool accept_out_of_resources(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

Listener listen_any_port(const std::string& bind_address, int backlog, const std::string& kind,
                         const std::function<void(int fd)>& configure) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int gai = getaddrinfo(bind_address.c_str(), "0", &hints, &res); gai != 0) {
    throw SystemError("resolve " + kind + " address", bind_address, gai_strerror(gai));
  }
  const std::unique_ptr<addrinfo, void (*)(addrinfo*)> owned(res, &freeaddrinfo);
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw SystemError("socket", bind_address, errno);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (configure) configure(fd);
  if (::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, backlog) != 0) {
    const int e = errno;
    ::close(fd);
    throw SystemError("listen for " + kind + " connections on", bind_address, e);
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  const std::uint16_t port = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                                     : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return {fd, port};
}

}  // namespace fabperf::net
