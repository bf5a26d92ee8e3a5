#include <fabperf/core/error.hpp>
#include <fabperf/core/fields.hpp>
#include <fabperf/core/printable.hpp>

#include <fmt/format.h>
#include <cmath>

namespace fabperf {

Fields::Fields(const nlohmann::json& j, std::string context) : j_(j), context_(std::move(context)) {
  if (!j_.is_object()) throw ProtocolError(fmt::format("{}: not a JSON object", context_));
}

bool Fields::has(const char* name) const {
  return j_.contains(name);
}

const nlohmann::json& Fields::get(const char* name) const {
  const auto it = j_.find(name);
  if (it == j_.end()) throw ProtocolError(fmt::format("{}: missing field", ctx(name)));
  return *it;
}

std::uint64_t Fields::u64(const char* name, std::uint64_t lo, std::uint64_t hi) const {
  const auto& v = get(name);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
    throw ProtocolError(fmt::format("{}: expected a non-negative integer, got {}", ctx(name), v.type_name()));
  }
  const auto x = v.get<std::uint64_t>();
  if (x < lo || x > hi) throw ProtocolError(fmt::format("{}: {} out of range [{}, {}]", ctx(name), x, lo, hi));
  return x;
}

// The field, when `is` says it has the expected type; else "<ctx>: expected <what>, got <type>".
const nlohmann::json& Fields::typed(const char* name, bool (nlohmann::json::*is)() const noexcept,
                                    const char* what) const {
  const auto& v = get(name);
  if (!(v.*is)()) throw ProtocolError(fmt::format("{}: expected {}, got {}", ctx(name), what, v.type_name()));
  return v;
}

std::int64_t Fields::i64(const char* name, std::int64_t lo, std::int64_t hi) const {
  const auto& v = typed(name, &nlohmann::json::is_number_integer, "an integer");
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    throw ProtocolError(fmt::format("{}: out of range", ctx(name)));
  }
  const auto x = v.get<std::int64_t>();
  if (x < lo || x > hi) throw ProtocolError(fmt::format("{}: {} out of range [{}, {}]", ctx(name), x, lo, hi));
  return x;
}

double Fields::num(const char* name, double lo, double hi) const {
  const auto x = typed(name, &nlohmann::json::is_number, "a number").get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    throw ProtocolError(fmt::format("{}: {} out of range [{}, {}]", ctx(name), x, lo, hi));
  }
  return x;
}

bool Fields::boolean(const char* name) const {
  return typed(name, &nlohmann::json::is_boolean, "a boolean").get<bool>();
}

std::string Fields::str(const char* name, std::size_t max_len) const {
  const auto& s = typed(name, &nlohmann::json::is_string, "a string").get_ref<const std::string&>();
  if (s.size() > max_len) throw ProtocolError(fmt::format("{}: string longer than {} bytes", ctx(name), max_len));
  // Every string a peer sends may end up in a log or on a terminal: control characters are
  // defused here, once, for all of them.
  return printable(s);
}

const nlohmann::json& Fields::array(const char* name, std::size_t max_items) const {
  const auto& v = typed(name, &nlohmann::json::is_array, "an array");
  if (v.size() > max_items) throw ProtocolError(fmt::format("{}: more than {} entries", ctx(name), max_items));
  return v;
}

const nlohmann::json& Fields::object(const char* name) const {
  return typed(name, &nlohmann::json::is_object, "an object");
}

std::vector<std::string> Fields::strings(const char* name, std::size_t max_items, std::size_t max_len) const {
  std::vector<std::string> out;
  for (const auto& e : array(name, max_items)) {
    if (!e.is_string() || e.get_ref<const std::string&>().size() > max_len) {
      throw ProtocolError(fmt::format("{}: entries must be strings of at most {} bytes", ctx(name), max_len));
    }
    out.push_back(printable(e.get_ref<const std::string&>()));
  }
  return out;
}

}  // namespace fabperf
