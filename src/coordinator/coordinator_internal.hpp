// The coordinator's state machine, shared by its sources: coordinator.cpp reaches the agents and
// runs the sequence, setup.cpp sets the test up and starts it, collect.cpp gathers the results.
#pragma once

#include "coordinator/dialer.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/core/clock.hpp>

namespace fabperf::coord {

struct Node {
  NodeRecord rec;
  HostPort hp;
  std::shared_ptr<proto::ControlConn> conn;
  std::string endpoint;  // address:port as dialled
  std::uint16_t data_port{0};
  std::string failure;  // set-up phase failure, if any
  // RDMA through the control channel: this node's server and client queue pair endpoints.
  std::vector<proto::RdmaEndpoint> rdma_server_eps;
  std::vector<proto::RdmaEndpoint> rdma_client_eps;
};

// The test's start and end on this host's monotonic clock.
struct Window {
  std::int64_t start{0};
  std::int64_t end{0};
};

inline double seconds_since(std::int64_t mono_ns) {
  return static_cast<double>(mono_now_ns() - mono_ns) / 1e9;
}

class Coordinator {
 public:
  using NodeTask = std::function<asio::awaitable<void>(Node&)>;
  // dialer: null for agents over TCP (TcpDialer).
  Coordinator(const RunRequest& req, Dialer* dialer = nullptr, CoordinatorTiming timing = {});

  // Connects to every node in parallel, then runs fn on each one that answered; failures stay
  // in Node::failure. No test is set up; the connections close at the end.
  void administer(const NodeTask& fn);
  [[nodiscard]] const std::vector<Node>& nodes() const { return nodes_; }
  // Sends a request, then reads frames until `want` within the usual deadlines (see expect). With
  // GCC 12 a temporary body in the co_await's expression is freed twice (the shell's killall
  // crashed): callers pass a named one, or none (an empty object).
  asio::awaitable<nlohmann::json> request(Node& n, proto::MsgType type, const nlohmann::json& body,
                                          proto::MsgType want) {
    n.conn->send(type, body);
    return expect(n, want, t_.idle, t_.frame);
  }
  asio::awaitable<nlohmann::json> request(Node& n, proto::MsgType type, proto::MsgType want) {
    return request(n, type, nlohmann::json::object(), want);
  }
  RunRecord run();

 private:
  void check_pairs();
  [[nodiscard]] std::vector<std::size_t> servers_of(std::size_t cn) const;
  void on_interrupt();
  void close_all();
  void abort_all(const std::string& reason);
  // window: at most this many nodes in fn at once (0: all of them).
  asio::awaitable<void> each(const NodeTask& fn, std::function<bool(const Node&)> which = {}, std::size_t window = 0);
  void throw_if_failed(const std::string& phase);
  // each(), then throw_if_failed(name): one phase of the run, ended on any agent's failure.
  asio::awaitable<void> phase(const char* name, const NodeTask& fn, std::function<bool(const Node&)> which = {},
                              std::size_t window = 0);
  asio::awaitable<nlohmann::json> expect(Node& n, proto::MsgType want, std::chrono::milliseconds idle,
                                         std::chrono::milliseconds frame, bool answer_bound = true,
                                         std::function<void(const nlohmann::json&)> on_heartbeat = nullptr);
  asio::awaitable<nlohmann::json> setup_exchange(Node& n, proto::MsgType type, const nlohmann::json& body,
                                                 proto::MsgType want, std::chrono::milliseconds idle);
  asio::awaitable<void> connect(Node& n);
  asio::awaitable<void> heartbeats(std::shared_ptr<proto::ControlConn> conn);
  asio::awaitable<void> sync_clock(Node& n);
  void refuse_duplicates() const;
  asio::awaitable<RunRecord> flow();

  // setup.cpp
  asio::awaitable<void> auto_socksize(RunRecord& rec);
  asio::awaitable<void> setup_servers(const RunRecord& rec, const proto::Token& token, bool rdma_cc);
  asio::awaitable<void> setup_clients(const RunRecord& rec, const proto::Token& token, bool rdma_cc);
  asio::awaitable<void> connect_rdma(const RunRecord& rec);
  Window start_test(const RunRecord& rec);

  // collect.cpp
  asio::awaitable<void> collect(const Window& w);
  asio::awaitable<void> collect_one(Node& n, const Window& w, std::chrono::steady_clock::time_point end_tp);
  asio::awaitable<void> release();
  void live_progress(const Node& n, std::uint64_t bytes, const Window& w);

  const RunRequest& req_;
  CoordinatorTiming t_;
  Dialer* dialer_;
  std::unique_ptr<Dialer> own_dialer_;  // TCP, when no dialer was given
  asio::io_context io_;
  std::vector<Node> nodes_;
  std::vector<std::size_t> server_node_;  // index in nodes_ of req_.servers[i]
  std::vector<std::size_t> client_node_;  // index in nodes_ of req_.clients[i]
  bool running_{false};
  // The live progress line: each node's last two received-byte counts, and when it last spoke.
  struct Live {
    std::uint64_t bytes{0};
    std::int64_t t{0};
    double mb_per_s{0};
  };
  std::map<const Node*, Live> live_;
  std::int64_t last_progress_ns_{0};
  bool interrupted_{false};
  bool finished_{false};
  std::vector<std::shared_ptr<asio::steady_timer>> heartbeat_timers_;
};

}  // namespace fabperf::coord
