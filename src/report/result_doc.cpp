// The one decoder of a result document (render_json.cpp is its encoder).
#include <fabperf/core/error.hpp>
#include <fabperf/report/result_doc.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <type_traits>
#include <utility>

namespace fabperf {
namespace {

using nlohmann::json;

// What a field is to a strict read: always written by render_json (`must`), written but null when
// unknown (`nullable`), or written only since some version or only when measured (`may`). A lenient
// read treats all as `may`.
enum class Need { must, nullable, may };

// One object of the document and its path in it ("nodes[1].links[0]"), for the error.
struct Reader {
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
  // The field as T (double, a whole number, std::string or bool), or nullopt when absent or null and it may be.
  template <typename T>
  [[nodiscard]] std::optional<T> as(const char* key, Need need) const {
    const json* v = get(key, need);
    if (v == nullptr) return std::nullopt;
    const auto [ok, problem] =
        std::is_same_v<T, double>        ? std::pair{v->is_number(), "must be a number"}
        : std::is_same_v<T, std::string> ? std::pair{v->is_string(), "must be a string"}
        : std::is_same_v<T, bool>
            ? std::pair{v->is_boolean(), "must be true or false"}
            : std::pair{v->is_number_integer() && v->get<std::int64_t>() >= 0, "must be a whole number"};
    if (!ok) fail(key, problem);
    return v->get<T>();
  }
  // Into `out` (an optional: empty when absent or null), which keeps its value when the field may be and is not there.
  template <typename T>
  void read(const char* key, Need need, T& out) const {
    if constexpr (std::is_same_v<T, std::optional<double>>) {
      out = as<double>(key, need);
    } else if (auto v = as<T>(key, need)) {
      out = std::move(*v);
    }
  }
  [[nodiscard]] std::optional<Reader> obj(const char* key, Need need = Need::must) const {
    const json* v = get(key, need);
    if (v == nullptr) return std::nullopt;
    if (!v->is_object()) fail(key, "must be an object");
    return Reader{*v, at.empty() ? key : at + "." + key, what, strict};
  }
  template <typename F>
  void each(const char* key, Need need, F&& f) const {
    const json* v = get(key, need);
    if (v == nullptr) return;
    if (!v->is_array()) fail(key, "must be a list");
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_object()) fail(fmt::format("{}[{}]", key, i), "must be an object");
      f(Reader{(*v)[i], fmt::format("{}{}[{}]", at.empty() ? "" : at + ".", key, i), what, strict}, i);
    }
  }
  // The list's objects, each read into a T by f(reader, T&, index).
  template <typename T, typename F>
  [[nodiscard]] std::vector<T> list(const char* key, Need need, F&& f) const {
    std::vector<T> out;
    each(key, need, [&](const Reader& r, std::size_t i) { f(r, out.emplace_back(), i); });
    return out;
  }
};

// r.read(#f, need, v.f) for each field f named: the fields whose key is their name (render_json's
// FABPERF_JSON_FIELDS lists them the same way).
#define FABPERF_READ_FIELD(f) fabperf_r.read(#f, fabperf_need, fabperf_v.f);
#define FABPERF_READ_FIELDS(r, need, v, ...)                                   \
  do {                                                                         \
    const Reader& fabperf_r = (r);                                             \
    const Need fabperf_need = (need);                                          \
    auto& fabperf_v = (v);                                                     \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(FABPERF_READ_FIELD, __VA_ARGS__)) \
  } while (false)

std::optional<ResultLatency> latency(const Reader& n, const char* key) {
  const auto l = n.obj(key, Need::may);
  if (!l) return std::nullopt;
  ResultLatency v;
  FABPERF_READ_FIELDS(*l, Need::must, v, count, p99_us);
  FABPERF_READ_FIELDS(*l, Need::may, v, mean_us, min_us, p50_us, p90_us, p999_us, max_us);
  v.buckets = l->list<ResultLatency::Bucket>("buckets", Need::may, [](const Reader& b, auto& o, std::size_t) {
    FABPERF_READ_FIELDS(b, Need::must, o, lo_us, hi_us, count);
  });
  std::sort(v.buckets.begin(), v.buckets.end(), [](const auto& a, const auto& b) { return a.lo_us < b.lo_us; });
  return v;
}

std::vector<IntervalPoint> intervals(const Reader& r) {
  return r.list<IntervalPoint>("intervals", Need::may, [](const Reader& p, auto& o, std::size_t) {
    FABPERF_READ_FIELDS(p, Need::must, o, t_s, tx_mb_per_s);
    p.read("rx_mb_per_s", Need::may, o.rx_mb_per_s);
  });
}

std::optional<ResultCounters> counters(const Reader& n) {
  const auto c = n.obj("counters", Need::may);
  if (!c) return std::nullopt;
  ResultCounters out;
  if (const auto cats = c->obj("categories")) {
    for (const char* cat : {"pause", "discard", "fec_uncorrected", "ecn"})
      cats->read(cat, Need::must, out.categories[cat]);
  }
  c->each("movers", Need::must, [&](const Reader& m, std::size_t) {
    std::string category;
    m.read("category", Need::must, category);
    out.movers[category] = m.list<ResultCounterTop>("top", Need::must, [](const Reader& t, auto& o, std::size_t) {
      FABPERF_READ_FIELDS(t, Need::must, o, source, name, delta);
    });
  });
  out.dips = c->list<ResultDip>("dips", Need::may, [](const Reader& d, auto& o, std::size_t) {
    FABPERF_READ_FIELDS(d, Need::must, o, subject, t0_s, t1_s, text);
  });
  return out;
}

void link_of(const Reader& l, ResultLink& v, std::size_t) {
  FABPERF_READ_FIELDS(l, Need::must, v, link, kind, payload_tx_mb_per_s, payload_rx_mb_per_s, tx_errors, rx_errors,
                      tx_dropped, rx_dropped);
  FABPERF_READ_FIELDS(l, Need::nullable, v, speed_mbps, efficiency_pct);
  FABPERF_READ_FIELDS(l, Need::may, v, tx_mb_per_s, rx_mb_per_s, utilization_pct);
  v.intervals = intervals(l);
}

void bond_of(const Reader& b, ResultBond& v, std::size_t) {
  FABPERF_READ_FIELDS(b, Need::may, v, bond, mode, hash_policy, tx_mb_per_s, rx_mb_per_s, tx_members_used,
                      rx_members_used, capacity_used_pct);
  v.members = b.list<ResultBondMember>("members", Need::may, [](const Reader& m, auto& o, std::size_t) {
    FABPERF_READ_FIELDS(m, Need::may, o, member, tx_mb_per_s, rx_mb_per_s, tx_share_pct, rx_share_pct, link_failures);
  });
}

void node_of(const Reader& n, ResultNode& v, std::size_t i) {
  v.index = i;
  FABPERF_READ_FIELDS(n, Need::must, v, index, node, role, tx_mb_per_s, rx_mb_per_s);
  FABPERF_READ_FIELDS(n, Need::may, v, status, cpu_busy_pct);
  if (const auto retrans = n.as<double>("retrans_segs", Need::may))
    v.retrans_segs = static_cast<std::int64_t>(*retrans);
  v.latency = latency(n, "latency");
  v.delay = latency(n, "delay");
  v.counters = counters(n);
  v.links = n.list<ResultLink>("links", Need::must, link_of);
  v.intervals = intervals(n);
  v.bonds = n.list<ResultBond>("bonds", Need::may, bond_of);
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
  const Reader r{doc, "", what, mode == ReadMode::strict};
  ResultDoc d;
  d.schema_version = static_cast<int>(r.as<std::uint64_t>("schema_version", Need::may).value_or(0));
  if (const auto s = r.obj("settings")) {
    d.settings = s->j;
    s->read("test", Need::must, d.test);
  }
  FABPERF_READ_FIELDS(r, Need::must, d, complete, clients, servers);
  FABPERF_READ_FIELDS(r, Need::may, d, summary, interrupted);
  if (const auto a = r.obj("aggregate")) {
    a->read("mb_per_s", Need::must, d.aggregate_mb_per_s);
    a->read("gbit_per_s", Need::may, d.aggregate_gbit_per_s);
    a->read("msg_per_s", Need::may, d.aggregate_msg_per_s);
    a->read("window_s", Need::may, d.window_s);
  }
  d.latency = latency(r, "latency");
  d.delay = latency(r, "delay");
  if (const json* f = r.get("findings", Need::may); f != nullptr && f->is_array()) {
    for (const auto& x : *f) {
      if (x.is_string()) d.findings.push_back(x.get<std::string>());
    }
  }
  d.nodes = r.list<ResultNode>("nodes", Need::must, node_of);
  d.pairs = r.list<ResultPair>("pairs", Need::must, [](const Reader& p, auto& o, std::size_t) {
    FABPERF_READ_FIELDS(p, Need::must, o, client, server, connections, mb_per_s, retrans);
    p.read("rtt_us", Need::may, o.rtt_us);
  });
  return d;
}

}  // namespace fabperf
