// Byte-level helpers shared by the wire codecs (control frames, the data hello, rdma_cm private
// data) and by whatever prints keys and tokens: network byte order and lower-case hex.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace fabperf {

inline std::uint16_t get_be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
inline std::uint32_t get_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}
inline std::uint64_t get_be64(const std::uint8_t* p) {
  return (std::uint64_t{get_be32(p)} << 32) | get_be32(p + 4);
}
inline void put_be16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
inline void put_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}
inline void put_be64(std::uint8_t* p, std::uint64_t v) {
  put_be32(p, static_cast<std::uint32_t>(v >> 32));
  put_be32(p + 4, static_cast<std::uint32_t>(v));
}

// Lower-case hex, two digits a byte.
std::string to_hex(std::span<const std::uint8_t> bytes);

// Writes all of data to fd, through partial writes and EINTR: 0, or the errno that stopped it
// (EIO for a write of 0 bytes).
int write_all(int fd, std::string_view data) noexcept;

}  // namespace fabperf
