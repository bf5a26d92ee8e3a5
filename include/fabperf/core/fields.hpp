// Field-by-field validation of a JSON object: every decoder of peer or file input (control
// messages, agent results, link and PCIe inventories) reads through this, so a bad value is
// refused with "<context>.<field>: <problem>" as a ProtocolError and strings are made printable
// once. Kept apart from the protocol so sysinfo's decoders need not depend on it.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fabperf/core/bytes.hpp>
#include <fabperf/core/error.hpp>

namespace fabperf {

inline constexpr std::size_t kMaxString = 4096;
inline constexpr std::size_t kMaxList = 100000;

class Fields {
 public:
  Fields(const nlohmann::json& j, std::string context);
  [[nodiscard]] bool has(const char* name) const;
  [[nodiscard]] std::uint64_t u64(const char* name, std::uint64_t lo, std::uint64_t hi) const;
  [[nodiscard]] std::int64_t i64(const char* name, std::int64_t lo, std::int64_t hi) const;
  [[nodiscard]] double num(const char* name, double lo, double hi) const;
  [[nodiscard]] bool boolean(const char* name) const;
  [[nodiscard]] std::string str(const char* name, std::size_t max_len = kMaxString) const;
  [[nodiscard]] const nlohmann::json& array(const char* name, std::size_t max_items = kMaxList) const;
  [[nodiscard]] const nlohmann::json& object(const char* name) const;
  [[nodiscard]] std::vector<std::string> strings(const char* name, std::size_t max_items,
                                                 std::size_t max_len = kMaxString) const;
  [[nodiscard]] std::string ctx(const char* name) const { return context_ + "." + name; }
  [[nodiscard]] const nlohmann::json& get(const char* name) const;  // throws when missing

 private:
  const nlohmann::json& typed(const char* name, bool (nlohmann::json::*is)() const noexcept, const char* what) const;
  const nlohmann::json& j_;
  std::string context_;
};

// ---- One field list for both directions of a JSON codec -------------------------------------
// A type's `static void fields(auto& v, T& m)` (found by argument-dependent lookup) names each
// member once, in decoding order: v(key, member, checks...). JsonOut writes them; JsonIn reads
// them through Fields with those checks and errors. Checks: [lo, hi] of a number, a string's
// length cap, a list's entry cap (and its strings' length cap), or the decoder of what another
// codec writes (of the text with its cap, of the field, of the object, of each entry, of each entry
// named "<list>[i]"). A list of objects with their own fields() names its entries "<list>[]".
// v.opt(): read only when present (older peers send none); v.sparse(): the same, and written
// only when not empty (or 0). A check across fields reads `if (v.kIn && ...)`, naming a field by
// v.ctx(key).
class JsonIn {
 public:
  static constexpr bool kIn = true;
  explicit JsonIn(const Fields& f) : f_(f) {}
  template <class T>
  static T decode(const nlohmann::json& j, const std::string& context) {
    const Fields f(j, context);
    JsonIn in(f);
    T m;
    fields(in, m);
    return m;
  }
  [[nodiscard]] std::string ctx(const char* k) const { return f_.ctx(k); }
  template <class T, class... A>
  void opt(const char* k, T& x, const A&... a) const {
    if (f_.has(k)) (*this)(k, x, a...);
  }
  template <class T, class... A>
  void sparse(const char* k, T& x, const A&... a) const {
    if (f_.has(k)) (*this)(k, x, a...);
  }

  void operator()(const char* k, bool& x) const { x = f_.boolean(k); }
  void operator()(const char* k, double& x, double lo, double hi) const { x = f_.num(k, lo, hi); }
  void operator()(const char* k, std::string& x, std::size_t max_len = kMaxString) const { x = f_.str(k, max_len); }
  void operator()(const char* k, std::vector<std::string>& x, std::size_t n, std::size_t len = kMaxString) const {
    x = f_.strings(k, n, len);
  }
  template <std::integral T>
  void operator()(const char* k, T& x, std::int64_t lo, std::int64_t hi) const requires std::is_signed_v<T> {
    x = static_cast<T>(f_.i64(k, lo, hi));
  }
  template <std::integral T>
  void operator()(const char* k, T& x, std::uint64_t lo, std::uint64_t hi) const requires std::is_unsigned_v<T> {
    x = static_cast<T>(f_.u64(k, lo, hi));
  }
  template <class T>
  void operator()(const char* k, T& x, T (*from)(std::string_view, const std::string&), std::size_t len = 64) const {
    x = from(f_.str(k, len), f_.ctx(k));
  }
  template <class T>
  void operator()(const char* k, T& x, T (*from)(const Fields&, const char*)) const {
    x = from(f_, k);
  }
  // A decoder that names only its own fields ("spec.threads", "histogram: ..."): its errors are
  // prefixed with this field's context. Into an optional, null decodes as empty.
  template <class T>
  void operator()(const char* k, T& x, T (*from)(const nlohmann::json&)) const {
    const auto& o = f_.object(k);
    try {
      x = from(o);
    } catch (const ProtocolError& e) {
      throw ProtocolError(f_.ctx(k) + ": " + e.what());
    }
  }
  template <class T>
  void operator()(const char* k, std::optional<T>& x, T (*from)(const nlohmann::json&)) const {
    if (f_.get(k).is_null()) return x.reset();
    (*this)(k, x.emplace(), from);
  }
  template <class T>
  void operator()(const char* k, std::vector<T>& x, std::size_t n, T (*from)(const nlohmann::json&)) const {
    for (const auto& e : f_.array(k, n)) x.push_back(from(e));
  }
  template <class T>
  void operator()(const char* k, std::vector<T>& x, std::size_t n,
                  T (*from)(const nlohmann::json&, const std::string&)) const {
    const auto& a = f_.array(k, n);
    for (std::size_t i = 0; i < a.size(); ++i) x.push_back(from(a[i], f_.ctx(k) + "[" + std::to_string(i) + "]"));
  }
  template <class T>
  void operator()(const char* k, std::vector<T>& x, std::size_t n) const {
    for (const auto& e : f_.array(k, n)) x.push_back(decode<T>(e, f_.ctx(k) + "[]"));
  }

 private:
  const Fields& f_;
};

class JsonOut {
 public:
  static constexpr bool kIn = false;
  explicit JsonOut(nlohmann::json& j) : j_(j) {}
  template <class T>
  static nlohmann::json encode(const T& m) {
    nlohmann::json j = nlohmann::json::object();
    JsonOut out(j);
    fields(out, const_cast<T&>(m));  // NOLINT: JsonOut only reads
    return j;
  }
  [[nodiscard]] static std::string ctx(const char* k) { return k; }
  template <class T, class... A>
  void operator()(const char* k, const T& x, const A&...) const {
    j_[k] = put(x);
  }
  template <class T, class... A>
  void opt(const char* k, const T& x, const A&...) const {
    j_[k] = put(x);
  }
  template <class T, class... A>
  void sparse(const char* k, const T& x, const A&...) const {
    if constexpr (requires { x.empty(); }) {
      if (!x.empty()) j_[k] = put(x);
    } else if (x != T{}) {
      j_[k] = put(x);
    }
  }

  // By the value's type: an optional as null when empty, an enum by its name, bytes as hex, a
  // type by its own to_json(x) or else its fields(), named counters as an object, a list entry
  // by entry.
  template <class T>
  static nlohmann::json put(const T& x) {
    if constexpr (requires { x.has_value(); }) {
      return x ? put(*x) : nlohmann::json(nullptr);
    } else if constexpr (std::is_enum_v<T>) {
      return std::string(to_string(x));
    } else if constexpr (requires { to_hex(x); }) {
      return to_hex(x);
    } else if constexpr (requires { to_json(x); }) {
      return to_json(x);
    } else if constexpr (requires(JsonOut & o, T & m) { fields(o, m); }) {
      return encode(x);
    } else if constexpr (std::is_same_v<T, std::vector<std::pair<std::string, std::uint64_t>>>) {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [name, n] : x) o[name] = n;
      return o;
    } else if constexpr (requires { requires std::is_class_v<typename T::value_type>; }) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : x) a.push_back(put(e));
      return a;
    } else {
      return x;
    }
  }

 private:
  nlohmann::json& j_;
};

}  // namespace fabperf
