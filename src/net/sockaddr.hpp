// Socket addresses as text, for logs, results and the port-spreading hash: one place for both
// engines and every address family the data plane uses.
#pragma once

#include <sys/socket.h>
#include <string>

namespace fabperf::net {

std::string sockaddr_text(const sockaddr_storage& ss);  // "1.2.3.4:5" or "[::1]:5"
std::string numeric_host(const sockaddr_storage& ss);   // the address alone ("" for other families)
std::string local_text(int fd);                         // the socket's own address, as sockaddr_text; "?"
bool is_loopback(const sockaddr_storage& ss);           // 127.0.0.0/8, ::1 or ::ffff:127.x

}  // namespace fabperf::net
