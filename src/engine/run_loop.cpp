#include <fabperf/core/build_config.hpp>
#include <fabperf/core/bytes.hpp>
#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/engine/engine.hpp>
#include <fabperf/proto/auth.hpp>
#include <fabperf/sysinfo/bonding.hpp>
#include <fabperf/sysinfo/counters.hpp>
#include <fabperf/sysinfo/links.hpp>
#include <fabperf/sysinfo/rdma_sysfs.hpp>
#include <fabperf/sysinfo/sysstat.hpp>

#include "engine/tcp_engine.hpp"
#if FABPERF_HAVE_RDMA
#include "engine/verbs_engine.hpp"
#endif

#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <system_error>
#include <thread>

namespace fabperf {

Flow::Flow(FlowRole r, FlowOp o, std::uint32_t peer, std::string l, std::string rem)
    : role(r), op(o), peer_node(peer), local(std::move(l)), remote(std::move(rem)) {}

void Flow::fail(std::string message) {
  std::lock_guard lk(error_mu_);
  if (error_.empty()) error_ = std::move(message);
}

std::string Flow::error() const {
  std::lock_guard lk(error_mu_);
  return error_;
}

RunContext::RunContext(TestSpec spec, std::uint32_t node_index, std::string hostname)
    : spec_(std::move(spec)), node_index_(node_index), hostname_(std::move(hostname)) {}

Flow& RunContext::add_flow(std::unique_ptr<Flow> flow) {
  std::lock_guard lk(mu_);
  flow->id = static_cast<std::uint32_t>(flows_.size());
  flows_.push_back(std::move(flow));
  return *flows_.back();
}

LatencyHistogram& RunContext::add_histogram() {
  std::lock_guard lk(mu_);
  histograms_.push_back(std::make_unique<LatencyHistogram>());
  return *histograms_.back();
}

void RunContext::warn(std::string message) {
  std::lock_guard lk(mu_);
  if (std::ranges::find(warnings_, message) == warnings_.end()) warnings_.push_back(std::move(message));
}

std::size_t RunContext::flow_count() const {
  std::lock_guard lk(mu_);
  return flows_.size();
}

std::uint64_t RunContext::received_bytes() const {
  std::lock_guard lk(mu_);
  std::uint64_t n = 0;
  for (const auto& f : flows_) n += f->counters.rx_bytes.load(std::memory_order_relaxed);
  return n;
}

// A condition variable, not std::atomic::wait: libstdc++'s wait spins with sched_yield first, and
// on a loaded host every yield hands the core to another process (docs/performance.md, bench-scale).
void RunContext::wait_for_start() const noexcept {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return started_; });
}

void RunContext::release_start() noexcept {
  std::lock_guard lk(mu_);
  started_ = true;
  cv_.notify_all();
}

void RunContext::note_drain_progress() const noexcept {
  drain_progress_ns_.store(mono_now_ns(), std::memory_order_relaxed);
}

void RunContext::request_stop() noexcept {
  stop_.store(true, std::memory_order_relaxed);
  std::lock_guard lk(mu_);
  cv_.notify_all();
}

void RunContext::abort(std::string reason) noexcept {
  std::lock_guard lk(mu_);
  if (!aborted_.load()) abort_reason_ = std::move(reason);
  aborted_.store(true);
  stop_.store(true);
  started_ = true;  // as release_start(): no data thread waits for a start that will not come
  cv_.notify_all();
}

bool RunContext::sleep_until(std::int64_t t) const {
  const std::chrono::steady_clock::time_point tp{std::chrono::nanoseconds(t)};
  std::unique_lock lk(mu_);
  cv_.wait_until(lk, tp, [&] { return aborted_.load(); });
  return !aborted_.load();
}

void RunContext::enter_data_thread(const char* role, std::uint32_t index, FlowRole end, bool pin) noexcept {
  char name[16];
  std::snprintf(name, sizeof name, "fp-%s-%u", role, index);
  pthread_setname_np(pthread_self(), name);
  if (pin && !cpus_.empty()) {
    const auto side = static_cast<std::size_t>(end == FlowRole::server);
    const std::size_t first = side * (cpus_.size() / 2);
    const int cpu = cpus_[(first + next_cpu_[side].fetch_add(1)) % cpus_.size()];
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  try {
    std::lock_guard lk(mu_);
    threads_.push_back({static_cast<int>(::gettid()), std::string(name + 3)});
  } catch (...) {
    // Accounting is best effort; the data path must not fail because of it.
  }
}

proto::Token derive_client_token(const proto::Token& test_token, std::uint32_t client_node) {
  const auto node = pack_be<4>(client_node);
  const auth::Proof mac = auth::hmac_sha256(test_token, {node});
  proto::Token out{};
  std::copy_n(mac.begin(), out.size(), out.begin());
  return out;
}

const std::string& cached_interface(std::map<std::string, std::string>& cache, const std::string& endpoint) {
  const std::string addr = endpoint.substr(0, endpoint.rfind(':'));
  auto [it, fresh] = cache.try_emplace(addr);
  if (fresh) it->second = interface_of_address(addr);
  return it->second;
}

namespace {
// One flow's counters at an instant: what the peer acknowledged and what arrived but is not
// counted in rx yet (Flow::edge); tcp only in a full snapshot.
struct FlowSnap {
  std::uint64_t tx{0}, rx{0}, msgs{0};
  Flow::Edge edge;
  TcpSample tcp;
};
struct Snapshot {
  std::int64_t t{0};
  std::vector<FlowSnap> flows;
  CpuTimes cpu;
  std::int64_t proc_cpu_ns{0};
};

// The flows' counts are stamped with the middle of their reads. A reader preempted among them (a
// loaded host) would credit an edge with bytes that moved after it, so reads that took longer
// than kEdgeReadNs are taken again, twice at most, and the shortest kept.
constexpr std::int64_t kEdgeReadNs = 5'000'000;
Snapshot take_snapshot(const std::vector<Flow*>& flows, bool full) {
  Snapshot s;
  for (std::int64_t span = INT64_MAX, tries = 0; span > kEdgeReadNs && tries < 3; ++tries) {
    std::vector<FlowSnap> read;
    read.reserve(flows.size());
    const std::int64_t t0 = mono_now_ns();
    for (const auto* f : flows) {
      const FlowCounters& c = f->counters;
      const std::uint64_t rx = c.rx_bytes.load(std::memory_order_relaxed);
      read.push_back({c.tx_bytes.load(std::memory_order_relaxed), rx, c.msgs.load(std::memory_order_relaxed),
                      f->edge(rx), TcpSample()});
    }
    if (const std::int64_t took = mono_now_ns() - t0; took < span) {
      span = took;
      s.t = t0 + took / 2;
      s.flows = std::move(read);
    }
  }
  if (!full) return s;
  for (std::size_t i = 0; i < flows.size(); ++i) s.flows[i].tcp = flows[i]->sample_transport();
  s.cpu = read_cpu_times();
  s.proc_cpu_ns = process_cpu_ns();
  return s;
}

// The interface each flow leaves on: the device it is bound to, else the one that owns its local
// address ("" unknown).
std::vector<std::string> flow_interfaces(const std::vector<Flow*>& flows) {
  std::vector<std::string> out(flows.size());
  std::map<std::string, std::string> by_addr;
  std::ranges::transform(flows, out.begin(), [&](const Flow* f) {
    return f->device.empty() ? cached_interface(by_addr, f->local) : f->device;
  });
  return out;
}

// MACs of the peers the bond's flows talk to, from the ARP table (layer2 hash prediction).
std::vector<std::pair<std::string, std::string>> bond_neighbors(const std::vector<Flow*>& flows,
                                                                const std::vector<std::string>& flow_iface,
                                                                const std::string& bond) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto arp = read_arp_table(bond);
  for (std::size_t i = 0; i < flows.size() && i < flow_iface.size(); ++i) {
    if (flow_iface[i] != bond) continue;
    std::string ip = flows[i]->remote.substr(0, flows[i]->remote.rfind(':'));
    if (!ip.empty() && ip.front() == '[') ip = ip.substr(1, ip.size() - 2);
    const auto it = arp.find(ip);
    if (it == arp.end()) continue;
    if (std::ranges::none_of(out, [&](const auto& p) { return p.first == ip; })) out.emplace_back(ip, it->second);
  }
  return out;
}

// The CPUs of the NUMA node the test's interfaces sit on, when sysfs says (empty: no preference).
std::vector<int> numa_cpus(const std::vector<LinkResult>& links) {
  for (const auto& l : links) {
    if (auto cpus = read_numa_cpus(l.info.numa_node); !cpus.empty()) return cpus;
  }
  return {};
}

// A reading and when it was taken, from the window's open at open_t: the middle of the read. On a
// busy host the reads of one sample spread over many milliseconds, and a rate over a window
// whose edges were read late by different amounts would be off by that difference.
template <class Read>
auto stamped(std::int64_t open_t, Read&& read) {
  const std::int64_t before = mono_now_ns();
  auto v = read();
  return std::pair{before + (mono_now_ns() - before) / 2 - open_t, std::move(v)};
}

// Every counter source a window edge or an interval reads: links, RDMA ports, the host's MIB and
// softnet counters (retransmits, RTOs, ECN marks, drops).
void sample_counters(AgentResult& r, std::int64_t open_t) {
  for (auto& l : r.links) {
    if (l.vanished) continue;
    auto [t, c] = stamped(open_t, [&] { return read_link_counters(l.info.name); });
    if (!c.present) l.vanished = true;
    l.samples.push_back({t, c});
    // The driver's statistics and the qdisc's, stamped on their own (an ioctl and a netlink
    // dump take longer than the sysfs reads above).
    if (!l.vanished) {
      auto [tv, v] = stamped(open_t, [&] { return read_link_named_counters(l.info.name); });
      l.stats.push_back({tv, std::move(v)});
    }
  }
  for (auto& p : r.rdma_ports) {
    auto [t, c] = stamped(open_t, [&] { return read_rdma_port_counters(p.device, p.info.port); });
    p.samples.push_back({t, std::move(c)});
  }
  auto [t, v] = stamped(open_t, [] { return read_host_net_counters(); });
  r.host_counters.push_back({t, std::move(v)});
}

// The RDMA device ports of the flows ("rxe0:1"), each once, with their inventory.
std::vector<RdmaPortResult> flow_rdma_ports(const std::vector<Flow*>& flows) {
  std::vector<RdmaPortResult> out;
  for (const auto* f : flows) {
    const auto colon = f->rdma_port.rfind(':');
    if (colon == std::string::npos) continue;
    const std::string dev = f->rdma_port.substr(0, colon);
    const int port = std::atoi(f->rdma_port.c_str() + colon + 1);
    if (std::ranges::any_of(out, [&](const RdmaPortResult& r) { return r.device == dev && r.info.port == port; }))
      continue;
    RdmaPortResult& r = out.emplace_back();
    r.device = dev;
    r.info.port = port;
    if (const auto d = read_rdma_device(dev)) {
      if (const auto it = std::ranges::find(d->ports, port, &RdmaPort::port); it != d->ports.end()) r.info = *it;
    }
  }
  return out;
}

// A flow's payload delivered to its peer between two snapshots: the acknowledged bytes, or the
// sender's own count where the transport could not say at either end.
std::uint64_t delivered_between(const FlowSnap& a, const FlowSnap& b) {
  const auto& da = a.edge.delivered;
  const auto& db = b.edge.delivered;
  if (da && db) return *db > *da ? *db - *da : 0;
  return b.tx - a.tx;
}

// The node's totals from snapshot a to b, stamped from the window's open.
IntervalSample interval_between(std::int64_t open_t, const Snapshot& a, const Snapshot& b) {
  IntervalSample out{b.t - open_t, 0, 0};
  for (std::size_t i = 0; i < b.flows.size(); ++i) {
    out.tx_bytes += delivered_between(a.flows[i], b.flows[i]);
    out.rx_bytes += b.flows[i].rx - a.flows[i].rx;
  }
  return out;
}

// Data threads stop by themselves shortly after end_at; a peer that stalls is abandoned at the
// hard deadline by shutting every socket down.
void join_data_threads(RunContext& ctx, Engine& engine) {
  std::mutex mu;
  std::condition_variable cv;
  bool joined = false;
  std::thread watchdog;
  try {
    // Woken by the join; else looks at the hard deadline (which drain progress moves on) and
    // the abort flag every 200 ms (a thousand agents on one host polling every 20 ms was a core's work).
    watchdog = std::thread([&] {
      std::unique_lock lk(mu);
      while (!joined && mono_now_ns() < ctx.hard_deadline() && !ctx.aborted()) {
        cv.wait_for(lk, std::chrono::milliseconds(200));
      }
      if (!joined) engine.abort();
    });
  } catch (const std::system_error& e) {
    // No thread to spare for the watchdog (an exception escaping here would terminate the
    // agent): stop the data threads now instead of waiting for them up to the hard deadline.
    ctx.warn(fmt::format("no watchdog thread ({}): data connections shut down at the test's end", e.what()));
    engine.abort();
  }
  engine.join();
  {
    std::lock_guard lk(mu);
    joined = true;
  }
  cv.notify_one();
  if (watchdog.joinable()) watchdog.join();
}

// Flow i's figures over the window, from the two edges' snapshots.
FlowResult flow_result(const Flow& f, const FlowSnap& open, const FlowSnap& close, const std::string& iface) {
  const std::uint64_t retrans0 = open.tcp.total_retrans, retrans1 = close.tcp.total_retrans;
  return {.id = f.id,
          .role = f.role,
          .op = f.op,
          .peer_node = f.peer_node,
          .local = f.local,
          .remote = f.remote,
          .tx_bytes_total = f.counters.tx_bytes.load(),
          .rx_bytes_total = f.counters.rx_bytes.load(),
          .tx_bytes_window = close.tx - open.tx,
          .rx_bytes_window = close.rx - open.rx,
          .tx_delivered_window = delivered_between(open, close),
          .rx_queued_delta = open.edge.queued && close.edge.queued ? static_cast<std::int64_t>(*close.edge.queued) -
                                                                         static_cast<std::int64_t>(*open.edge.queued)
                                                                   : 0,
          .msgs_window = close.msgs - open.msgs,
          .retrans_window = retrans1 >= retrans0 ? retrans1 - retrans0 : 0,
          .tcp = close.tcp.valid ? close.tcp : f.sample_transport(),
          .error = f.error(),
          .iface = iface,
          .verify_errors = f.counters.verify_errors.load(),
          .rdma_port = f.rdma_port};
}
}  // namespace

// ---- TestRun ---------------------------------------------------------------------------

TestRun::TestRun(std::unique_ptr<Engine> engine, std::unique_ptr<RunContext> ctx)
    : engine_(std::move(engine)), ctx_(std::move(ctx)) {}

TestRun::~TestRun() {
  abort("test run destroyed");
  finish();
  // The engine's flows belong to the context: the engine (whose destructor still touches its
  // flows) must go first, whatever the member order.
  engine_.reset();
  ctx_.reset();
}

void TestRun::start(const Schedule& schedule, std::function<void(AgentResult)> on_done) {
  ctx_->set_schedule(schedule);
  engine_->seal(*ctx_);
  // Interfaces are looked up before the start, so the window's edges only read counters; the
  // CPU list follows the NIC's NUMA node unless the user chose one (or none).
  auto add_link = [this](const std::string& name) {
    if (!name.empty() && std::ranges::none_of(links_, [&](const LinkResult& l) { return l.info.name == name; })) {
      if (auto info = read_link(name)) links_.push_back(LinkResult{std::move(*info), {}, false, {}});
    }
  };
  flow_iface_ = flow_interfaces(ctx_->flows());
  for (const auto& name : flow_iface_) add_link(name);
  // A bond's members are links too: their counters show how the bond spread the traffic.
  const std::size_t flow_links = links_.size();
  for (std::size_t i = 0; i < flow_links; ++i) {
    const auto bond = links_[i].info.kind == "bond" ? read_bond(links_[i].info.name) : std::nullopt;
    if (!bond) continue;
    for (const auto& m : bond->members) add_link(m.name);
    bonds_.push_back({*bond, {}, bond_neighbors(ctx_->flows(), flow_iface_, bond->name)});
  }
  rdma_ports_ = flow_rdma_ports(ctx_->flows());
  const TestSpec& spec = ctx_->spec();
  if (!spec.no_affinity()) ctx_->set_cpus(spec.cpus().empty() ? numa_cpus(links_) : spec.cpus());
  engine_->start(*ctx_);
  engine_started_ = true;
  try {
    driver_ = std::thread([this, cb = std::move(on_done)] { drive(cb); });
  } catch (const std::system_error& e) {
    // No thread for the driver: a typed error (the agent refuses the test and joins the data
    // threads), never std::terminate.
    throw SystemError("start the test driver thread on", ctx_->hostname_, e.code().value());
  }
}

void TestRun::abort(const std::string& reason) noexcept {
  ctx_->abort(reason);
  engine_->abort();
}

void TestRun::finish() {
  std::lock_guard lk(finish_mu_);
  if (driver_.joinable()) driver_.join();
  if (!engine_started_) engine_->abort();
  engine_->join();
}

void TestRun::drive(const std::function<void(AgentResult)>& on_done) {
  RunContext& ctx = *ctx_;
  const Schedule s = ctx.schedule();
  const auto flows = ctx.flows();
  AgentResult r;
  r.node_index = ctx.node_index();
  r.hostname = ctx.hostname_;

  r.links = std::move(links_);
  r.bonds = std::move(bonds_);
  r.rdma_ports = std::move(rdma_ports_);
  // The flow set was sealed before flow_iface_ was built, so both list the same flows.
  std::vector<std::string> flow_iface = flow_iface_;
  flow_iface.resize(flows.size());
  r.socket_limits = read_socket_limits();
  std::vector<RunContext::ThreadEntry> threads;
  std::vector<double> thread_cpu_open;

  Snapshot open, close;
  bool have_open = false, have_close = false;
  if (ctx.sleep_until(s.start_at)) {
    ctx.release_start();
    r.start_late_ns = std::max<std::int64_t>(0, mono_now_ns() - s.start_at);
    if (ctx.sleep_until(s.window_open)) {
      open = take_snapshot(flows, true);
      r.window_open_unix_ns = wall_now_ns() - (mono_now_ns() - open.t);
      sample_counters(r, open.t);
      threads = ctx.threads();
      for (const auto& t : threads) thread_cpu_open.push_back(read_thread_cpu_s(t.tid));
      have_open = true;
      Snapshot prev = open;
      // Interval samples: node totals; the last one ends at window_close.
      for (std::int64_t t = s.window_open + s.interval_ns; t < s.window_close && !ctx.aborted(); t += s.interval_ns) {
        if (!ctx.sleep_until(t)) break;
        Snapshot cur = take_snapshot(flows, false);
        sample_counters(r, open.t);
        r.intervals.push_back(interval_between(open.t, prev, cur));
        prev = std::move(cur);
      }
      if (ctx.sleep_until(s.window_close)) {
        close = take_snapshot(flows, true);
        have_close = true;
        r.close_late_ns = std::max<std::int64_t>(0, close.t - s.window_close);
        sample_counters(r, open.t);
        for (auto& b : r.bonds) b.at_close = read_bond(b.at_open.name).value_or(b.at_open);
        for (std::size_t i = 0; i < threads.size(); ++i) {
          const double c = read_thread_cpu_s(threads[i].tid);
          if (c >= 0 && thread_cpu_open[i] >= 0) r.threads.push_back({threads[i].label, c - thread_cpu_open[i]});
        }
        r.intervals.push_back(interval_between(open.t, prev, close));
      }
    }
    ctx.sleep_until(s.end_at);
  }
  ctx.request_stop();
  ctx.release_start();
  join_data_threads(ctx, *engine_);

  r.aborted = ctx.aborted();
  if (r.aborted) r.abort_reason = ctx.abort_reason();
  if (!have_close) {
    // Aborted inside the window: what was measured up to now still counts, over the time it took.
    close = take_snapshot(flows, true);
    if (!have_open) {
      open = close;
    } else {
      sample_counters(r, open.t);
    }
  }
  for (auto& b : r.bonds) {
    if (b.at_close.name.empty()) b.at_close = read_bond(b.at_open.name).value_or(b.at_open);
  }
  r.window_s = static_cast<double>(close.t - open.t) / 1e9;
  r.cpu_busy_pct = cpu_busy_pct(open.cpu, close.cpu);
  // The host's TCP retransmits over the window, from the MIB read at its edges (unknown where the
  // run was aborted before the window opened).
  if (r.host_counters.size() >= 2) {
    const auto retrans = [](const CounterSample& c) -> std::int64_t {
      const auto it = std::ranges::find(c.values, "Tcp.RetransSegs", &CounterValues::value_type::first);
      return it == c.values.end() ? -1 : static_cast<std::int64_t>(it->second);
    };
    const std::int64_t a = retrans(r.host_counters.front()), b = retrans(r.host_counters.back());
    if (a >= 0 && b >= a) r.retrans_segs = b - a;
  }
  r.process_cpu_s = static_cast<double>(close.proc_cpu_ns - open.proc_cpu_ns) / 1e9;
  for (std::size_t i = 0; i < flows.size(); ++i)
    r.flows.push_back(flow_result(*flows[i], open.flows[i], close.flows[i], flow_iface[i]));
  if (const auto hists = ctx.histograms(); !hists.empty()) {
    r.latency.emplace();
    for (const auto* h : hists) r.latency->merge(*h);
  }
  if (ctx.has_delay()) r.delay = ctx.delay_histogram();
  r.trials = engine_->trials();
  r.warnings = ctx.warnings();
  on_done(std::move(r));
}

std::unique_ptr<Engine> make_engine(Transport t) {
  switch (t) {
    case Transport::tcp: return std::make_unique<TcpEngine>();
    case Transport::rdma:
#if FABPERF_HAVE_RDMA
      return make_verbs_engine();
#else
      throw UsageError(
          "--transport rdma: fabperf was built without RDMA support (install libibverbs-dev and librdmacm-dev, then "
          "rebuild)");
#endif
  }
  throw UsageError("unknown transport");
}

}  // namespace fabperf
