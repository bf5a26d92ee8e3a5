#include <fabperf/core/bytes.hpp>

#include <unistd.h>
#include <cerrno>

namespace fabperf {

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (auto b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 0xf]);
  }
  return s;
}

int write_all(int fd, std::string_view data) noexcept {
  while (!data.empty()) {
    const ssize_t k = ::write(fd, data.data(), data.size());
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return k < 0 ? errno : EIO;
    data.remove_prefix(static_cast<std::size_t>(k));
  }
  return 0;
}

}  // namespace fabperf
