// Socket addresses as text, for logs, results and the port-spreading hash: one place for both
// engines and every address family the data plane uses.
#pragma once

#include <sys/socket.h>
#include <cstdint>
#include <string>

namespace fabperf::net {

std::string sockaddr_text(const sockaddr_storage& ss);  // "1.2.3.4:5" or "[::1]:5"
std::string numeric_host(const sockaddr_storage& ss);   // the address alone ("" for other families)
std::string local_text(int fd);                         // the socket's own address, as sockaddr_text; "?"
bool is_loopback(const sockaddr_storage& ss);           // 127.0.0.0/8, ::1 or ::ffff:127.x
std::uint16_t port_of(const sockaddr_storage& ss);      // 0 for other families
void set_port(sockaddr_storage& ss, std::uint16_t port);

// The first stream address getaddrinfo(3) gives for host:port (flags: AI_NUMERICHOST, AI_PASSIVE;
// family: AF_UNSPEC or one), with its length. Throws SystemError(what, object, gai's reason).
struct Resolved {
  sockaddr_storage ss{};
  socklen_t len{0};
  [[nodiscard]] const sockaddr* addr() const { return reinterpret_cast<const sockaddr*>(&ss); }
};
Resolved resolve(const std::string& host, std::uint16_t port, int flags, int family, const std::string& what,
                 const std::string& object);

}  // namespace fabperf::net
