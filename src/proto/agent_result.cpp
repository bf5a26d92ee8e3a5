#include <fabperf/core/error.hpp>
#include <fabperf/core/printable.hpp>
#include <fabperf/proto/agent_result.hpp>
#include <fabperf/proto/proto.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <span>

namespace fabperf {

using nlohmann::json;

namespace {
constexpr std::string_view kFlowRoles[] = {"client", "server"};  // in value order
constexpr std::string_view kFlowOps[] = {"write", "read", "rpc", "probe"};
}  // namespace

std::string_view to_string(FlowRole r) {
  return kFlowRoles[static_cast<int>(r)];
}
std::string_view to_string(FlowOp o) {
  return kFlowOps[static_cast<int>(o)];
}

// Serialisation only: parse_trial reads them back with range checks.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrialArm, name, bytes, seconds, cpu_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrialResult, what, chosen, reason, arms)

namespace {
// Named counter samples, delta-encoded: the first sample carries every counter, each later one
// only the counters whose value changed (a NIC lists hundreds, most of them idle). Decoding
// carries values forward, so every sample is whole again.
json counter_samples_json(const std::vector<CounterSample>& samples) {
  json out = json::array();
  const CounterValues* prev = nullptr;
  for (const auto& s : samples) {
    json values = json::object();
    for (std::size_t i = 0; i < s.values.size(); ++i) {
      const auto& [k, v] = s.values[i];
      // Sources list their counters in a stable order: compare by position, by name otherwise.
      const CounterValues::value_type* before = nullptr;
      if (prev && i < prev->size() && (*prev)[i].first == k) {
        before = &(*prev)[i];
      } else if (prev) {
        const auto it = std::ranges::find(*prev, k, &CounterValues::value_type::first);
        if (it != prev->end()) before = &*it;
      }
      if (before == nullptr || before->second != v) values[k] = v;
    }
    out.push_back({{"t_ns", s.t_ns}, {"values", std::move(values)}});
    prev = &s.values;
  }
  return out;
}

// `cells`: the values expanded so far in this RESULT, checked against kMaxCounterCells before
// each sample is made whole (the expansion is what costs memory, not the frame).
std::vector<CounterSample> parse_counter_samples(const json& arr, const std::string& ctx, std::size_t& cells) {
  if (!arr.is_array() || arr.size() > 1000000) throw ProtocolError(ctx + ": expected an array of samples");
  std::vector<CounterSample> out;
  std::map<std::string, std::size_t> index;
  CounterValues current;
  for (const auto& e : arr) {
    Fields h(e, ctx + "[]");
    CounterSample x;
    x.t_ns = h.i64("t_ns", INT64_MIN / 2, INT64_MAX / 2);
    const auto& values = h.object("values");
    if (values.size() > 65536) throw ProtocolError(ctx + "[].values: too many counters");
    for (const auto& [k, v] : values.items()) {
      if (k.empty() || k.size() > 96 || !v.is_number_unsigned()) {
        throw ProtocolError(ctx + "[].values: expected counter name -> unsigned integer");
      }
      const auto it = index.find(k);
      if (it == index.end()) {
        if (index.size() >= 65536) throw ProtocolError(ctx + "[].values: too many counters");
        index.emplace(k, current.size());
        // The report prints counter names: a peer's escape sequences are shown, never obeyed.
        current.emplace_back(printable(k), v.get<std::uint64_t>());
      } else {
        current[it->second].second = v.get<std::uint64_t>();
      }
    }
    cells += current.size();
    if (cells > kMaxCounterCells) {
      throw ProtocolError(
          fmt::format("{}: named counters expand to more than {} values (counters x samples)", ctx, kMaxCounterCells));
    }
    x.values = current;
    out.push_back(std::move(x));
  }
  return out;
}

// TCP_INFO's 32-bit fields, on the wire under their own names.
constexpr std::pair<const char*, std::uint32_t TcpSample::*> kTcpFields[] = {
    {"rtt_us", &TcpSample::rtt_us},   {"rttvar_us", &TcpSample::rttvar_us}, {"snd_mss", &TcpSample::snd_mss},
    {"rcv_mss", &TcpSample::rcv_mss}, {"pmtu", &TcpSample::pmtu},           {"snd_cwnd", &TcpSample::snd_cwnd}};

json threads_json(const std::vector<ThreadCpu>& threads) {
  json t = json::array();
  for (const auto& x : threads) t.push_back({x.label, x.cpu_s});
  return t;
}
}  // namespace

json to_json(const AgentResult& r) {
  json flows = json::array();
  for (const auto& f : r.flows) {
    json tcp = nullptr;
    if (f.tcp.valid) {
      tcp = {{"total_retrans", f.tcp.total_retrans}};
      for (const auto& [name, field] : kTcpFields) tcp[name] = f.tcp.*field;
    }
    flows.push_back({{"id", f.id},
                     {"role", to_string(f.role)},
                     {"op", to_string(f.op)},
                     {"peer_node", f.peer_node},
                     {"local", f.local},
                     {"remote", f.remote},
                     {"tx_bytes_total", f.tx_bytes_total},
                     {"rx_bytes_total", f.rx_bytes_total},
                     {"tx_bytes_window", f.tx_bytes_window},
                     {"rx_bytes_window", f.rx_bytes_window},
                     {"tx_delivered_window", f.tx_delivered_window},
                     {"rx_queued_delta", f.rx_queued_delta},
                     {"msgs_window", f.msgs_window},
                     {"retrans_window", f.retrans_window},
                     {"tcp", tcp},
                     {"error", f.error},
                     {"iface", f.iface},
                     {"verify_errors", f.verify_errors}});
    if (!f.rdma_port.empty()) flows.back()["rdma_port"] = f.rdma_port;
  }
  json links = json::array();
  for (const auto& l : r.links) {
    json samples = json::array();
    for (const auto& s : l.samples) {
      const auto& c = s.counters;
      samples.push_back({s.t_ns, c.present, c.tx_bytes, c.rx_bytes, c.tx_packets, c.rx_packets, c.tx_errors,
                         c.rx_errors, c.tx_dropped, c.rx_dropped});
    }
    links.push_back({{"info", to_json(l.info)}, {"samples", std::move(samples)}, {"vanished", l.vanished}});
    if (!l.stats.empty()) links.back()["stats"] = counter_samples_json(l.stats);
  }
  json bonds = json::array();
  for (const auto& b : r.bonds)
    bonds.push_back({{"at_open", to_json(b.at_open)}, {"at_close", to_json(b.at_close)}, {"neighbors", b.neighbors}});
  json rdma = json::array();
  for (const auto& p : r.rdma_ports) {
    json samples = json::array();
    for (const auto& s : p.samples) {
      json values = json::object();
      for (const auto& [k, v] : s.counters.values) values[k] = v;
      samples.push_back({{"t_ns", s.t_ns},
                         {"present", s.counters.present},
                         {"values", std::move(values)},
                         {"unreadable", s.counters.unreadable}});
    }
    rdma.push_back({{"device", p.device}, {"info", to_json(p.info)}, {"samples", std::move(samples)}});
  }
  json iv = json::array();
  for (const auto& s : r.intervals) iv.push_back({s.t_ns, s.tx_bytes, s.rx_bytes});
  return {{"node_index", r.node_index},
          {"hostname", r.hostname},
          {"aborted", r.aborted},
          {"abort_reason", r.abort_reason},
          {"window_s", r.window_s},
          {"window_open_unix_ns", r.window_open_unix_ns},
          {"cpu_busy_pct", r.cpu_busy_pct},
          {"retrans_segs", r.retrans_segs},
          {"process_cpu_s", r.process_cpu_s},
          {"start_late_ns", r.start_late_ns},
          {"close_late_ns", r.close_late_ns},
          {"flows", std::move(flows)},
          {"latency", r.latency ? to_json(*r.latency) : json(nullptr)},
          {"delay", r.delay ? to_json(*r.delay) : json(nullptr)},
          {"intervals", std::move(iv)},
          {"links", std::move(links)},
          {"bonds", std::move(bonds)},
          {"rdma_ports", std::move(rdma)},
          {"threads", threads_json(r.threads)},
          {"socket_limits", to_json(r.socket_limits)},
          {"trials", r.trials},
          {"warnings", r.warnings},
          {"host_counters", counter_samples_json(r.host_counters)}};
}

namespace {

constexpr std::uint64_t kMaxBytes = 1ULL << 62;

FlowResult parse_flow(const json& e) {
  Fields g(e, "RESULT.flows[]");
  FlowResult x;
  x.id = static_cast<std::uint32_t>(g.u64("id", 0, kMaxList * 16));
  auto named = [&](const char* field, std::span<const std::string_view> names) {
    const auto s = g.str(field, 16);
    const auto it = std::ranges::find(names, s);
    if (it == names.end()) throw ProtocolError(fmt::format("{}: unknown {} '{}'", g.ctx(field), field, s));
    return it - names.begin();
  };
  x.role = static_cast<FlowRole>(named("role", kFlowRoles));
  x.op = static_cast<FlowOp>(named("op", kFlowOps));
  x.peer_node = static_cast<std::uint32_t>(g.u64("peer_node", 0, kMaxList));
  x.local = g.str("local", 128);
  x.remote = g.str("remote", 128);
  x.tx_bytes_total = g.u64("tx_bytes_total", 0, kMaxBytes);
  x.rx_bytes_total = g.u64("rx_bytes_total", 0, kMaxBytes);
  x.tx_bytes_window = g.u64("tx_bytes_window", 0, x.tx_bytes_total);
  x.rx_bytes_window = g.u64("rx_bytes_window", 0, x.rx_bytes_total);
  // Optional: agents before it count what they wrote, the only figure they have.
  x.tx_delivered_window = g.has("tx_delivered_window") ? g.u64("tx_delivered_window", 0, kMaxBytes) : x.tx_bytes_window;
  if (g.has("rx_queued_delta")) x.rx_queued_delta = g.i64("rx_queued_delta", -(1LL << 40), 1LL << 40);
  x.msgs_window = g.u64("msgs_window", 0, kMaxBytes);
  x.retrans_window = g.u64("retrans_window", 0, kMaxBytes);
  const auto& tcp = e.find("tcp");
  if (tcp == e.end()) throw ProtocolError(fmt::format("{}: missing field", g.ctx("tcp")));
  if (!tcp->is_null()) {
    Fields t(*tcp, "RESULT.flows[].tcp");
    x.tcp.valid = true;
    x.tcp.total_retrans = t.u64("total_retrans", 0, kMaxBytes);
    for (const auto& [name, field] : kTcpFields) x.tcp.*field = static_cast<std::uint32_t>(t.u64(name, 0, UINT32_MAX));
  }
  x.error = g.str("error");
  x.iface = g.str("iface", 64);
  if (g.has("verify_errors")) x.verify_errors = g.u64("verify_errors", 0, kMaxBytes);
  if (g.has("rdma_port")) x.rdma_port = g.str("rdma_port", 80);
  return x;
}

// histogram_from_json names only "histogram": say which message and field carried it.
std::optional<LatencyHistogram> parse_histogram(const json& j, const std::string& key, bool required) {
  const auto it = j.find(key);
  if (it == j.end() && required) throw ProtocolError(fmt::format("RESULT.{}: missing field", key));
  if (it == j.end() || it->is_null()) return std::nullopt;
  try {
    return histogram_from_json(*it);
  } catch (const ProtocolError& e) {
    throw ProtocolError(fmt::format("RESULT.{}: {}", key, e.what()));
  }
}

LinkResult parse_link(const json& e, std::size_t& cells) {
  Fields g(e, "RESULT.links[]");
  LinkResult l;
  l.info = link_from_json(g.object("info"));
  l.vanished = g.boolean("vanished");
  for (const auto& s : g.array("samples", 1000000)) {
    if (!s.is_array() || s.size() != 10 || !s[0].is_number_integer() || !s[1].is_boolean()) {
      throw ProtocolError("RESULT.links[].samples[]: expected [t_ns, present, 8 counters]");
    }
    LinkSample x;
    x.t_ns = s[0].get<std::int64_t>();
    x.counters.present = s[1].get<bool>();
    std::uint64_t* dst[] = {&x.counters.tx_bytes,   &x.counters.rx_bytes,  &x.counters.tx_packets,
                            &x.counters.rx_packets, &x.counters.tx_errors, &x.counters.rx_errors,
                            &x.counters.tx_dropped, &x.counters.rx_dropped};
    for (std::size_t i = 0; i < 8; ++i) {
      if (!s[i + 2].is_number_unsigned())
        throw ProtocolError("RESULT.links[].samples[]: counters must be unsigned integers");
      *dst[i] = s[i + 2].get<std::uint64_t>();
    }
    l.samples.push_back(x);
  }
  // Optional: agents older than named counters send none.
  if (e.contains("stats")) l.stats = parse_counter_samples(e["stats"], "RESULT.links[].stats", cells);
  return l;
}

RdmaPortResult parse_rdma_port(const json& e) {
  Fields g(e, "RESULT.rdma_ports[]");
  RdmaPortResult p;
  p.device = g.str("device", 64);
  p.info = rdma_port_from_json(g.object("info"));
  for (const auto& se : g.array("samples", 1000000)) {
    Fields h(se, "RESULT.rdma_ports[].samples[]");
    RdmaPortSample x;
    x.t_ns = h.i64("t_ns", INT64_MIN / 2, INT64_MAX / 2);
    x.counters.present = h.boolean("present");
    const auto& values = h.object("values");
    if (values.size() > 4096) throw ProtocolError("RESULT.rdma_ports[].samples[].values: too many counters");
    for (const auto& [k, v] : values.items()) {
      if (k.size() > 96 || !v.is_number_unsigned()) {
        throw ProtocolError("RESULT.rdma_ports[].samples[].values: expected counter name -> unsigned integer");
      }
      x.counters.values.emplace_back(printable(k), v.get<std::uint64_t>());
    }
    x.counters.unreadable = h.strings("unreadable", 4096, 96);
    p.samples.push_back(std::move(x));
  }
  return p;
}

TrialResult parse_trial(const json& e) {
  Fields g(e, "RESULT.trials[]");
  TrialResult t;
  t.what = g.str("what", 64);
  t.chosen = g.str("chosen", 64);
  t.reason = g.str("reason", 256);
  for (const auto& a : g.array("arms", 8)) {
    Fields h(a, "RESULT.trials[].arms[]");
    TrialArm arm;
    arm.name = h.str("name", 64);
    arm.bytes = h.u64("bytes", 0, 1ULL << 60);
    arm.seconds = h.num("seconds", 0, 1e6);
    arm.cpu_s = h.num("cpu_s", 0, 1e6);
    t.arms.push_back(std::move(arm));
  }
  return t;
}

}  // namespace

AgentResult parse_agent_result(const json& j) {
  Fields f(j, "RESULT");
  AgentResult r;
  std::size_t cells = 0;  // named counter values once expanded (kMaxCounterCells)
  r.node_index = static_cast<std::uint32_t>(f.u64("node_index", 0, kMaxList));
  r.hostname = f.str("hostname", 256);
  r.aborted = f.boolean("aborted");
  r.abort_reason = f.str("abort_reason");
  r.window_s = f.num("window_s", 0, 1e7);
  // Optional: agents older than the field send none.
  if (j.contains("window_open_unix_ns")) r.window_open_unix_ns = f.i64("window_open_unix_ns", 0, INT64_MAX);
  r.cpu_busy_pct = f.num("cpu_busy_pct", 0, 100);
  r.retrans_segs = f.i64("retrans_segs", -1, INT64_MAX / 2);
  r.process_cpu_s = f.num("process_cpu_s", 0, 1e9);
  if (j.contains("start_late_ns")) r.start_late_ns = f.i64("start_late_ns", 0, INT64_MAX);
  if (j.contains("close_late_ns")) r.close_late_ns = f.i64("close_late_ns", 0, INT64_MAX);
  for (const auto& e : f.array("flows")) r.flows.push_back(parse_flow(e));
  r.latency = parse_histogram(j, "latency", true);
  r.delay = parse_histogram(j, "delay", false);
  for (const auto& e : f.array("intervals", 1000000)) {
    if (!e.is_array() || e.size() != 3 || !e[0].is_number_integer() || !e[1].is_number_unsigned() ||
        !e[2].is_number_unsigned()) {
      throw ProtocolError("RESULT.intervals[]: expected [t_ns, tx_bytes, rx_bytes]");
    }
    r.intervals.push_back({e[0].get<std::int64_t>(), e[1].get<std::uint64_t>(), e[2].get<std::uint64_t>()});
  }
  for (const auto& e : f.array("links", 4096)) r.links.push_back(parse_link(e, cells));
  // Optional: agents without bond support send none.
  if (j.contains("bonds")) {
    for (const auto& e : f.array("bonds", 64)) {
      Fields g(e, "RESULT.bonds[]");
      BondResult b;
      b.at_open = bond_from_json(g.object("at_open"));
      b.at_close = bond_from_json(g.object("at_close"));
      for (const auto& n : g.array("neighbors", 4096)) {
        if (!n.is_array() || n.size() != 2 || !n[0].is_string() || !n[1].is_string() ||
            n[0].get_ref<const std::string&>().size() > 64 || n[1].get_ref<const std::string&>().size() > 32) {
          throw ProtocolError("RESULT.bonds[].neighbors[]: expected [address, mac]");
        }
        b.neighbors.emplace_back(printable(n[0].get_ref<const std::string&>()),
                                 printable(n[1].get_ref<const std::string&>()));
      }
      r.bonds.push_back(std::move(b));
    }
  }
  // Optional: agents without RDMA port sampling send none.
  if (j.contains("rdma_ports")) {
    for (const auto& e : f.array("rdma_ports", 256)) r.rdma_ports.push_back(parse_rdma_port(e));
  }
  if (j.contains("host_counters")) {
    r.host_counters = parse_counter_samples(j["host_counters"], "RESULT.host_counters", cells);
  }
  if (j.contains("threads")) {
    for (const auto& e : f.array("threads", 100000)) {
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || e[0].get_ref<const std::string&>().size() > 32 ||
          !e[1].is_number() || e[1].get<double>() < 0 || e[1].get<double>() > 1e9) {
        throw ProtocolError("RESULT.threads[]: expected [label, cpu seconds]");
      }
      r.threads.push_back({printable(e[0].get_ref<const std::string&>()), e[1].get<double>()});
    }
  }
  r.socket_limits = proto::parse_socket_limits(f, 1ULL << 48);
  if (j.contains("trials")) {
    for (const auto& e : f.array("trials", 8)) r.trials.push_back(parse_trial(e));
  }
  r.warnings = f.strings("warnings", 1000);
  return r;
}

}  // namespace fabperf
