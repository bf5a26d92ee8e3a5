// Reading results back: a step's result document as the typed StepResult (one strict decoder),
// and a results file for --resume through load_results, the one reader of results files.
#include <fabperf/core/error.hpp>
#include <fabperf/plan/plan.hpp>
#include <fabperf/report/plan_report.hpp>

#include <fmt/format.h>

namespace fabperf::plan {
namespace {

using nlohmann::json;

// One object of the document and its path in it ("nodes[1].links[0]"), for the error.
struct Reader {
  const json& j;
  std::string at;

  [[noreturn]] void fail(const std::string& key, const char* problem) const {
    throw UsageError(fmt::format("step result: field '{}{}' {}", at.empty() ? "" : at + ".", key, problem));
  }
  const json& get(const char* key) const {
    const auto it = j.find(key);
    if (it == j.end()) fail(key, "missing");
    return *it;
  }
  [[nodiscard]] double num(const char* key) const {
    if (!get(key).is_number()) fail(key, "must be a number");
    return j[key].get<double>();
  }
  [[nodiscard]] std::optional<double> num_or_null(const char* key) const {
    return get(key).is_null() ? std::nullopt : std::optional(num(key));
  }
  [[nodiscard]] std::uint64_t count(const char* key) const {
    const auto& v = get(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) fail(key, "must be a whole number");
    return v.get<std::uint64_t>();
  }
  [[nodiscard]] std::string str(const char* key) const {
    if (!get(key).is_string()) fail(key, "must be a string");
    return j[key].get<std::string>();
  }
  [[nodiscard]] bool flag(const char* key) const {
    if (!get(key).is_boolean()) fail(key, "must be true or false");
    return j[key].get<bool>();
  }
  [[nodiscard]] Reader obj(const char* key) const {
    if (!get(key).is_object()) fail(key, "must be an object");
    return {j[key], at.empty() ? key : at + "." + key};
  }
  // Absent or null: nullopt.
  [[nodiscard]] std::optional<Reader> opt_obj(const char* key) const {
    return j.contains(key) && !j[key].is_null() ? std::optional(obj(key)) : std::nullopt;
  }
  template <typename F>
  void each(const char* key, F&& f) const {
    if (!get(key).is_array()) fail(key, "must be a list");
    for (std::size_t i = 0; i < j[key].size(); ++i) {
      if (!j[key][i].is_object()) fail(fmt::format("{}[{}]", key, i), "must be an object");
      f(Reader{j[key][i], fmt::format("{}{}[{}]", at.empty() ? "" : at + ".", key, i)});
    }
  }
  template <typename T, typename F>
  [[nodiscard]] std::vector<T> list(const char* key, F&& f) const {
    std::vector<T> out;
    each(key, [&](const Reader& r) { out.push_back(f(r)); });
    return out;
  }
};

std::optional<LatencyResult> latency(const Reader& n, const char* key) {
  const auto l = n.opt_obj(key);
  return l ? std::optional(LatencyResult{l->num("p99_us"), l->count("count")}) : std::nullopt;
}

NodeCounters counters(const Reader& c) {
  NodeCounters out;
  const Reader cats = c.obj("categories");
  for (const char* cat : {"pause", "discard", "fec_uncorrected", "ecn"}) out.categories[cat] = cats.num(cat);
  c.each("movers", [&](const Reader& m) {
    out.movers[m.str("category")] = m.list<CounterTop>("top", [](const Reader& t) {
      return CounterTop{t.str("source"), t.str("name"), t.num("delta")};
    });
  });
  return out;
}

StepLink link_of(const Reader& l) {
  return {l.str("link"),
          l.str("kind"),
          l.num("payload_tx_mb_per_s"),
          l.num("payload_rx_mb_per_s"),
          l.num_or_null("speed_mbps"),
          l.num_or_null("efficiency_pct"),
          l.num("tx_errors"),
          l.num("rx_errors"),
          l.num("tx_dropped"),
          l.num("rx_dropped")};
}

NodeResult node_of(const Reader& n) {
  const auto c = n.opt_obj("counters");
  return {n.count("index"),
          n.str("node"),
          n.str("role"),
          n.num("tx_mb_per_s"),
          n.num("rx_mb_per_s"),
          latency(n, "latency"),
          latency(n, "delay"),
          c ? std::optional(counters(*c)) : std::nullopt,
          n.list<StepLink>("links", link_of)};
}

}  // namespace

StepResult decode_step_result(const json& result) {
  if (!result.is_object()) throw UsageError("step result: not an object");
  const Reader r{result, ""};
  return {r.obj("settings").str("test"),
          r.flag("complete"),
          r.count("clients"),
          r.count("servers"),
          r.obj("aggregate").num("mb_per_s"),
          r.list<NodeResult>("nodes", node_of),
          r.list<PairResult>("pairs", [](const Reader& p) {
            return PairResult{p.count("client"), p.count("server"), p.count("connections"), p.num("mb_per_s"),
                              p.num("retrans")};
          })};
}

ResumeState read_results(const std::string& path) {
  RawResults raw = load_results(path);
  if (raw.single_run) throw UsageError(fmt::format("--resume {}: not a fabperf plan results file", path));
  ResumeState st{std::move(raw.plan), {}, std::move(raw.kpis)};
  for (auto& s : raw.steps) {
    // The id first: json's operator= takes its argument by value, and C++17 evaluates the right
    // side of an assignment first, so `steps[s["id"]] = std::move(s)` would read a moved-from s.
    auto id = s["id"].get<std::string>();
    st.steps[std::move(id)] = std::move(s);
  }
  return st;
}

}  // namespace fabperf::plan
