// Field-by-field validation of a JSON object: every decoder of peer or file input (control
// messages, agent results, link and PCIe inventories) reads through this, so a bad value is
// refused with "<context>.<field>: <problem>" as a ProtocolError and strings are made printable
// once. Kept apart from the protocol so sysinfo's decoders need not depend on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

 private:
  const nlohmann::json& get(const char* name) const;
  const nlohmann::json& j_;
  std::string context_;
};

}  // namespace fabperf
