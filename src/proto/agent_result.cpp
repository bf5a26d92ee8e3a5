#include <fabperf/core/error.hpp>
#include <fabperf/core/printable.hpp>
#include <fabperf/proto/agent_result.hpp>
#include <fabperf/proto/proto.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace fabperf {

using nlohmann::json;

namespace {
constexpr std::string_view kFlowRoles[] = {"client", "server"};  // in value order
constexpr std::string_view kFlowOps[] = {"write", "read", "rpc", "probe"};
constexpr std::uint64_t kMaxBytes = 1ULL << 62;
// Named counter values expanded so far in the RESULT this thread decodes (kMaxCounterCells).
thread_local std::size_t t_counter_cells = 0;

// An enum by its name: "<context>: unknown <field> '<name>'" for any other.
template <class E, const auto& kNames>
E named(std::string_view s, const std::string& context) {
  const auto it = std::ranges::find(kNames, s);
  if (it == std::end(kNames))
    throw ProtocolError(fmt::format("{}: unknown {} '{}'", context, context.substr(context.rfind('.') + 1), s));
  return static_cast<E>(it - std::begin(kNames));
}

// TCP_INFO's 32-bit fields, on the wire under their own names.
constexpr std::pair<const char*, std::uint32_t TcpSample::*> kTcpFields[] = {
    {"rtt_us", &TcpSample::rtt_us},   {"rttvar_us", &TcpSample::rttvar_us}, {"snd_mss", &TcpSample::snd_mss},
    {"rcv_mss", &TcpSample::rcv_mss}, {"pmtu", &TcpSample::pmtu},           {"snd_cwnd", &TcpSample::snd_cwnd}};
}  // namespace

std::string_view to_string(FlowRole r) {
  return kFlowRoles[static_cast<int>(r)];
}
std::string_view to_string(FlowOp o) {
  return kFlowOps[static_cast<int>(o)];
}

// ---- The codecs of the RESULT's parts that are not objects of named fields ----------------
// Static in this namespace, not in an anonymous one: JsonOut finds them by argument-dependent lookup.

// Named counter samples, delta-encoded: the first sample carries every counter, each later one
// only the counters whose value changed (a NIC lists hundreds, most of them idle). Decoding
// carries values forward, so every sample is whole again.
static json to_json(const std::vector<CounterSample>& samples) {
  json out = json::array();
  const CounterValues* prev = nullptr;
  for (const auto& s : samples) {
    json values = json::object();
    for (std::size_t i = 0; i < s.values.size(); ++i) {
      const auto& [k, v] = s.values[i];
      const auto* before = prev ? find_counter(*prev, i, k) : nullptr;
      if (before == nullptr || before->second != v) values[k] = v;
    }
    out.push_back({{"t_ns", s.t_ns}, {"values", std::move(values)}});
    prev = &s.values;
  }
  return out;
}

// A named counters object: at most kCap names of 1..96 bytes (shown printable, never obeyed: the
// report prints them), each an unsigned integer.
template <std::size_t kCap>
static CounterValues counter_values(const Fields& f, const char* name) {
  const auto& values = f.object(name);
  if (values.size() > kCap) throw ProtocolError(f.ctx(name) + ": too many counters");
  CounterValues out;
  for (const auto& [k, v] : values.items()) {
    if (k.empty() || k.size() > 96 || !v.is_number_unsigned())
      throw ProtocolError(f.ctx(name) + ": expected counter name -> unsigned integer");
    out.emplace_back(printable(k), v.template get<std::uint64_t>());
  }
  return out;
}

// t_counter_cells, the values expanded so far in this RESULT, is checked against kMaxCounterCells
// before each sample is made whole (the expansion is what costs memory, not the frame).
static std::vector<CounterSample> counter_samples(const Fields& f, const char* name) {
  const auto& arr = f.get(name);
  const std::string ctx = f.ctx(name);
  if (!arr.is_array() || arr.size() > 1000000) throw ProtocolError(ctx + ": expected an array of samples");
  std::vector<CounterSample> out;
  std::map<std::string, std::size_t> index;
  CounterValues current;
  for (const auto& e : arr) {
    Fields h(e, ctx + "[]");
    CounterSample x;
    x.t_ns = h.i64("t_ns", INT64_MIN / 2, INT64_MAX / 2);
    for (auto& [k, v] : counter_values<65536>(h, "values")) {
      const auto [it, added] = index.try_emplace(k, current.size());
      if (!added) {
        current[it->second].second = v;
      } else if (index.size() > 65536) {
        throw ProtocolError(ctx + "[].values: too many counters");
      } else {
        current.emplace_back(std::move(k), v);
      }
    }
    t_counter_cells += current.size();
    if (t_counter_cells > kMaxCounterCells) {
      throw ProtocolError(
          fmt::format("{}: named counters expand to more than {} values (counters x samples)", ctx, kMaxCounterCells));
    }
    x.values = current;
    out.push_back(std::move(x));
  }
  return out;
}

// null for transports without TCP_INFO.
static void fields(auto& v, TcpSample& t) {
  v("total_retrans", t.total_retrans, 0, kMaxBytes);
  for (const auto& [name, field] : kTcpFields) v(name, t.*field, 0, UINT32_MAX);
}
static json to_json(const TcpSample& t) {
  return t.valid ? JsonOut::encode(t) : json(nullptr);
}
static TcpSample tcp_sample(const Fields& f, const char* name) {
  if (f.get(name).is_null()) return {};
  auto t = JsonIn::decode<TcpSample>(f.get(name), f.ctx(name));
  t.valid = true;
  return t;
}

static json to_json(const IntervalSample& s) {
  return {s.t_ns, s.tx_bytes, s.rx_bytes};
}
static IntervalSample interval_sample(const json& e) {
  if (!e.is_array() || e.size() != 3 || !e[0].is_number_integer() || !e[1].is_number_unsigned() ||
      !e[2].is_number_unsigned()) {
    throw ProtocolError("RESULT.intervals[]: expected [t_ns, tx_bytes, rx_bytes]");
  }
  return {e[0].get<std::int64_t>(), e[1].get<std::uint64_t>(), e[2].get<std::uint64_t>()};
}

// [t_ns, present, the 8 counters in kLinkCounterFiles' order].
static json to_json(const LinkSample& s) {
  json a = {s.t_ns, s.counters.present};
  for (const auto& f : kLinkCounterFiles) a.push_back(s.counters.*f.second);
  return a;
}
static LinkSample link_sample(const json& s) {
  if (!s.is_array() || s.size() != 10 || !s[0].is_number_integer() || !s[1].is_boolean()) {
    throw ProtocolError("RESULT.links[].samples[]: expected [t_ns, present, 8 counters]");
  }
  LinkSample x;
  x.t_ns = s[0].get<std::int64_t>();
  x.counters.present = s[1].get<bool>();
  for (std::size_t i = 0; i < 8; ++i) {
    if (!s[i + 2].is_number_unsigned())
      throw ProtocolError("RESULT.links[].samples[]: counters must be unsigned integers");
    x.counters.*kLinkCounterFiles[i].second = s[i + 2].get<std::uint64_t>();
  }
  return x;
}

static std::pair<std::string, std::string> neighbor(const json& n) {
  if (!n.is_array() || n.size() != 2 || !n[0].is_string() || !n[1].is_string() ||
      n[0].get_ref<const std::string&>().size() > 64 || n[1].get_ref<const std::string&>().size() > 32) {
    throw ProtocolError("RESULT.bonds[].neighbors[]: expected [address, mac]");
  }
  return {printable(n[0].get_ref<const std::string&>()), printable(n[1].get_ref<const std::string&>())};
}

static json to_json(const ThreadCpu& x) {
  return {x.label, x.cpu_s};
}
static ThreadCpu thread_cpu(const json& e) {
  if (!e.is_array() || e.size() != 2 || !e[0].is_string() || e[0].get_ref<const std::string&>().size() > 32 ||
      !e[1].is_number() || e[1].get<double>() < 0 || e[1].get<double>() > 1e9) {
    throw ProtocolError("RESULT.threads[]: expected [label, cpu seconds]");
  }
  return {printable(e[0].get_ref<const std::string&>()), e[1].get<double>()};
}

// ---- The RESULT's objects, each field once for both directions (fields.hpp) ----------------

static void fields(auto& v, FlowResult& x) {
  v("id", x.id, 0, kMaxList * 16);
  v("role", x.role, &named<FlowRole, kFlowRoles>, 16);
  v("op", x.op, &named<FlowOp, kFlowOps>, 16);
  v("peer_node", x.peer_node, 0, kMaxList);
  v("local", x.local, 128);
  v("remote", x.remote, 128);
  v("tx_bytes_total", x.tx_bytes_total, 0, kMaxBytes);
  v("rx_bytes_total", x.rx_bytes_total, 0, kMaxBytes);
  v("tx_bytes_window", x.tx_bytes_window, 0, x.tx_bytes_total);
  v("rx_bytes_window", x.rx_bytes_window, 0, x.rx_bytes_total);
  // Optional: agents before it count what they wrote, the only figure they have.
  if (v.kIn) x.tx_delivered_window = x.tx_bytes_window;
  v.opt("tx_delivered_window", x.tx_delivered_window, 0, kMaxBytes);
  v.opt("rx_queued_delta", x.rx_queued_delta, -(1LL << 40), 1LL << 40);
  v("msgs_window", x.msgs_window, 0, kMaxBytes);
  v("retrans_window", x.retrans_window, 0, kMaxBytes);
  v("tcp", x.tcp, &tcp_sample);
  v("error", x.error);
  v("iface", x.iface, 64);
  v.opt("verify_errors", x.verify_errors, 0, kMaxBytes);
  v.sparse("rdma_port", x.rdma_port, 80);
}

static void fields(auto& v, LinkResult& l) {
  v("info", l.info, &link_from_json);
  v("vanished", l.vanished);
  v("samples", l.samples, 1000000, &link_sample);
  v.sparse("stats", l.stats, &counter_samples);  // agents older than named counters send none
}

static void fields(auto& v, BondResult& b) {
  v("at_open", b.at_open, &bond_from_json);
  v("at_close", b.at_close, &bond_from_json);
  v("neighbors", b.neighbors, 4096, &neighbor);
}

static void fields(auto& v, RdmaPortSample& x) {
  v("t_ns", x.t_ns, INT64_MIN / 2, INT64_MAX / 2);
  v("present", x.counters.present);
  v("values", x.counters.values, &counter_values<4096>);
  v("unreadable", x.counters.unreadable, 4096, 96);
}

static void fields(auto& v, RdmaPortResult& p) {
  v("device", p.device, 64);
  v("info", p.info, &rdma_port_from_json);
  v("samples", p.samples, 1000000);
}

static void fields(auto& v, TrialArm& a) {
  v("name", a.name, 64);
  v("bytes", a.bytes, 0, 1ULL << 60);
  v("seconds", a.seconds, 0, 1e6);
  v("cpu_s", a.cpu_s, 0, 1e6);
}

static void fields(auto& v, TrialResult& t) {
  v("what", t.what, 64);
  v("chosen", t.chosen, 64);
  v("reason", t.reason, 256);
  v("arms", t.arms, 8);
}

// v.opt: agents older than the field send none.
static void fields(auto& v, AgentResult& r) {
  v("node_index", r.node_index, 0, kMaxList);
  v("hostname", r.hostname, 256);
  v("aborted", r.aborted);
  v("abort_reason", r.abort_reason);
  v("window_s", r.window_s, 0, 1e7);
  v.opt("window_open_unix_ns", r.window_open_unix_ns, 0, INT64_MAX);
  v("cpu_busy_pct", r.cpu_busy_pct, 0, 100);
  v("retrans_segs", r.retrans_segs, -1, INT64_MAX / 2);
  v("process_cpu_s", r.process_cpu_s, 0, 1e9);
  v.opt("start_late_ns", r.start_late_ns, 0, INT64_MAX);
  v.opt("close_late_ns", r.close_late_ns, 0, INT64_MAX);
  v("flows", r.flows, kMaxList);
  v("latency", r.latency, &histogram_from_json);
  v.opt("delay", r.delay, &histogram_from_json);
  v("intervals", r.intervals, 1000000, &interval_sample);
  v("links", r.links, 4096);
  v.opt("bonds", r.bonds, 64);
  v.opt("rdma_ports", r.rdma_ports, 256);
  v.opt("host_counters", r.host_counters, &counter_samples);
  v.opt("threads", r.threads, 100000, &thread_cpu);
  v("socket_limits", r.socket_limits, &proto::parse_socket_limits<(1ULL << 48)>);
  v.opt("trials", r.trials, 8);
  v("warnings", r.warnings, 1000);
}

json to_json(const AgentResult& r) {
  return JsonOut::encode(r);
}

AgentResult parse_agent_result(const json& j) {
  t_counter_cells = 0;
  return JsonIn::decode<AgentResult>(j, "RESULT");
}

}  // namespace fabperf
