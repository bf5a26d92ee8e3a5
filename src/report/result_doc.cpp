// The decoder of a result document (render_json.cpp is its encoder): the types both write and
// read have one field list (report/result_json.hpp), which a DocReader walks here.
#include <fabperf/core/error.hpp>
#include <fabperf/report/result_doc.hpp>

#include <fmt/format.h>
#include <type_traits>
#include <utility>

#include "report/result_json.hpp"

namespace fabperf {
namespace {

using nlohmann::json;

bool enum_from(std::string_view name, NodeStatus& out) {
  for (const auto s : {NodeStatus::ok, NodeStatus::lost, NodeStatus::stalled, NodeStatus::failed}) {
    if (to_string(s) == name) out = s;
  }
  return to_string(out) == name;
}
bool enum_from(std::string_view name, CounterCategory& out) {
  out = counter_category_from_string(name).value_or(out);
  return to_string(out) == name;
}

// One object of the document and its path in it ("nodes[1].links[0]"), for the error; the
// visitor of doc_fields() that reads.
struct DocReader {
  static constexpr bool kIn = true;
  const json& j;
  std::string at;
  const std::string& what;
  bool strict;

  [[noreturn]] void fail(const std::string& key, const char* problem) const {
    throw UsageError(fmt::format("{}: field '{}{}' {}", what, at.empty() ? "" : at + ".", key, problem));
  }
  // The field's value, or nullptr when it is absent or null and may be.
  const json* get(const char* key, Need need) const {
    const auto it = j.find(key);
    if (it == j.end()) {
      if (strict && need != Need::may) fail(key, "missing");
      return nullptr;
    }
    return it->is_null() && !(strict && need == Need::must) ? nullptr : &*it;
  }
  [[nodiscard]] std::optional<DocReader> obj(const char* key, Need need = Need::must) const {
    const json* v = get(key, need);
    if (v == nullptr) return std::nullopt;
    if (!v->is_object()) fail(key, "must be an object");
    return DocReader{*v, at.empty() ? key : at + "." + key, what, strict};
  }
  template <typename F>
  void each(const char* key, Need need, F&& f) const {
    const json* v = get(key, need);
    if (v == nullptr) return;
    if (!v->is_array()) fail(key, "must be a list");
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_object()) fail(fmt::format("{}[{}]", key, i), "must be an object");
      f(DocReader{(*v)[i], fmt::format("{}{}[{}]", at.empty() ? "" : at + ".", key, i), what, strict}, i);
    }
  }
  // Into `out`, which keeps its value (its "unknown") when the field is absent or null and may
  // be: a number, a string, a flag or an enum's name, an object of a type with a field list (or an
  // optional one), or a list of them. Other members of a field list are the writer's alone.
  template <typename T>
  void operator()(const char* key, T& out, Need need, Unknown /*unknown*/ = Unknown::never) const {
    if constexpr (requires(const DocReader& r, T& m) { doc_fields(r, m); }) {
      if (const auto o = obj(key, need)) doc_fields(*o, out);
    } else if constexpr (requires { out.has_value(); }) {
      if (const auto o = obj(key, need)) doc_fields(*o, out.emplace());
    } else if constexpr (requires(const DocReader& r, T& m) { doc_fields(r, *m.begin()); }) {
      each(key, need, [&out](const DocReader& r, std::size_t) { doc_fields(r, out.emplace_back()); });
    } else if constexpr (std::is_enum_v<T>) {
      std::string name;
      (*this)(key, name, need);
      if (!name.empty() && !enum_from(name, out)) fail(key, "is not a known name");
    } else if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
      const json* v = get(key, need);
      if (v == nullptr) return;
      const auto [ok, problem] =
          std::is_floating_point_v<T>      ? std::pair{v->is_number(), "must be a number"}
          : std::is_same_v<T, std::string> ? std::pair{v->is_string(), "must be a string"}
          : std::is_same_v<T, bool>
              ? std::pair{v->is_boolean(), "must be true or false"}
              : std::pair{v->is_number_integer() && (std::is_signed_v<T> || v->get<std::int64_t>() >= 0),
                          "must be a whole number"};
      if (!ok) fail(key, problem);
      out = v->get<T>();
    }
  }
};

// The window's sum of each category KPIs read, also where no counter of it is a top mover.
void doc_fields(const DocReader& r, CounterReport& c) {
  r("dips", c.dips, Need::may);
  r("movers", c.categories, Need::must);
  if (const auto sums = r.obj("categories")) {
    for (const auto cat :
         {CounterCategory::pause, CounterCategory::discard, CounterCategory::fec_uncorrected, CounterCategory::ecn}) {
      std::uint64_t total = 0;
      (*sums)(std::string(to_string(cat)).c_str(), total, Need::must);
      if (total == 0) continue;
      auto it = std::ranges::find(c.categories, cat, &CategoryMovers::category);
      if (it == c.categories.end()) it = c.categories.insert(it, {cat, 0, {}});
      it->total = total;
    }
  }
}

}  // namespace

std::string result_doc_problem(const json& doc) {
  if (!doc.is_object()) return "no fields (not a JSON object)";
  const auto schema = doc.value("schema", json()).is_string() ? doc["schema"].get<std::string>() : "";
  if (schema != kResultSchema) return fmt::format("schema '{}', expected '{}'", schema, kResultSchema);
  const json ver = doc.value("schema_version", json());
  if (!ver.is_number_integer() || ver.get<int>() < kOldestResultSchemaVersion ||
      ver.get<int>() > kResultSchemaVersion) {
    return fmt::format("schema_version {}, this fabperf reads versions {} to {}", ver.is_null() ? "(none)" : ver.dump(),
                       kOldestResultSchemaVersion, kResultSchemaVersion);
  }
  for (const char* list : {"nodes", "pairs"}) {
    if (!doc.value(list, json()).is_array()) return fmt::format("no '{}' list", list);
  }
  if (!doc.value("aggregate", json()).is_object()) return "no 'aggregate'";
  return "";
}

ResultDoc read_result_doc(const json& doc, ReadMode mode, const std::string& what) {
  if (!doc.is_object()) throw UsageError(what + ": not an object");
  const DocReader r{doc, "", what, mode == ReadMode::strict};
  ResultDoc d;
  r("schema_version", d.schema_version, Need::may);
  if (const auto s = r.obj("settings")) {
    d.settings = s->j;
    (*s)("test", d.test, Need::must);
  }
  FABPERF_FIELDS(r, Need::must, d, complete, clients, servers, aggregate);
  FABPERF_FIELDS(r, Need::may, d, summary, interrupted, latency, delay);
  if (const auto a = r.obj("aggregate")) (*a)("window_s", d.window_s, Need::may);
  if (const json* f = r.get("findings", Need::may); f != nullptr && f->is_array()) {
    for (const auto& x : *f) {
      if (x.is_string()) d.findings.push_back(x.get<std::string>());
    }
  }
  r.each("nodes", Need::must, [&d](const DocReader& n, std::size_t i) {
    auto& node = d.nodes.emplace_back();
    node.index = static_cast<std::uint32_t>(i);
    doc_fields(n, node);
    n("counters", node.counters, Need::may);
  });
  FABPERF_FIELDS(r, Need::must, d, pairs);
  return d;
}

}  // namespace fabperf
