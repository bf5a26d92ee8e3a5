#include "net/sockaddr.hpp"

#include <fabperf/core/error.hpp>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <algorithm>
#include <cstring>

namespace fabperf::net {

std::string numeric_host(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, host, sizeof host);
  } else if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, host, sizeof host);
  }
  return host;
}

std::uint16_t port_of(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  return ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port) : 0;
}

void set_port(sockaddr_storage& ss, std::uint16_t port) {
  if (ss.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
  if (ss.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);
}

std::string sockaddr_text(const sockaddr_storage& ss) {
  const std::string h = numeric_host(ss);
  return ss.ss_family == AF_INET ? fmt::format("{}:{}", h, port_of(ss)) : fmt::format("[{}]:{}", h, port_of(ss));
}

Resolved resolve(const std::string& host, std::uint16_t port, int flags, int family, const std::string& what,
                 const std::string& object) {
  addrinfo hints{};
  hints.ai_flags = flags;
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); gai != 0)
    throw SystemError(what, object, gai_strerror(gai));
  Resolved r;
  r.len = static_cast<socklen_t>(std::min<std::size_t>(res->ai_addrlen, sizeof r.ss));
  std::memcpy(&r.ss, res->ai_addr, r.len);
  freeaddrinfo(res);
  return r;
}

bool is_loopback(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
  if (ss.ss_family != AF_INET6) return false;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
}

std::string local_text(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_text(ss);
}

}  // namespace fabperf::net
