// Byte-level helpers shared by the wire codecs (control frames, the data hello, rdma_cm private
// data) and by whatever prints keys and tokens: network byte order and lower-case hex.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <iterator>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace fabperf {

// An unsigned integer in network byte order (big-endian), sizeof(T) bytes at p.
template <std::unsigned_integral T>
T get_be(const std::uint8_t* p) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v = static_cast<T>((v << 8) | p[i]);
  return v;
}
template <std::unsigned_integral T>
void put_be(std::uint8_t* p, T v) {
  for (std::size_t i = sizeof(T); i-- > 0; v = static_cast<T>(v >> 8)) p[i] = static_cast<std::uint8_t>(v);
}

// A fixed-size message's fields in order, written (ByteWriter) or read (ByteReader) by the same
// call chain, so one field list serves both directions of a codec: unsigned integers and enums
// big-endian, byte arrays as they are. Callers check a message's size first; a field past the end
// is a codec's bug and throws std::out_of_range.
template <bool Reading>
class ByteCursor {
 public:
  using Byte = std::conditional_t<Reading, const std::uint8_t, std::uint8_t>;
  explicit ByteCursor(std::span<Byte> bytes) : bytes_(bytes) {}
  template <class T>
  ByteCursor& operator()(T&& field) {
    using V = std::remove_cvref_t<T>;
    if constexpr (std::is_enum_v<V>) {
      auto u = static_cast<std::underlying_type_t<V>>(field);
      (*this)(u);
      if constexpr (Reading) field = static_cast<V>(u);
    } else if constexpr (std::is_integral_v<V> && Reading) {
      field = get_be<V>(take(sizeof(V)));
    } else if constexpr (std::is_integral_v<V>) {
      put_be<V>(take(sizeof(V)), field);
    } else if constexpr (Reading) {
      std::copy_n(take(std::size(field)), std::size(field), std::begin(field));
    } else {
      std::ranges::copy(field, take(std::size(field)));
    }
    return *this;
  }
  // The next n bytes (a field the codec handles itself), moving past them.
  Byte* take(std::size_t n) {
    if (n > bytes_.size() - at_) throw std::out_of_range("byte cursor: field past the end of the message");
    at_ += n;
    return bytes_.data() + at_ - n;
  }

 private:
  std::span<Byte> bytes_;
  std::size_t at_{0};
};
using ByteWriter = ByteCursor<false>;
using ByteReader = ByteCursor<true>;

// The N-byte message that holds these fields in order, zeros after them.
template <std::size_t N, class... Fields>
std::array<std::uint8_t, N> pack_be(const Fields&... fields) {
  std::array<std::uint8_t, N> out{};
  ByteWriter w{out};
  (w(fields), ...);
  return out;
}

// Lower-case hex, two digits a byte.
std::string to_hex(std::span<const std::uint8_t> bytes);

// Writes all of data to fd, through partial writes and EINTR: 0, or the errno that stopped it
// (EIO for a write of 0 bytes).
int write_all(int fd, std::string_view data) noexcept;

}  // namespace fabperf
