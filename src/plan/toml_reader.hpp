// Reading a TOML file node by node (toml++ keeps each node's line), shared by plan files and the
// monitor's config: every mistake becomes one UsageError "FILE:LINE: field 'x': problem", and a
// UsageError from a value parser (the settings table's) is given the file, line and field.
#pragma once

#include <fabperf/core/error.hpp>
#include <fabperf/core/settings.hpp>
#include <fabperf/core/spec.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
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
    // No file: the options of `run --pattern` (plan::pattern_test), named as the command line spells them.
    if (file_.empty())
      throw TomlFileError(fmt::format("--{}: {}", field == "k" ? std::string_view("ring-k") : field, problem));
    const auto line = n ? n->source().begin.line : 1;  // a missing key: the file itself
    if (field.empty()) throw TomlFileError(fmt::format("{}:{}: {}", file_, line, problem));
    throw TomlFileError(fmt::format("{}:{}: field '{}': {}", file_, line, field, problem));
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

  // A value of exactly type T, else "expected WHAT, got ...".
  template <typename T>
  T exact(const toml::node& n, std::string_view field, std::string_view what) const {
    if (const auto v = n.value_exact<T>()) return *v;
    fail(&n, field, fmt::format("expected {}, got {}", what, type_name(n)));
  }
  std::string str(const toml::node& n, std::string_view field) const {
    return exact<std::string>(n, field, "a string");
  }
  // Numbers and strings become the text the command line would have carried.
  std::string scalar_text(const toml::node& n, std::string_view field) const {
    if (n.is_string()) return *n.value<std::string>();
    if (n.is_integer()) return std::to_string(*n.value<std::int64_t>());
    if (n.is_floating_point()) return fmt::format("{}", *n.value<double>());
    fail(&n, field, fmt::format("expected a number or a string, got {}", type_name(n)));
  }
  double number(const toml::node& n, std::string_view field) const {
    if (!n.is_number()) fail(&n, field, fmt::format("expected a number, got {}", type_name(n)));
    return n.is_integer() ? static_cast<double>(*n.value<std::int64_t>()) : *n.value<double>();
  }
  // An integer within lo..hi ("N is out of range (lo..hiUNIT)").
  std::int64_t integer(const toml::node& n, std::string_view field, std::int64_t lo, std::int64_t hi,
                       std::string_view unit = "") const {
    const auto v = exact<std::int64_t>(n, field, "an integer");
    if (v < lo || v > hi) fail(&n, field, fmt::format("{} is out of range ({}..{}{})", v, lo, hi, unit));
    return v;
  }
  bool boolean(const toml::node& n, std::string_view field) const { return exact<bool>(n, field, "true or false"); }
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

  // One row of the settings table given as a TOML value (plan tests, the monitor's [probe] and
  // [latency]), applied as the command line's text: a flag is true or false, a list (cpus = [0, 2])
  // the comma-separated value, anything else its scalar text.
  void apply_setting(const Setting& st, const toml::node& n, SpecParams& p) const {
    std::vector<std::string> parts;
    if (st.kind == SettingKind::flag) {
      parts = {boolean(n, st.name) ? "true" : "false"};
    } else if (const auto* a = n.as_array()) {
      for (const auto& e : *a) parts.push_back(scalar_text(e, st.name));
    } else {
      parts = {scalar_text(n, st.name)};
    }
    wrap(&n, st.name, [&] { st.apply(p, fmt::format("{}", fmt::join(parts, ",")), "value"); });
  }

  // The whole file, or one UsageError "FILE:LINE:COLUMN: problem".
  static toml::table parse(std::string_view text, const std::string& file) {
    try {
      return toml::parse(text, file);
    } catch (const toml::parse_error& e) {
      throw UsageError(
          fmt::format("{}:{}:{}: {}", file, e.source().begin.line, e.source().begin.column, e.description()));
    }
  }

  // Refuses a key of `t` that is not in `known`, naming them all: "PROBLEM (a, b, c)".
  void known_keys(const toml::table& t, const std::vector<std::string_view>& known, std::string_view problem) const {
    for (const auto& [key, v] : t) {
      if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
      fail(&v, key.str(), fmt::format("{} ({})", problem, fmt::join(known, ", ")));
    }
  }

  // One [[hosts]] table's name, address and links, as plan files and the monitor's config both
  // write them. `extra` lists the further keys the caller reads itself; `before` holds the hosts
  // read so far (anything with .name and .hp), so a repeated name or address is refused. Names end
  // up in labels, reports and CSV cells: no spaces, quotes, backslashes, '/', ',' or '>'.
  template <typename Host, typename Before>
  Host host(const toml::node& hn, std::initializer_list<std::string_view> extra, const Before& before) const {
    const auto& t = table(hn, "hosts");
    std::vector<std::string_view> known{"name", "address", "links"};
    known.insert(known.end(), extra.begin(), extra.end());
    known_keys(t, known, "unknown host field");
    Host h;
    h.name = name(hn, "host", " /,>\"\\\n", "spaces, quotes, '/', ',' or '>'", before);
    const auto* addr = t.get("address");
    if (!addr) fail(&hn, "address", fmt::format("missing for host '{}'", h.name));
    h.hp = wrap(addr, "address", [&] { return parse_host_port(str(*addr, "address"), "address"); });
    if (h.hp.port == 0) fail(addr, "address", "port 0 is not an agent's port");
    if (const auto* l = t.get("links")) {
      if (!h.hp.links.empty()) fail(l, "links", "given twice (also as ADDRESS@LINK+LINK in 'address')");
      h.hp.links = strings(*l, "links");
      if (h.hp.links.empty()) fail(l, "links", "empty list");
    }
    for (const auto& o : before) {
      if (o.hp.host == h.hp.host && o.hp.port == h.hp.port) {
        fail(addr, "address", fmt::format("{} is also host '{}'", h.hp.str(), o.name));
      }
    }
    return h;
  }

  // The [[hosts]] tables of `root`, at least `min` (`min_text` says it), each read by read(node,
  // the hosts before it). Per-link pinning pairs link i with link i: every host must give as many
  // link addresses as the first.
  template <typename Host, typename Read>
  std::vector<Host> hosts(const toml::table& root, std::size_t min, std::string_view min_text, Read read) const {
    const auto* n = root.get("hosts");
    if (!n) fail(nullptr, "hosts", "missing (give [[hosts]] tables with name and address)");
    const auto* arr = n->as_array();
    if (!arr || arr->size() < min) fail(n, "hosts", fmt::format("expected {} or more [[hosts]] tables", min_text));
    std::vector<Host> out;
    for (const auto& hn : *arr) out.push_back(read(hn, out));
    for (const auto& h : out) {
      if (h.hp.links.size() != out.front().hp.links.size()) {
        fail(arr, "links",
             fmt::format("host '{}' has {} link addresses but '{}' has {}: give every host the same number", h.name,
                         h.hp.links.size(), out.front().name, out.front().hp.links.size()));
      }
    }
    return out;
  }

  // The `name` of table `tn` (a host, a test): given, without the characters of `bad` (`bad_text`
  // says which) and unlike any of `before`'s.
  template <typename Before>
  std::string name(const toml::node& tn, std::string_view what, const char* bad, std::string_view bad_text,
                   const Before& before) const {
    const auto* n = table(tn, what).get("name");
    if (!n) fail(&tn, "name", fmt::format("missing in this {}", what));
    std::string s = str(*n, "name");
    if (s.empty() || s.find_first_of(bad) != std::string::npos)
      fail(n, "name", fmt::format("'{}': use a non-empty name without {}", s, bad_text));
    for (const auto& o : before) {
      if (o.name == s) fail(n, "name", fmt::format("{} '{}' is listed twice", what, s));
    }
    return s;
  }

  static std::string type_name(const toml::node& n) {
    static constexpr std::array<const char*, 10> kNames{
        // by toml::node_type
        "nothing",  "a table",   "an array",       "a string",       "an integer",
        "a number", "a boolean", "a date or time", "a date or time", "a date or time"};
    return kNames.at(static_cast<std::size_t>(n.type()));
  }

 private:
  std::string file_;
};

}  // namespace fabperf
