#include <fabperf/core/printable.hpp>

#include <fmt/format.h>
#include <algorithm>

namespace fabperf {
namespace {

// The code point of a well-formed UTF-8 sequence at s[i] and its length; length 0 when the bytes
// there are not one (stray continuation byte, truncated, overlong, surrogate, above U+10FFFF).
std::pair<char32_t, std::size_t> decode_utf8(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  const std::size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
  if (n == 0 || c > 0xf4 || i + n > s.size()) return {0, 0};
  char32_t cp = c & (0x7f >> n);
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return {0, 0};
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return {0, 0};
  return {cp, n};
}

// Code points a terminal obeys or that reorder what is shown: C1 controls, and the Unicode
// direction marks, embeddings, overrides and isolates ("Trojan Source").
bool hidden_control(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const auto [cp, n] = c < 0x80 ? std::pair<char32_t, std::size_t>{c, 1} : decode_utf8(s, i);
    if (n == 0 || cp < 0x20 || cp == 0x7f) {
      out += fmt::format("\\x{:02x}", c);  // a control character, or not UTF-8: each byte shown, none passed on
    } else if (hidden_control(cp)) {
      out += fmt::format("\\u{:04x}", static_cast<std::uint32_t>(cp));
    } else {
      out.append(s.substr(i, n));
    }
    i += std::max<std::size_t>(n, 1);
  }
  return out;
}

}  // namespace fabperf
