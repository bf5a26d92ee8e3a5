#include "sysinfo/file_read.hpp"
#include <fabperf/core/error.hpp>
#include <fabperf/core/fd.hpp>
#include <fabperf/core/fields.hpp>
#include <fabperf/core/spec.hpp>

#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>

namespace fabperf::sysfs {

std::string trim(std::string_view s) {
  s.remove_prefix(std::min(s.find_first_not_of(" \t"), s.size()));
  s.remove_suffix(s.size() - (s.find_last_not_of(" \t\r\n") + 1));  // npos + 1 == 0: all blank
  return std::string(s);
}

// POSIX reads, not std::ifstream: an agent reads some 30 such files at every window edge and
// interval, and a cold ifstream's construction (its locale) showed in an agent's profile.
std::string read_all(const std::string& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  std::string s;
  char buf[4096];
  for (ssize_t k = 0; fd.valid() && (k = ::read(fd.get(), buf, sizeof buf)) > 0;)
    s.append(buf, static_cast<std::size_t>(k));
  return s;
}

std::string read_line(const std::string& path) {
  const std::string s = read_all(path);
  return trim(std::string_view(s).substr(0, s.find('\n')));
}

std::optional<std::uint64_t> read_u64(const std::string& path) {
  return to_u64(read_line(path));
}

std::optional<std::uint64_t> to_u64(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
  if (errno == ERANGE) return std::nullopt;
  return v;
}

int read_int(const std::string& path, int fallback) {
  return to_int(read_line(path), fallback);
}

std::int64_t read_speed(const std::string& path) {
  const std::int64_t v = to_i64(read_line(path), -1);
  return v > 0 ? v : -1;
}

std::int64_t to_i64(const std::string& s, std::int64_t fallback) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || errno == ERANGE) return fallback;
  return v;
}

int to_int(const std::string& s, int fallback) {
  const std::int64_t v = to_i64(s, INT64_MIN);  // INT64_MIN is no int either
  return v < INT_MIN || v > INT_MAX ? fallback : static_cast<int>(v);
}

std::vector<std::string> words(std::string_view s, std::string_view seps) {
  std::vector<std::string> out;
  for (auto at = s.find_first_not_of(seps); at != std::string_view::npos; at = s.find_first_not_of(seps, at)) {
    const auto end = std::min(s.find_first_of(seps, at), s.size());
    out.emplace_back(s.substr(at, end - at));
    at = end;
  }
  return out;
}

std::vector<int> to_cpus(const std::string& list) {
  try {
    return list.empty() ? std::vector<int>{} : parse_cpu_list(list, "cpu list");
  } catch (const Error&) {
    return {};
  }
}

std::vector<std::string> sorted_entries(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::int64_t mbps_field(const Fields& f, const char* name) {
  return f.get(name).is_null() ? -1 : f.i64(name, 0, 100'000'000);
}

std::optional<PcieInfo> pcie_field(const Fields& f, const char* name) {
  return f.get(name).is_null() ? std::nullopt : std::optional(pcie_from_json(f.get(name)));
}

}  // namespace fabperf::sysfs
