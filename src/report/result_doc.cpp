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

template <class T>
constexpr bool kDocOptional = false;
template <class T>
constexpr bool kDocOptional<std::optional<T>> = true;

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
  // be: a number, a string or a flag, an object of a type with a field list (or an optional one),
  // or a list of them. Other members of a field list are the writer's alone.
  template <typename T>
  void operator()(const char* key, T& out, Need need, Unknown /*unknown*/ = Unknown::never) const {
    if constexpr (requires(const DocReader& r, T& m) { doc_fields(r, m); }) {
      if (const auto o = obj(key, need)) doc_fields(*o, out);
    } else if constexpr (kDocOptional<T>) {
      if (const auto o = obj(key, need)) doc_fields(*o, out.emplace());
    } else if constexpr (requires(const DocReader& r, T& m) { doc_fields(r, *m.begin()); }) {
      each(key, need, [&out](const DocReader& r, std::size_t) { doc_fields(r, out.emplace_back()); });
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

void doc_fields(const DocReader& r, ResultCounters& c) {
  if (const auto cats = r.obj("categories")) {
    for (const char* cat : {"pause", "discard", "fec_uncorrected", "ecn"}) (*cats)(cat, c.categories[cat], Need::must);
  }
  r.each("movers", Need::must, [&c](const DocReader& m, std::size_t) {
    std::string category;
    m("category", category, Need::must);
    m("top", c.movers[category], Need::must);
  });
  r("dips", c.dips, Need::may);
}

// index: the node's place in the list unless the document says.
void doc_fields(const DocReader& r, ResultNode& n) {
  FABPERF_FIELDS(r, Need::must, n, index, node, role, tx_mb_per_s, rx_mb_per_s);
  FABPERF_FIELDS(r, Need::may, n, status, cpu_busy_pct, retrans_segs, latency, delay, counters);
  FABPERF_FIELDS(r, Need::must, n, links);
  FABPERF_FIELDS(r, Need::may, n, intervals, bonds);
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
  FABPERF_FIELDS(r, Need::must, d, complete, clients, servers);
  FABPERF_FIELDS(r, Need::may, d, summary, interrupted);
  if (const auto a = r.obj("aggregate")) {
    (*a)("mb_per_s", d.aggregate_mb_per_s, Need::must);
    (*a)("gbit_per_s", d.aggregate_gbit_per_s, Need::may);
    (*a)("msg_per_s", d.aggregate_msg_per_s, Need::may);
    (*a)("window_s", d.window_s, Need::may);
  }
  FABPERF_FIELDS(r, Need::may, d, latency, delay);
  if (const json* f = r.get("findings", Need::may); f != nullptr && f->is_array()) {
    for (const auto& x : *f) {
      if (x.is_string()) d.findings.push_back(x.get<std::string>());
    }
  }
  r.each("nodes", Need::must, [&d](const DocReader& n, std::size_t i) {
    d.nodes.emplace_back().index = i;
    doc_fields(n, d.nodes.back());
  });
  FABPERF_FIELDS(r, Need::must, d, pairs);
  return d;
}

}  // namespace fabperf
