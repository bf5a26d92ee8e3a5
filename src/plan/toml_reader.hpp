// Reading a TOML file node by node (toml++ keeps each node's line), shared by plan files and the
// monitor's config: every mistake becomes one UsageError "FILE:LINE: field 'x': problem", and a
// UsageError from a value parser (the settings table's) is given the file, line and field.
#pragma once

#include <fabperf/error.hpp>

#include <fmt/format.h>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace fabperf {

// Already names file, line and field: passed through TomlReader::wrap unchanged.
class TomlFileError : public UsageError {
 public:
  using UsageError::UsageError;
};

class TomlReader {
 public:
  explicit TomlReader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const toml::node* n, std::string_view field, const std::string& problem) const {
    const auto line = n ? n->source().begin.line : 1;  // a missing key: the file itself
    if (field.empty()) throw TomlFileError(fmt::format("{}:{}: {}", file_, line, problem));
    throw TomlFileError(fmt::format("{}:{}: field '{}': {}", file_, line, field, problem));
  }
  [[nodiscard]] std::string where(const toml::node* n) const {
    return fmt::format("{}:{}", file_, n ? n->source().begin.line : 1);
  }

  // Runs fn, turning a UsageError into one that names the file, line and field.
  template <typename F>
  auto wrap(const toml::node* n, std::string_view field, F&& fn) const {
    try {
      return fn();
    } catch (const TomlFileError&) {
      throw;
    } catch (const UsageError& e) {
      fail(n, field, e.what());
    }
  }

  std::string str(const toml::node& n, std::string_view field) const {
    if (!n.is_string()) fail(&n, field, fmt::format("expected a string, got {}", type_name(n)));
    return *n.value<std::string>();
  }
  // Numbers and strings become the text the command line would have carried.
  std::string scalar_text(const toml::node& n, std::string_view field) const {
    if (n.is_string()) return *n.value<std::string>();
    if (n.is_integer()) return std::to_string(*n.value<std::int64_t>());
    if (n.is_floating_point()) return fmt::format("{}", *n.value<double>());
    fail(&n, field, fmt::format("expected a number or a string, got {}", type_name(n)));
  }
  double number(const toml::node& n, std::string_view field) const {
    if (n.is_integer()) return static_cast<double>(*n.value<std::int64_t>());
    if (n.is_floating_point()) return *n.value<double>();
    fail(&n, field, fmt::format("expected a number, got {}", type_name(n)));
  }
  bool boolean(const toml::node& n, std::string_view field) const {
    if (!n.is_boolean()) fail(&n, field, fmt::format("expected true or false, got {}", type_name(n)));
    return *n.value<bool>();
  }
  std::vector<std::string> strings(const toml::node& n, std::string_view field) const {
    const auto* a = n.as_array();
    if (!a) fail(&n, field, fmt::format("expected an array of strings, got {}", type_name(n)));
    std::vector<std::string> out;
    for (const auto& e : *a) out.push_back(str(e, field));
    return out;
  }
  const toml::table& table(const toml::node& n, std::string_view field) const {
    const auto* t = n.as_table();
    if (!t) fail(&n, field, fmt::format("expected a table, got {}", type_name(n)));
    return *t;
  }

  static std::string type_name(const toml::node& n) {
    switch (n.type()) {
      case toml::node_type::string: return "a string";
      case toml::node_type::integer: return "an integer";
      case toml::node_type::floating_point: return "a number";
      case toml::node_type::boolean: return "a boolean";
      case toml::node_type::array: return "an array";
      case toml::node_type::table: return "a table";
      default: return "a date or time";
    }
  }

 private:
  std::string file_;
};

}  // namespace fabperf
