#include <fabperf/core/error.hpp>

#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace fabperf {

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* s = strerror_r(err, buf, sizeof buf);
  return s;
}

std::string read_text_file(const std::string& path, std::string_view what) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("{} {}: cannot be read ({})", what, path, errno_text(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

SystemError::SystemError(std::string_view operation, std::string_view object, int err)
    : Error(ExitCode::infrastructure, fmt::format("{} {}: {}", operation, object, errno_text(err))) {}

SystemError::SystemError(std::string_view operation, std::string_view object, std::string_view reason)
    : Error(ExitCode::infrastructure, fmt::format("{} {}: {}", operation, object, reason)) {}

}  // namespace fabperf
