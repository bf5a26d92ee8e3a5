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

// What a field is to a strict read: always written by render_json (`must`), or written only
// since some version or only when measured (`may`). A lenient read treats both as `may`.
enum class Need { must, may };

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
    const bool must = strict && need == Need::must;
    if (it == j.end()) {
      if (must) fail(key, "missing");
      return nullptr;
    }
    return it->is_null() && !must ? nullptr : &*it;
  }
  // The field as T (double, std::uint64_t, std::string or bool), or nullopt when absent or null and it may be.
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
  // Null in a strict read: a field whose null means "unknown".
  [[nodiscard]] std::optional<double> nullable(const char* key) const {
    const auto it = j.find(key);
    if (it != j.end() && it->is_null()) return std::nullopt;
    return as<double>(key, Need::must);
  }
  [[nodiscard]] double num(const char* key, Need need = Need::must, double fallback = 0) const {
    return as<double>(key, need).value_or(fallback);
  }
  [[nodiscard]] std::uint64_t count(const char* key, Need need = Need::must, std::uint64_t fallback = 0) const {
    return as<std::uint64_t>(key, need).value_or(fallback);
  }
  [[nodiscard]] std::string str(const char* key, Need need = Need::must) const {
    return as<std::string>(key, need).value_or("");
  }
  [[nodiscard]] bool flag(const char* key, Need need, bool fallback) const {
    return as<bool>(key, need).value_or(fallback);
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
  template <typename T, typename F>
  [[nodiscard]] std::vector<T> list(const char* key, Need need, F&& f) const {
    std::vector<T> out;
    each(key, need, [&](const Reader& r, std::size_t i) { out.push_back(f(r, i)); });
    return out;
  }
};

std::optional<ResultLatency> latency(const Reader& n, const char* key) {
  const auto l = n.obj(key, Need::may);
  if (!l) return std::nullopt;
  ResultLatency v{l->count("count"),
                  l->num("mean_us", Need::may),
                  l->num("min_us", Need::may),
                  l->num("p50_us", Need::may),
                  l->num("p90_us", Need::may),
                  l->num("p99_us"),
                  l->num("p999_us", Need::may),
                  l->num("max_us", Need::may),
                  l->list<ResultLatency::Bucket>("buckets", Need::may, [](const Reader& b, std::size_t) {
                    return ResultLatency::Bucket{b.num("lo_us"), b.num("hi_us"), b.count("count")};
                  })};
  std::sort(v.buckets.begin(), v.buckets.end(), [](const auto& a, const auto& b) { return a.lo_us < b.lo_us; });
  return v;
}

std::vector<IntervalPoint> intervals(const Reader& r) {
  return r.list<IntervalPoint>("intervals", Need::may, [](const Reader& p, std::size_t) {
    return IntervalPoint{p.num("t_s"), p.num("tx_mb_per_s"), p.num("rx_mb_per_s", Need::may)};
  });
}

std::optional<ResultCounters> counters(const Reader& n) {
  const auto c = n.obj("counters", Need::may);
  if (!c) return std::nullopt;
  ResultCounters out;
  if (const auto cats = c->obj("categories")) {
    for (const char* cat : {"pause", "discard", "fec_uncorrected", "ecn"}) out.categories[cat] = cats->num(cat);
  }
  c->each("movers", Need::must, [&](const Reader& m, std::size_t) {
    out.movers[m.str("category")] = m.list<ResultCounterTop>("top", Need::must, [](const Reader& t, std::size_t) {
      return ResultCounterTop{t.str("source"), t.str("name"), t.num("delta")};
    });
  });
  out.dips = c->list<ResultDip>("dips", Need::may, [](const Reader& d, std::size_t) {
    return ResultDip{d.str("subject"), d.num("t0_s"), d.num("t1_s"), d.str("text")};
  });
  return out;
}

ResultLink link_of(const Reader& l, std::size_t) {
  return {l.str("link"),
          l.str("kind"),
          l.num("tx_mb_per_s", Need::may),
          l.num("rx_mb_per_s", Need::may),
          l.num("payload_tx_mb_per_s"),
          l.num("payload_rx_mb_per_s"),
          l.nullable("speed_mbps"),
          l.as<double>("utilization_pct", Need::may),
          l.nullable("efficiency_pct"),
          l.num("tx_errors"),
          l.num("rx_errors"),
          l.num("tx_dropped"),
          l.num("rx_dropped"),
          intervals(l)};
}

ResultBond bond_of(const Reader& b, std::size_t) {
  return {b.str("bond", Need::may),
          b.str("mode", Need::may),
          b.str("hash_policy", Need::may),
          b.num("tx_mb_per_s", Need::may),
          b.num("rx_mb_per_s", Need::may),
          b.num("tx_members_used", Need::may),
          b.num("rx_members_used", Need::may),
          b.num("capacity_used_pct", Need::may, -1),
          b.list<ResultBondMember>("members", Need::may, [](const Reader& m, std::size_t) {
            return ResultBondMember{m.str("member", Need::may),       m.num("tx_mb_per_s", Need::may),
                                    m.num("rx_mb_per_s", Need::may),  m.num("tx_share_pct", Need::may),
                                    m.num("rx_share_pct", Need::may), m.count("link_failures", Need::may)};
          })};
}

ResultNode node_of(const Reader& n, std::size_t i) {
  const auto retrans = n.as<double>("retrans_segs", Need::may);
  return {n.count("index", Need::must, i),
          n.str("node"),
          n.str("role"),
          n.str("status", Need::may),
          n.num("tx_mb_per_s"),
          n.num("rx_mb_per_s"),
          n.num("cpu_busy_pct", Need::may),
          retrans ? static_cast<std::int64_t>(*retrans) : -1,
          latency(n, "latency"),
          latency(n, "delay"),
          counters(n),
          n.list<ResultLink>("links", Need::must, link_of),
          intervals(n),
          n.list<ResultBond>("bonds", Need::may, bond_of)};
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
  d.schema_version = static_cast<int>(r.count("schema_version", Need::may));
  if (const auto s = r.obj("settings")) {
    d.settings = s->j;
    d.test = s->str("test");
  }
  d.summary = r.str("summary", Need::may);
  d.complete = r.flag("complete", Need::must, true);
  d.interrupted = r.flag("interrupted", Need::may, false);
  d.clients = r.count("clients");
  d.servers = r.count("servers");
  if (const auto a = r.obj("aggregate")) {
    d.aggregate_mb_per_s = a->num("mb_per_s");
    d.aggregate_gbit_per_s = a->num("gbit_per_s", Need::may);
    d.aggregate_msg_per_s = a->num("msg_per_s", Need::may);
    d.window_s = a->num("window_s", Need::may);
  }
  d.latency = latency(r, "latency");
  d.delay = latency(r, "delay");
  if (const json* f = r.get("findings", Need::may); f != nullptr && f->is_array()) {
    for (const auto& x : *f) {
      if (x.is_string()) d.findings.push_back(x.get<std::string>());
    }
  }
  d.nodes = r.list<ResultNode>("nodes", Need::must, node_of);
  d.pairs = r.list<ResultPair>("pairs", Need::must, [](const Reader& p, std::size_t) {
    return ResultPair{p.count("client"), p.count("server"), p.count("connections"),
                      p.num("mb_per_s"), p.num("retrans"),  static_cast<std::uint32_t>(p.count("rtt_us", Need::may))};
  });
  return d;
}

}  // namespace fabperf
