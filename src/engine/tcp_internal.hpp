// What the TCP engine's files share (private to src/engine): the rpc wire constants, the socket
// tuning helpers and the rpc client connection. The engine is split by concern: tcp_engine.cpp (set-up
// with socket options and --spread-ports, start, stop), tcp_flow.cpp (a connection's kernel statistics),
// tcp_handshake.cpp (the data connections' authenticated opening over data_hello), tcp_loops.cpp (the hot loops).
#pragma once

#include "engine/tcp_engine.hpp"
#include "net/sockaddr.hpp"

#include <fabperf/engine/data_hello.hpp>

#include <sys/socket.h>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fabperf::tcp {

// With at most one tester thread per connection (threads <= parallel) each tester reads its own
// replies: no reply thread, and no hand-over between threads inside the measured round trip.
// Otherwise testers share connections and a receiver thread per connection hands replies out in order.
inline bool one_tester_per_connection(const TestSpec& spec) {
  return spec.threads() <= spec.parallel();
}

// The testers of each connection ([server][lane]) when every tester stays on one connection (one
// server, or swrite/sread) and a connection's testers all write or all read; empty otherwise. One
// thread then runs a connection's testers (TcpEngine::rpc_pipeline): 4 tester threads and a reply
// thread on one connection handed each 4 MiB block over three times, at about 0.1 ms a wake-up on
// a small VM. A connection whose testers mix writes and reads keeps its threads: one thread
// blocked sending a block while the server blocks sending it a read's block would deadlock.
inline std::vector<std::vector<std::vector<std::uint32_t>>> pinned_testers(const TestSpec& spec, std::size_t servers) {
  if (servers == 0 || (servers != 1 && !is_sticky(spec.test()))) return {};  // 0: no client here
  std::vector<std::vector<std::vector<std::uint32_t>>> out(servers,
                                                           std::vector<std::vector<std::uint32_t>>(spec.parallel()));
  for (std::uint32_t t = 0; t < spec.threads(); ++t) {
    auto& conn = out[t % servers][t % spec.parallel()];
    if (!conn.empty() && pair_writes(spec, conn.front()) != pair_writes(spec, t)) return {};
    conn.push_back(t);
  }
  return out;
}

// An rpc server answers each connection on a thread of its own up to this many connections, and
// beyond them spreads its connections over this many threads that poll (TcpEngine::rpc_server).
// With a thread per connection, a server of 1,020 clients made 1,020 threads runnable at once at
// the test's start and end, and its I/O thread's heartbeats waited behind them (bench-scale).
inline std::size_t rpc_serve_threads() {
  return std::max<std::size_t>(64, std::size_t{2} * std::thread::hardware_concurrency());
}

inline constexpr std::uint32_t kRpcMagic = 0x46425052;    // "FBPR": rpc request
inline constexpr std::uint32_t kReplyMagic = 0x46425041;  // "FBPA": rpc reply
inline constexpr std::size_t kRpcHdrSize = 16;
// The rpc header's operation; a request with kOpPing and length 0 is a ping: answered at once,
// counts no data.
inline constexpr std::uint32_t kOpWrite = 1;
inline constexpr std::uint32_t kOpRead = 2;
inline constexpr std::uint32_t kOpPing = 3;
// How long a blocked send/recv waits before its loop looks at the stop flag and the deadlines
// again. Aborts need no tick (engine abort shuts the sockets down, waking every blocked call) and
// a normal end comes with the peer's EOF or a send that returns, so the tick only bounds how late
// a thread tied to a stalled peer notices the end: 1 s. At 200 ms, a thousand idle agents' blocked
// threads woke 25,000 times a second, and on a small VM a wake-up costs ~0.1 ms (bench-scale).
inline constexpr int kTickMs = 1000;
// The sender's drain after the end (watching its queue shrink) looks more often.
inline constexpr int kDrainTickMs = 200;
inline constexpr int kConnectTimeoutMs = 5000;
// From accept (server) or connect (client), the whole data handshake must be done within this.
inline constexpr int kHandshakeTimeoutMs = 5000;
// Receive chunks: the two candidates of the receive-chunk trial (engine/trial.hpp). The kernel's
// copy-out is the receive side's main cost, and which chunk makes it cheapest depends on the host:
// on one machine of this kind a 256 KiB destination that stays in the core's L2 beat a 4 MiB one
// (stream 4 MiB blocks 5212 vs 3350 MB/s on loopback), while iperf2's 1 MiB reads ran ahead of
// 256 KiB on another. Blocks up to the small size are received whole; larger ones try both.
inline constexpr std::size_t kRecvChunkSmall = 256u << 10;
inline constexpr std::size_t kRecvChunkLarge = 1u << 20;
// The pattern's period for blocks larger than this that it divides (TcpEngine::start).
inline constexpr std::size_t kPatternPeriod = 1u << 20;

// ---- tcp_engine.cpp: socket options ------------------------------------------------------
using net::local_text;  // net/sockaddr.hpp
using net::numeric_host;
using net::sockaddr_text;
void set_timeouts(int fd, int ms);  // SO_SNDTIMEO and SO_RCVTIMEO: the loops' tick
// What a connection must have from its first segment, on a client socket before connect() and on
// the listener (accepted sockets inherit it): --congestion, and --socksize with a report, once per
// engine, of what the kernel actually granted.
void prepare_socket(int fd, RunContext& ctx, std::atomic<bool>& warned);
// Applies the test's data-plane tuning to one connection; failures become reported warnings.
void tune_socket(int fd, RunContext& ctx);

// ---- tcp_handshake.cpp: the client's side of the data handshake ---------------------------
// On a connected non-blocking socket, within kHandshakeTimeoutMs: HELLO, the server's proof
// checked, PROOF, the verdict. Returns only when the server proved the key and accepted the
// connection; otherwise throws SystemError "data handshake with WHERE: why".
void client_handshake(int fd, const std::string& where, const proto::Token& client_key, std::string_view test_id,
                      const data_hello::Hello& hello);

}  // namespace fabperf::tcp

namespace fabperf {

// Several tester threads may share one connection (threads > parallel); requests are pipelined
// and the server answers in order, so a receiver thread completes waiters first-in first-out,
// as nsdperf's connection threads do.
struct TcpEngine::RpcConn {
  // Not std::binary_semaphore: its acquire spins with sched_yield first, and a reply is a network
  // round trip away, so on a loaded host those yields only hand the core to other processes.
  struct Waiter {
    std::mutex m;
    std::condition_variable cv;
    bool done{false};
    std::uint32_t op{tcp::kOpWrite};
    bool ok{false};
    // Notified under the lock: the waiter's stack frame may be gone the moment the lock is free.
    void release() {
      std::lock_guard lk(m);
      done = true;
      cv.notify_one();
    }
    void acquire() {
      std::unique_lock lk(m);
      cv.wait(lk, [&] { return done; });
    }
  };
  explicit RpcConn(TcpFlow* f) : flow(f) {}
  TcpFlow* flow;
  std::mutex send_mu;  // one request on the wire at a time (a TCP stream is a single sequence)
  std::mutex q_mu;
  std::deque<Waiter*> pending;
  std::atomic<bool> broken{false};

  // Marks the connection unusable and wakes its receiver, which releases the waiters.
  void break_conn(const std::string& why) {
    if (!why.empty()) flow->fail(why);
    broken = true;
    flow->shutdown_both();
  }
};

}  // namespace fabperf
