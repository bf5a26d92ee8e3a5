#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>

#include <fmt/format.h>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>

namespace fabperf {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "12.5ms" into the number 12.5 and the suffix "ms"; refuses what is no such number or is
// negative, naming the `kind` of value and what was `expected`.
struct Number {
  double value;
  std::string_view suffix;
};
Number split_number(std::string_view text, std::string_view what, const char* kind, const char* expected) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr == text.data() || !std::isfinite(value)) {
    throw UsageError(fmt::format("{} '{}': not a {} (expected {})", what, text, kind, expected));
  }
  if (value < 0) throw UsageError(fmt::format("{} '{}': {} cannot be negative", what, text, kind));
  return {value, std::string_view(ptr, static_cast<std::size_t>(end - ptr))};
}

}  // namespace

std::uint64_t parse_size(std::string_view text, std::string_view what) {
  // The power of 1024 each suffix stands for.
  static const std::map<std::string, int, std::less<>> kPowers = {{"", 0},    {"b", 0},  {"k", 1},  {"kb", 1},
                                                                  {"kib", 1}, {"m", 2},  {"mb", 2}, {"mib", 2},
                                                                  {"g", 3},   {"gb", 3}, {"gib", 3}};
  const auto [value, suffix] = split_number(text, what, "size", "e.g. 4096, 256K, 4M, 1G");
  const auto power = kPowers.find(lower(suffix));
  if (power == kPowers.end())
    throw UsageError(fmt::format("{} '{}': unknown size suffix '{}' (use K, M or G)", what, text, suffix));
  const double bytes = value * std::ldexp(1.0, 10 * power->second);
  if (bytes > 1e18) throw UsageError(fmt::format("{} '{}': size too large", what, text));
  if (bytes != std::floor(bytes)) {
    throw UsageError(fmt::format("{} '{}': not a whole number of bytes", what, text));
  }
  return static_cast<std::uint64_t>(bytes);
}

std::chrono::nanoseconds parse_duration(std::string_view text, std::string_view what) {
  // Seconds per unit as a fraction: 2.5ms is 2.5 / 1e3, not 2.5 * 1e-3, which can round apart.
  static const std::map<std::string, std::pair<double, double>, std::less<>> kUnits = {
      {"", {1, 1}},   {"s", {1, 1}},    {"ms", {1, 1e3}}, {"us", {1, 1e6}},
      {"m", {60, 1}}, {"min", {60, 1}}, {"h", {3600, 1}}};
  const auto [value, suffix] = split_number(text, what, "duration", "seconds, e.g. 10, 2.5, 500ms");
  const auto unit = kUnits.find(lower(suffix));
  if (unit == kUnits.end())
    throw UsageError(fmt::format("{} '{}': unknown time unit '{}' (use s, ms, m or h)", what, text, suffix));
  const double seconds = value * unit->second.first / unit->second.second;
  if (seconds > 1e7) throw UsageError(fmt::format("{} '{}': duration too long", what, text));
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(seconds * 1e9)));
}

std::int64_t parse_int(std::string_view text, std::string_view what, std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size()) {
    throw UsageError(fmt::format("{} '{}': not a whole number", what, text));
  }
  if (v < lo || v > hi) {
    throw UsageError(fmt::format("{} {}: out of range ({}..{})", what, v, lo, hi));
  }
  return v;
}

std::string format_size(std::uint64_t bytes) {
  constexpr std::uint64_t kK = 1024, kM = kK * 1024, kG = kM * 1024;
  if (bytes != 0 && bytes % kG == 0) return fmt::format("{}G", bytes / kG);
  if (bytes != 0 && bytes % kM == 0) return fmt::format("{}M", bytes / kM);
  if (bytes != 0 && bytes % kK == 0) return fmt::format("{}K", bytes / kK);
  return fmt::format("{}", bytes);
}

std::vector<std::string> split_list(std::string_view text, char sep) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const auto at = text.find(sep, start);
    out.emplace_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

}  // namespace fabperf
