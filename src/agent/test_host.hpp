// The agent's test state machine: one test at a time, from the first SETUP to the RESULT (or the
// abort), for the coordinator session that set it up. It decides who may set up (busy, still
// cleaning, over a limit), reserves what a role will spend, runs the engine's blocking set-up on
// the pool, starts the run loop, sends the result, and releases everything (joins off the I/O
// thread) when the run ends, the owner aborts, or the owner's session is lost.
//
// It knows nothing of sockets: sessions reach it as proto::MessageSink (a FramedConn in the
// agent, an in-memory peer in tests/unit/test_test_host.cpp), engines come from a factory (a fake
// one in the tests), so every transition is tested in milliseconds without a network.
#pragma once

#include "net/asio.hpp"
#include "proto/conn.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <fabperf/engine/engine.hpp>
#include <fabperf/proto/proto.hpp>

namespace fabperf {

// Runs f on the pool and resumes on the caller's executor when it returns (or rethrows).
template <typename F>
asio::awaitable<void> on_pool(asio::thread_pool& pool, F f) {
  co_await asio::co_spawn(
      pool,
      [f = std::move(f)]() -> asio::awaitable<void> {
        f();
        co_return;
      },
      asio::use_awaitable);
}

// Logs and queues an ERROR message.
void send_error(proto::MessageSink& peer, proto::ErrorCode code, std::string message);

struct TestHostLimits {
  std::chrono::seconds max_duration{3600};
  std::uint64_t max_buffer_memory{1ull << 30};
  // Descriptors a test's connections may use; nullopt: what RLIMIT_NOFILE leaves (the agent).
  std::optional<std::uint64_t> descriptors{};
};

using EngineFactory = std::function<std::unique_ptr<Engine>(Transport)>;
using PeerPtr = std::shared_ptr<proto::MessageSink>;

class TestHost {
 public:
  // on_idle: called on io's thread each time a test has been released (nothing is held).
  TestHost(asio::io_context& io, asio::thread_pool& pool, TestHostLimits limits, EngineFactory make_engine,
           std::string hostname, std::function<void()> on_idle);
  TestHost(const TestHost&) = delete;
  TestHost& operator=(const TestHost&) = delete;

  // The test messages of an authenticated session; `who` names its coordinator in busy errors.
  // Each answers the peer (an _OK message or an ERROR) and never throws.
  asio::awaitable<void> setup_server(PeerPtr peer, std::string who, proto::SetupServer m, std::string bind_address);
  asio::awaitable<void> setup_client(PeerPtr peer, std::string who, proto::SetupClient m);
  asio::awaitable<void> rdma_connect(PeerPtr peer, proto::RdmaConnect m);
  // START's work (reading the links, starting every data thread: a thousand for a server of a
  // thousand connections) runs on the pool, so the I/O thread keeps the heartbeats going.
  asio::awaitable<void> start(PeerPtr peer, proto::Start m);
  // From the owner: the run stops and reports (aborted) or, before START, is released. Others
  // are ignored.
  void abort(const proto::MessageSink* peer, const std::string& reason);

  // The session ended (closed or lost): a test it owns stops all traffic and is released.
  void session_ended(const proto::MessageSink* peer, const std::string& who, const std::string& why);
  // The agent stops: a running test is aborted, then released (on_idle follows).
  void stop(const std::string& why);

  [[nodiscard]] bool idle() const { return test_ == nullptr; }
  // True between this session's test's end and its RESULT: the run lets its connections drain
  // what the kernels still hold (RunContext::hard_deadline). Heartbeats say so to the coordinator.
  [[nodiscard]] bool draining(const proto::MessageSink* peer) const;
  // Bytes received so far by this peer's running test; nothing when it runs none.
  [[nodiscard]] std::optional<std::uint64_t> received(const proto::MessageSink* peer) const;
  [[nodiscard]] bool owned_by(const proto::MessageSink* peer) const { return owner_ != nullptr && owner_ == peer; }
  // "running test T for coordinator C" when another session holds a test; nullopt otherwise.
  [[nodiscard]] std::optional<std::string> held_by_other(const proto::MessageSink* peer) const;

 private:
  struct TestState;
  bool claim(proto::MessageSink& peer, const std::string& who, const std::string& test_id, const TestSpec& spec);
  void reserve(const TestSpec& spec, std::uint64_t flows, std::uint64_t descriptors, const char* role);
  void ensure_engine(const TestSpec& spec, std::uint32_t node_index);
  void setup_failed(proto::MessageSink& peer, const std::string& what);
  void start_run(const std::shared_ptr<TestState>& state, const Schedule& s,
                 const std::weak_ptr<proto::MessageSink>& weak);
  void drop();
  void release_async();

  asio::io_context& io_;
  asio::thread_pool& pool_;
  TestHostLimits limits_;
  EngineFactory make_engine_;
  std::string hostname_;
  std::function<void()> on_idle_;
  std::shared_ptr<TestState> test_;
  const proto::MessageSink* owner_{nullptr};
};

}  // namespace fabperf
