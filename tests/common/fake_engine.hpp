// An engine without a network, for the run loop's and the agent's state machine tests: its
// client flows count bytes on their own threads as a transport's would, and what the state
// machine did to it (set up, started, aborted, joined) is recorded where the test can see it after
// the engine has been handed over.
#pragma once

#include <fabperf/core/error.hpp>
#include <fabperf/engine/engine.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace fabperf::fakes {

struct FakeEngineOptions {
  int flows = 1;                          // client flows prepare_client adds
  std::uint64_t per_tick = 1000;          // bytes a flow counts every 100 us
  bool stall = false;                     // flows ignore the stop until abort()
  std::uint16_t port = 0;                 // what prepare_server answers
  std::string fail_setup{};               // non-empty: prepare_server and prepare_client throw it
  std::shared_future<void> hold_join{};   // valid: join() waits for it (a slow release)
  std::shared_future<void> hold_start{};  // valid: start() waits for it (threads slow to start)
  int slow_read = 0;                      // > 0: the first flow's Nth edge() read takes 50 ms
};

// A flow whose acknowledged count is its sent count, and whose Nth read of it is slow: a reader
// preempted in the middle of a window edge's reads, while the flow goes on counting.
class SlowReadFlow final : public Flow {
 public:
  SlowReadFlow(int slow_read, std::string where)
      : Flow(FlowRole::client, FlowOp::write, 1, std::move(where), "127.0.0.1:5000"), slow_read_(slow_read) {}
  [[nodiscard]] Edge edge(std::uint64_t /*counted_rx*/) const override {
    if (++reads_ == slow_read_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return {counters.tx_bytes.load(), std::nullopt};
  }

 private:
  int slow_read_;
  mutable std::atomic<int> reads_{0};
};

struct FakeEngineLog {
  std::atomic<int> servers{0}, clients{0}, starts{0}, aborts{0}, joins{0};
};

class FakeEngine final : public Engine {
 public:
  explicit FakeEngine(FakeEngineOptions o, std::shared_ptr<FakeEngineLog> log = std::make_shared<FakeEngineLog>())
      : o_(std::move(o)), log_(std::move(log)) {}
  ~FakeEngine() override {
    aborted_ = true;
    stop_threads();
  }
  [[nodiscard]] std::string_view name() const override { return "fake"; }
  std::uint16_t prepare_server(RunContext&, const ServerPlan&) override {
    ++log_->servers;
    if (!o_.fail_setup.empty()) throw Error(ExitCode::infrastructure, o_.fail_setup);
    return o_.port;
  }
  void prepare_client(RunContext& ctx, const ClientPlan&) override {
    ++log_->clients;
    if (!o_.fail_setup.empty()) throw Error(ExitCode::infrastructure, o_.fail_setup);
    for (int i = 0; i < o_.flows; ++i) {
      const std::string local = "127.0.0.1:" + std::to_string(40000 + i);
      flows_.push_back(
          &ctx.add_flow(i == 0 && o_.slow_read > 0
                            ? std::unique_ptr<Flow>(std::make_unique<SlowReadFlow>(o_.slow_read, local))
                            : std::make_unique<Flow>(FlowRole::client, FlowOp::write, 1, local, "127.0.0.1:5000")));
    }
  }
  void seal(RunContext&) override { sealed = true; }
  void start(RunContext& ctx) override {
    if (o_.hold_start.valid()) o_.hold_start.wait();
    ++log_->starts;
    for (Flow* f : flows_) {
      threads_.emplace_back([this, &ctx, f] {
        ctx.enter_data_thread("send", f->id, f->role);
        ++registered_;
        ctx.wait_for_start();
        while (!ctx.stopping() || (o_.stall && !aborted_.load())) {
          f->counters.add_tx(o_.per_tick);
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        // After the stop, so outside the window however late this thread ran: the tail a
        // transport sends while it drains.
        f->counters.add_tx(o_.per_tick);
      });
    }
    // As an engine's start() returns with its data threads running: every one is registered
    // (its CPU time counted) before the window can open, however slowly they were scheduled.
    while (registered_.load() < static_cast<int>(threads_.size()))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void abort() noexcept override {
    ++log_->aborts;
    aborted_ = true;
  }
  void join() override {
    ++log_->joins;
    if (o_.hold_join.valid()) o_.hold_join.wait();
    stop_threads();
  }
  [[nodiscard]] std::vector<TrialResult> trials() const override {
    return {TrialResult{"send method", "write", "a fixed answer from the fake", {}}};
  }
  bool sealed{false};

 private:
  void stop_threads() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  FakeEngineOptions o_;
  std::shared_ptr<FakeEngineLog> log_;
  std::atomic<bool> aborted_{false};
  std::atomic<int> registered_{0};
  std::vector<Flow*> flows_;
  std::vector<std::thread> threads_;
};

}  // namespace fabperf::fakes
