// The engine interface and the shared run loop. An engine (TCP, later RDMA verbs) only opens
// connections and moves bytes; RunContext owns the schedule (common start, window, stop), the
// per-flow counters, the latency histograms and everything else that is the same for every
// transport, so a new transport is a second implementation, never a fork of the timing logic.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fabperf/core/histogram.hpp>
#include <fabperf/core/spec.hpp>
#include <fabperf/proto/agent_result.hpp>
#include <fabperf/proto/proto.hpp>

namespace fabperf {

// Instants on this host's monotonic clock (ns), already corrected for the coordinator's offset:
// the START message's fields.
using Schedule = proto::Start;

// Bumped by the data plane with relaxed atomics; aligned so two flows never share a cache line.
struct alignas(64) FlowCounters {
  std::atomic<std::uint64_t> tx_bytes{0};
  std::atomic<std::uint64_t> rx_bytes{0};
  std::atomic<std::uint64_t> msgs{0};
  // Protocol bytes written and read beside the payload (rpc request and reply headers, pings):
  // the kernel's counts hold them too (Flow::edge takes them off).
  std::atomic<std::uint64_t> framing_tx{0}, framing_rx{0};
  void add_tx(std::uint64_t n) noexcept { tx_bytes.fetch_add(n, std::memory_order_relaxed); }
  void add_rx(std::uint64_t n) noexcept { rx_bytes.fetch_add(n, std::memory_order_relaxed); }
  void add_msg() noexcept { msgs.fetch_add(1, std::memory_order_relaxed); }
  std::atomic<std::uint64_t> verify_errors{0};  // received chunks that differed from the pattern
  void add_verify_error() noexcept { verify_errors.fetch_add(1, std::memory_order_relaxed); }
};

// One connection (TCP) or queue pair (RDMA).
class Flow {
 public:
  Flow(FlowRole role, FlowOp op, std::uint32_t peer_node, std::string local, std::string remote);
  virtual ~Flow() = default;

  // Transport statistics; called by the sampler thread while the flow runs.
  [[nodiscard]] virtual TcpSample sample_transport() const { return {}; }
  // What a window's edge reads of the flow, nullopt where the transport cannot say.
  // delivered: payload bytes the peer has received so far, as this end knows it: what the
  // transport says the peer acknowledged. The sender's own count (tx_bytes) also holds what still
  // sits in a socket buffer, which over a short window on a slow link can be a third of the figure.
  // Only differences are meaningful (set-up bytes may be included). The default is the tx
  // counter, for transports that count a send only when it completed (RDMA RC).
  // queued: bytes that arrived and are not counted in `counted_rx` (the reader's count, read by
  // the caller just before, so both edges pair one count with one kernel figure): a TCP
  // connection's bytes received less that count and the framing read, so a read in progress too.
  // A reader starved of CPU leaves megabytes there at a window's edge.
  struct Edge {
    std::optional<std::uint64_t> delivered, queued;
  };
  [[nodiscard]] virtual Edge edge(std::uint64_t /*counted_rx*/) const {
    return {counters.tx_bytes.load(std::memory_order_relaxed), std::nullopt};
  }

  // Records the first error only; the flow's thread calls it, then ends.
  void fail(std::string message);
  [[nodiscard]] std::string error() const;

  FlowCounters counters;
  std::uint32_t id{0};
  const FlowRole role;
  const FlowOp op;
  const std::uint32_t peer_node;
  const std::string local;
  const std::string remote;
  // Set before the flow is added when the engine bound it to a device (--bind-dev): its traffic
  // is counted on that link, whatever interface owns the local address.
  std::string device;
  // RDMA: the local device port the queue pair uses ("rxe0:1"), whose counters the run samples.
  std::string rdma_port;

 private:
  mutable std::mutex error_mu_;
  std::string error_;
};

class RunContext {
 public:
  RunContext(TestSpec spec, std::uint32_t node_index, std::string hostname);

  [[nodiscard]] const TestSpec& spec() const { return spec_; }
  [[nodiscard]] std::uint32_t node_index() const { return node_index_; }

  // Set-up phase (thread-safe).
  Flow& add_flow(std::unique_ptr<Flow> flow);
  LatencyHistogram& add_histogram();
  LatencyHistogram& delay_histogram() { return delay_; }
  [[nodiscard]] bool has_delay() const { return has_delay_.load(); }
  void mark_delay() { has_delay_ = true; }
  void warn(std::string message);
  [[nodiscard]] std::vector<std::string> warnings() const { return locked_copy(warnings_); }
  [[nodiscard]] std::size_t flow_count() const;
  // Every byte the flows have received so far (for the live progress line; any thread).
  [[nodiscard]] std::uint64_t received_bytes() const;

  // Data threads: block until the common start (returns early on abort).
  void wait_for_start() const noexcept;
  [[nodiscard]] bool stopping() const noexcept { return stop_.load(std::memory_order_relaxed); }
  [[nodiscard]] bool aborted() const noexcept { return aborted_.load(std::memory_order_relaxed); }
  [[nodiscard]] const Schedule& schedule() const noexcept { return schedule_; }
  [[nodiscard]] bool in_window(std::int64_t t) const noexcept {
    return t >= schedule_.window_open && t < schedule_.window_close;
  }
  // Past this instant no data thread may still be running; peers that stall are abandoned. After
  // end_at the flows drain what the kernel still holds, which takes seconds on a slow or shaped
  // link (or a bond that lost a member): every sign of progress there moves the deadline on by
  // kGraceNs, up to kMaxDrainNs after end_at. Cutting a connection that still delivers makes the
  // kernel answer the data in flight with resets: a normal end of test must not look like that.
  [[nodiscard]] std::int64_t hard_deadline() const noexcept {
    const std::int64_t p = drain_progress_ns_.load(std::memory_order_relaxed);
    const std::int64_t moved = (p > schedule_.end_at ? p : schedule_.end_at) + kGraceNs;
    return moved < schedule_.end_at + kMaxDrainNs ? moved : schedule_.end_at + kMaxDrainNs;
  }
  static constexpr std::int64_t kGraceNs = 3'000'000'000;
  static constexpr std::int64_t kMaxDrainNs = 60'000'000'000;
  // Data threads past the stop: bytes still moved (received, or left the send queue).
  void note_drain_progress() const noexcept;

  // Driver side.
  void set_schedule(const Schedule& s) { schedule_ = s; }
  void release_start() noexcept;
  void request_stop() noexcept;
  void abort(std::string reason) noexcept;
  [[nodiscard]] std::string abort_reason() const { return locked_copy(abort_reason_); }
  // Interruptible sleep for the driver thread; returns false when aborted first.
  bool sleep_until(std::int64_t t) const;

  // Data threads call this first: names the thread, pins it (when the test has a CPU list) and
  // registers it for per-thread CPU accounting. Client-end threads take the list's CPUs in turn
  // from its first, server-end threads from its middle: with two agents on one host and two or
  // more CPUs in the list, the i-th of each end never share a core, so one flow's two ends never
  // do and many flows' ends spread evenly (pinned to one core both ends of a veth flow run at
  // half its rate: docs/performance.md, 2026-12-04). Light threads (the delay probe and its
  // server) pass pin = false and float.
  void enter_data_thread(const char* role, std::uint32_t index, FlowRole end, bool pin = true) noexcept;
  void set_cpus(std::vector<int> cpus) { cpus_ = std::move(cpus); }
  struct ThreadEntry {
    int tid;
    std::string label;
  };
  [[nodiscard]] std::vector<ThreadEntry> threads() const { return locked_copy(threads_); }

  // Read by the run loop after the data threads were joined.
  [[nodiscard]] std::vector<Flow*> flows() const { return locked_raw<Flow*>(flows_); }
  [[nodiscard]] std::vector<const LatencyHistogram*> histograms() const {
    return locked_raw<const LatencyHistogram*>(histograms_);
  }

 private:
  const TestSpec spec_;
  const std::uint32_t node_index_;
  const std::string hostname_;
  Schedule schedule_;
  mutable std::mutex mu_;
  // A copy of a member that mu_ guards, taken under it.
  template <typename T>
  T locked_copy(const T& member) const {
    std::lock_guard lk(mu_);
    return member;
  }
  // The objects an owning member holds, as P pointers, listed under mu_.
  template <typename P, typename T>
  std::vector<P> locked_raw(const std::vector<std::unique_ptr<T>>& member) const {
    std::lock_guard lk(mu_);
    std::vector<P> out(member.size());
    std::ranges::transform(member, out.begin(), &std::unique_ptr<T>::get);
    return out;
  }
  mutable std::condition_variable cv_;
  std::vector<std::unique_ptr<Flow>> flows_;
  std::vector<std::unique_ptr<LatencyHistogram>> histograms_;
  LatencyHistogram delay_;  // written by the one probe thread, read after it was joined
  std::atomic<bool> has_delay_{false};
  mutable std::atomic<std::int64_t> drain_progress_ns_{0};
  std::vector<std::string> warnings_;
  std::vector<ThreadEntry> threads_;
  std::vector<int> cpus_;
  std::atomic<std::uint32_t> next_cpu_[2]{};  // per connection end (FlowRole)
  std::string abort_reason_;
  bool started_{false};  // under mu_ (wait_for_start, release_start)
  std::atomic<bool> stop_{false};
  std::atomic<bool> aborted_{false};

  friend class TestRun;
};

// Server and client halves of a test, as the coordinator assigned them to this agent.
struct ServerPlan {
  std::string bind_address;  // numeric; the address the coordinator reached this agent on
  proto::Token token{};
  std::uint32_t expect_connections{0};
  // RDMA queue pairs set up through the coordinator (proto::SetupServer::rdma_clients): the
  // client nodes to create queue pairs for, the address each connection c uses on this node
  // (link_addrs[c % L], else control_address) to choose the RDMA port by GID.
  std::vector<std::uint32_t> rdma_clients{};
  std::vector<std::string> link_addrs{};
  std::string control_address{};
  std::string test_id{};  // bound into the data connections' proofs (data_hello.hpp)
};
struct ClientPlan {
  proto::Token token{};  // already derived for this client (see derive_client_token)
  std::vector<proto::Target> targets;
  std::vector<std::string> source_addrs;  // per link (empty: the kernel picks the source)
  std::vector<std::string> bind_devs;     // per link SO_BINDTODEVICE (proto::SetupClient::bind_devs)
  std::string test_id{};                  // bound into the data connections' proofs (data_hello.hpp)
};
// Each client proves membership of the test with its own token, derived from the test token, so
// a data connection cannot claim to be another client and no IP allow-list is needed
// (multi-homed hosts connect from addresses the coordinator never saw).
proto::Token derive_client_token(const proto::Token& test_token, std::uint32_t client_node);

// The bytes every engine sends, and what --verify compares received data with: a non-constant
// pattern (nothing along the path can shortcut zero pages) that repeats every `period` bytes.
inline void fill_pattern(std::span<std::uint8_t> out, std::size_t period) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::size_t k = i % period;
    out[i] = static_cast<std::uint8_t>((k * 131) ^ (k >> 9));
  }
}

// Whether connection (or rpc thread) c of a client-server pair writes: rw alternates, the other
// tests go one way.
inline bool pair_writes(const TestSpec& spec, std::uint32_t c) {
  return is_write_like(spec.test()) || (spec.test() == TestKind::rw && c % 2 == 0);
}

// The interface that owns an endpoint's local address ("ADDR:PORT"), by address without the port:
// one lookup (a netlink dump) per address, not per flow.
const std::string& cached_interface(std::map<std::string, std::string>& cache, const std::string& endpoint);

// Joins the engine's threads (those not joined yet) and forgets them.
inline void join_all(std::vector<std::thread>& threads) {
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
  threads.clear();
}

// Upper bound of the buffers the data plane allocates for `flows` connections of this spec (one
// shared send buffer plus one receive buffer per connection); the agent's --max-buffer-memory.
std::uint64_t estimate_buffer_memory(const TestSpec& spec, std::uint64_t flows);

// What an engine offers when its connections are set up through the coordinator rather than by
// connecting directly (RDMA queue pairs without --rdma-cm, docs/rdma.md): an optional capability,
// so the Engine interface carries nothing a transport without it must stub.
class EndpointExchange {
 public:
  virtual ~EndpointExchange() = default;
  // The endpoints the last prepare_server/prepare_client created, for the coordinator to forward.
  virtual std::vector<proto::RdmaEndpoint> take_endpoints() = 0;
  // Server side: connects its queue pairs to the clients' endpoints (RDMA_CONNECT); returns how
  // many are ready. Throws naming the endpoint that does not fit.
  virtual std::size_t connect_endpoints(RunContext& ctx, const std::vector<proto::RdmaEndpoint>& peers) = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  // Listens and starts accepting data connections; returns the data port.
  virtual std::uint16_t prepare_server(RunContext& ctx, const ServerPlan& plan) = 0;
  // Opens every data connection of this client (blocking, bounded by timeouts).
  virtual void prepare_client(RunContext& ctx, const ClientPlan& plan) = 0;
  // Stops accepting data connections: after this the test's set of flows is final.
  virtual void seal(RunContext& ctx) = 0;
  // Spawns the data threads (after seal); they wait in ctx.wait_for_start().
  virtual void start(RunContext& ctx) = 0;
  // The endpoint exchange, for an engine that has one (RDMA without --rdma-cm); null otherwise.
  [[nodiscard]] virtual EndpointExchange* endpoint_exchange() { return nullptr; }
  // Unblocks every data thread promptly (shuts sockets down); safe from any thread.
  virtual void abort() noexcept = 0;
  virtual void join() = 0;
  // Host-dependent choices this engine settled by measurement in the warm-up (after join).
  [[nodiscard]] virtual std::vector<TrialResult> trials() const { return {}; }
};

// Throws UsageError for a transport this build does not have.
std::unique_ptr<Engine> make_engine(Transport t);

// Drives one test on one agent: a driver thread releases the start, snapshots every counter at
// the window's open and close (and at each interval between), stops the flows at end_at, joins
// them (aborting stragglers at the hard deadline) and hands the AgentResult to on_done.
class TestRun {
 public:
  TestRun(std::unique_ptr<Engine> engine, std::unique_ptr<RunContext> ctx);
  ~TestRun();

  RunContext& context() { return *ctx_; }

  // on_done runs on the driver thread.
  void start(const Schedule& schedule, std::function<void(AgentResult)> on_done);
  void abort(const std::string& reason) noexcept;
  // Joins everything (data threads and driver); after this the run holds no threads or sockets.
  void finish();

 private:
  void drive(const std::function<void(AgentResult)>& on_done);

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<RunContext> ctx_;
  std::vector<LinkResult> links_;
  std::vector<BondResult> bonds_;           // bonds among links_ (their members are links_ too)
  std::vector<RdmaPortResult> rdma_ports_;  // RDMA device ports the flows use
  std::vector<std::string> flow_iface_;     // per flow, in ctx_->flows() order
  std::thread driver_;
  std::mutex finish_mu_;  // finish() may be reached from the destructor and the agent's release
  std::atomic<bool> engine_started_{false};
};

}  // namespace fabperf
