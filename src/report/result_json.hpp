// The `fabperf.result` document's codec: one field list per type, doc_fields(v, T&), that writes
// the document (render_json.cpp through DocOut; ResultStream writes the same pieces as nodes'
// results arrive) and reads it back (result_doc.cpp's reader, into the same types), so each key
// is named once. render_json() assembles header, nodes, pairs, connections and summary in memory;
// the header and summary objects hold every top-level key but nodes, pairs and connections.
#pragma once

#include <fabperf/core/fields.hpp>
#include <fabperf/report/result_doc.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>

// std::optional as a JSON value: null when empty (nlohmann 3.11.2 does not convert it).
template <typename T>
struct nlohmann::adl_serializer<std::optional<T>> {
  static void to_json(nlohmann::json& j, const std::optional<T>& v) {
    j = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  }
  static void from_json(const nlohmann::json& j, std::optional<T>& v) {
    v = j.is_null() ? std::nullopt : std::optional(j.get<T>());
  }
};

// v(#f, m.f, need) for each field f named: the fields whose key is their name.
#define FABPERF_FIELDS(v, need, m, ...)                                   \
  do {                                                                    \
    auto&& fabperf_v = (v);                                               \
    const auto fabperf_need = (need);                                     \
    auto& fabperf_m = (m);                                                \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(FABPERF_FIELD, __VA_ARGS__)) \
  } while (false)
#define FABPERF_FIELD(f) fabperf_v(#f, fabperf_m.f, fabperf_need);
// j[#f] = m.f for each field f named: a document only written (compare, RDMA ports).
#define FABPERF_JSON_FIELDS(j, m, ...)                                                                               \
  FABPERF_FIELDS(                                                                                                    \
      ([&fabperf_j = (j)](const char* fabperf_k, const auto& fabperf_x, int) { fabperf_j[fabperf_k] = fabperf_x; }), \
      0, m, __VA_ARGS__)

namespace fabperf {

// What a field is to a strict read: always written (`must`), written but null when unknown
// (`nullable`), or written only since some version or only when measured (`may`). A lenient read
// treats all as `may`; the writer writes every field. The reader reads numbers, strings, flags
// and the types with a field list; what else a list names (inventories, audits, notes, named
// counters) only the writer needs.
enum class Need { must, nullable, may };
// How a figure says "unknown": by a negative value, by 0 or less, or by an empty string. It is
// written as null, and null reads back as the member's default (which says the same).
enum class Unknown { never, negative, not_positive, empty };

// v(key, member, need[, unknown]) for each field. V::kIn: reading (members are filled).
template <class V>
void doc_fields(V& v, IntervalPoint& p) {
  FABPERF_FIELDS(v, Need::must, p, t_s, tx_mb_per_s);
  FABPERF_FIELDS(v, Need::may, p, rx_mb_per_s);
}
template <class V>
void doc_fields(V& v, ResultLatency::Bucket& b) {
  FABPERF_FIELDS(v, Need::must, b, lo_us, hi_us, count);
}
template <class V>
void doc_fields(V& v, ResultLatency& l) {
  FABPERF_FIELDS(v, Need::must, l, count, p99_us);
  FABPERF_FIELDS(v, Need::may, l, mean_us, stddev_us, min_us, p50_us, p90_us, p999_us, max_us);
  v("buckets", l.buckets, Need::may);
  if constexpr (V::kIn) std::ranges::sort(l.buckets, {}, &ResultLatency::Bucket::lo_us);
}
template <class V>
void doc_fields(V& v, CounterMove& m) {
  FABPERF_FIELDS(v, Need::must, m, source, name, delta);
  FABPERF_FIELDS(v, Need::may, m, category, label);
}
template <class V>
void doc_fields(V& v, CategoryMovers& c) {
  FABPERF_FIELDS(v, Need::must, c, category, top);
  FABPERF_FIELDS(v, Need::may, c, total);
}
template <class V>
void doc_fields(V& v, Dip& d) {
  FABPERF_FIELDS(v, Need::must, d, subject, t0_s, t1_s, text);
  FABPERF_FIELDS(v, Need::may, d, mb_per_s, median_mb_per_s, change_pct, rose, rose_unlisted);
}
template <class V>
void doc_fields(V& v, Throughput& t) {
  FABPERF_FIELDS(v, Need::must, t, mb_per_s);
  FABPERF_FIELDS(v, Need::may, t, bytes, gbit_per_s, msgs, msg_per_s);
}
template <class V>
void doc_fields(V& v, PairReport& p) {
  doc_fields(v, p.tput);  // the pair's figures beside its other fields
  FABPERF_FIELDS(v, Need::must, p, client, server, connections, retrans);
  FABPERF_FIELDS(v, Need::may, p, measured_by, rtt_us, snd_mss, sender_bytes);
}
template <class V>
void doc_fields(V& v, LinkReport& l) {
  v("link", l.name, Need::must);
  FABPERF_FIELDS(v, Need::must, l, kind, payload_tx_mb_per_s, payload_rx_mb_per_s, tx_errors, rx_errors, tx_dropped,
                 rx_dropped);
  FABPERF_FIELDS(v, Need::may, l, driver, mtu, duplex, window_s, tx_mb_per_s, rx_mb_per_s, vanished, min_sender_mss,
                 jumbo_mismatch, wire_audit, intervals);
  v("speed_mbps", l.speed_mbps, Need::nullable, Unknown::not_positive);
  v("efficiency_pct", l.efficiency_pct, Need::nullable, Unknown::negative);
  v("shaped_mbps", l.shaped_mbps, Need::may, Unknown::negative);
  v("utilization_pct", l.utilization_pct, Need::may, Unknown::negative);
  v("best_goodput_mb_per_s", l.best_goodput_mb_per_s, Need::may, Unknown::not_positive);
}
template <class V>
void doc_fields(V& v, BondMemberReport& m) {
  v("member", m.name, Need::may);
  FABPERF_FIELDS(v, Need::may, m, state_open, state_close, link_failures, tx_mb_per_s, rx_mb_per_s, tx_share_pct,
                 rx_share_pct, intervals);
  v("speed_mbps", m.speed_mbps, Need::may, Unknown::not_positive);
  v("predicted_flows", m.predicted_flows, Need::may, Unknown::negative);
  v("predicted_tx_share_pct", m.predicted_tx_share_pct, Need::may, Unknown::negative);
}
template <class V>
void doc_fields(V& v, BondFlowReport& f) {
  FABPERF_FIELDS(v, Need::may, f, local, remote, tx_bytes_window);
  v("member_index", f.member_index, Need::may, Unknown::negative);
  v("member", f.member, Need::may, Unknown::empty);
}
// The node's fields but its counters and RDMA ports (render_json.cpp writes them; result_doc.cpp
// reads the counters).
template <class V>
void doc_fields(V& v, NodeReport& n) {
  v("node", n.name, Need::must);
  FABPERF_FIELDS(v, Need::must, n, index, role, tx_mb_per_s, rx_mb_per_s, links);
  FABPERF_FIELDS(v, Need::may, n, status, cpu_busy_pct, latency, delay, intervals, bonds, hostname, error, aborted,
                 window_s, process_cpu_s, bytes_per_cpu_s, busiest_thread, busiest_thread_pct, host_limited,
                 clock_offset_us, clock_uncertainty_us, late_ms, trials, pcie_slots, warnings);
  v("window_open_unix_s", n.window_open_unix_s, Need::may, Unknown::not_positive);
  v("retrans_segs", n.retrans_segs, Need::may, Unknown::negative);
}
template <class V>
void doc_fields(V& v, BondReport& b) {
  v("bond", b.name, Need::may);
  FABPERF_FIELDS(v, Need::may, b, mode, hash_policy, peers, members, tx_mb_per_s, rx_mb_per_s, tx_jain, rx_jain,
                 tx_members_used, rx_members_used, prediction, flows, notes, inventory);
  v("member_speed_sum_mbps", b.member_speed_sum_mbps, Need::may, Unknown::not_positive);
  v("best_goodput_mb_per_s", b.best_goodput_mb_per_s, Need::may, Unknown::not_positive);
  v("capacity_used_pct", b.capacity_used_pct, Need::may, Unknown::negative);
  v("tx_max_min", b.tx_max_min, Need::may, Unknown::not_positive);
  v("rx_max_min", b.rx_max_min, Need::may, Unknown::not_positive);
}

// The writer's visitor: each field as its JSON value (a type with a field list through it, a list
// of them entry by entry, an optional one or null, anything else as JsonOut puts it: an enum by
// its name, a type by its to_json), null when it says "unknown".
template <class T>
nlohmann::json doc_json(const T& x);
struct DocOut {
  static constexpr bool kIn = false;
  nlohmann::json& j;
  template <class T>
  void operator()(const char* key, const T& x, Need /*need*/, Unknown unknown = Unknown::never) const {
    bool null = false;
    if constexpr (std::is_signed_v<T>) {
      null = unknown == Unknown::negative ? x < 0 : unknown == Unknown::not_positive && x <= 0;
    } else if constexpr (std::is_same_v<T, std::string>) {
      null = unknown == Unknown::empty && x.empty();
    }
    j[key] = null ? nlohmann::json(nullptr) : doc_json(x);
  }
};
template <class T>
nlohmann::json doc_json(const T& x) {
  if constexpr (requires(DocOut & o, T & m) { doc_fields(o, m); }) {
    nlohmann::json j = nlohmann::json::object();
    DocOut out{j};
    doc_fields(out, const_cast<T&>(x));  // NOLINT: DocOut only reads
    return j;
  } else if constexpr (requires(DocOut & o, T & m) { doc_fields(o, *m.begin()); }) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : x) a.push_back(doc_json(e));
    return a;
  } else if constexpr (requires { x.has_value(); }) {
    return x ? doc_json(*x) : nlohmann::json(nullptr);
  } else {
    return JsonOut::put(x);
  }
}

namespace jsonu {
// The list's elements, each through f.
template <class T, class F>
nlohmann::json array_json(const std::vector<T>& xs, F&& f) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& x : xs) out.push_back(f(x));
  return out;
}
// A figure whose source marks "unknown" by a negative value: null.
template <class T>
nlohmann::json nonneg(T v) {
  return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
}
}  // namespace jsonu

nlohmann::json node_json(const NodeReport& n);
nlohmann::json connection_json(const ConnReport& c);
// What is known before any result: schema, versions, test id, start time, settings, role counts.
nlohmann::json result_header_json(const Report& r);
// What needs every node: complete, interrupted, aggregate, CPU, latency, verify, findings, summary.
nlohmann::json result_summary_json(const Report& r);

}  // namespace fabperf
