#include "net/sockaddr.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>

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

std::string sockaddr_text(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) {
    return fmt::format("{}:{}", numeric_host(ss), ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port));
  }
  return fmt::format("[{}]:{}", numeric_host(ss), ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port));
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
