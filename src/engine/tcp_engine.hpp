#pragma once

#include <fabperf/engine/engine.hpp>

#include "engine/trial.hpp"

#include <fabperf/core/fd.hpp>

#include <fabperf/sysinfo/bonding.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace fabperf {

class TcpFlow final : public Flow {
 public:
  TcpFlow(int fd, FlowRole role, FlowOp op, std::uint32_t peer_node, std::string local, std::string remote);
  [[nodiscard]] TcpSample sample_transport() const override;
  [[nodiscard]] Edge edge(std::uint64_t counted_rx) const override;
  [[nodiscard]] int fd() const { return fd_.get(); }
  void shutdown_both() noexcept;

 private:
  UniqueFd fd_;
};

class TcpEngine final : public Engine {
 public:
  TcpEngine();
  ~TcpEngine() override;
  [[nodiscard]] std::string_view name() const override { return "tcp"; }
  std::uint16_t prepare_server(RunContext& ctx, const ServerPlan& plan) override;
  void prepare_client(RunContext& ctx, const ClientPlan& plan) override;
  void seal(RunContext& ctx) override;
  void start(RunContext& ctx) override;
  void abort() noexcept override;
  void join() override;
  [[nodiscard]] std::vector<TrialResult> trials() const override;

 private:
  struct RpcConn;
  void accept_loop();
  void spawn_data_threads(RunContext& ctx);
  // Opens, binds, connects and authenticates one data connection; SystemError naming the peer.
  TcpFlow* connect_one(const proto::Target& t, FlowOp op, std::uint32_t conn_index, std::uint32_t pair_conn,
                       const ClientPlan& plan);
  // A socket through its handshake, as a flow of this engine (blocking again, with the loops' tick).
  TcpFlow* add_flow(RunContext& ctx, int fd, FlowRole role, FlowOp op, std::uint32_t peer, std::string remote,
                    std::string device = {});
  // --spread-ports: the source port that puts this connection on the next member of the local
  // bond (round-robin over the usable members); nullopt when the bond's policy cannot be steered.
  std::optional<std::uint16_t> spread_port(const std::string& src_ip, const std::string& dst_ip, std::uint16_t dst_port,
                                           int attempt);
  // An rpc message on f: its header, then (len > 0) a block of the pattern sent the way method picks.
  bool send_rpc(TcpFlow& f, const std::uint8_t* hdr, std::uint64_t len, ArmPicker& method, int& err);
  void stream_send(TcpFlow& f);
  void stream_receive(TcpFlow& f);
  // Serves its connections: one in a blocking loop, several in a poll loop (tcp::rpc_serve_threads).
  void rpc_server(std::vector<TcpFlow*> flows);
  void rpc_tester(std::uint32_t t);
  // The testers that only ever use connection c, as one thread (tcp::pinned_testers).
  void rpc_pipeline(RpcConn& c, std::vector<std::uint32_t> testers);
  void rpc_receiver(RpcConn& c);
  void probe_loop();

  RunContext* ctx_{nullptr};
  ServerPlan server_plan_;
  UniqueFd listen_fd_;
  std::thread accept_thread_;
  std::atomic<bool> accept_stop_{false};
  UniqueFd accept_wake_fd_;  // an eventfd: stop_accept() wakes the accept loop's poll at once
  void stop_accept() noexcept;
  std::atomic<bool> socksize_warned_{false};
  std::vector<std::string> bind_devs_;  // --bind-dev, resolved: one device per link
  std::vector<std::uint8_t> tx_buf_;    // read-only once the test starts; shared by all senders
  std::size_t tx_period_{0};            // tx_buf_ repeats every tx_period_ bytes (start)
  UniqueFd tx_memfd_;                   // --send-method sendfile or auto: one period of tx_buf_ in a memfd
  // --send-method auto: write (arm 0) vs sendfile (arm 1), tried in the warm-up (engine/trial.hpp).
  std::unique_ptr<ArmTrial> send_trial_;
  // Receivers of blocks larger than 256 KiB: 256 KiB (arm 0) vs min(block, 1 MiB) chunks.
  std::unique_ptr<ArmTrial> recv_trial_;
  // A trial only where the user left the choice to the host (auto); zerocopy sends from the
  // buffer (arm 0) with MSG_ZEROCOPY.
  [[nodiscard]] ArmPicker send_picker() const {
    return ArmPicker(send_trial_.get(), ctx_->spec().send_method() == SendMethod::sendfile ? 1 : 0);
  }
  [[nodiscard]] ArmPicker recv_picker() const { return ArmPicker(recv_trial_.get(), 0); }
  [[nodiscard]] static std::array<std::size_t, 2> recv_chunks(const TestSpec& spec);

  struct Spread {
    std::string bond;  // empty: not a bond, or one whose policy ignores ports (warned once)
    HashPolicy policy{HashPolicy::layer34};
    int members{0};
    std::uint32_t next{0};
    std::vector<std::uint16_t> taken;
  };
  std::map<std::string, Spread> spread_;  // by local source address; set-up thread only

  std::mutex mu_;
  std::vector<TcpFlow*> server_flows_;
  std::vector<TcpFlow*> client_flows_;
  std::vector<TcpFlow*> probe_flows_;  // one per server, pings only
  std::vector<std::unique_ptr<RpcConn>> rpc_conns_;
  std::vector<std::vector<RpcConn*>> rpc_table_;  // [server][lane]
  std::vector<LatencyHistogram*> tester_hist_;
  std::vector<std::thread> threads_;
  std::vector<std::thread> testers_;
  std::vector<std::thread> receivers_;
};

}  // namespace fabperf
