// TCP data plane: plain blocking sockets on dedicated threads. Sockets carry a short
// SO_SNDTIMEO/SO_RCVTIMEO "tick" so every blocked call comes back often enough to see the stop
// flag; the loops never allocate, log or throw.
#include "engine/tcp_engine.hpp"
#include "net/listen.hpp"

#include <fabperf/auth.hpp>
#include <fabperf/clock.hpp>
#include <fabperf/error.hpp>
#include <fabperf/links.hpp>
#include <fabperf/sysstat.hpp>
#include <fabperf/units.hpp>

#include <algorithm>
#include <array>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <semaphore>
#include <set>
#include <unordered_set>
#include <map>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <linux/errqueue.h>
#include <unistd.h>

namespace fabperf {
namespace {

constexpr std::uint32_t kDataMagic = 0x46425044;   // "FBPD": data connection hello
constexpr std::uint32_t kRpcMagic = 0x46425052;    // "FBPR": rpc request
constexpr std::uint32_t kReplyMagic = 0x46425041;  // "FBPA": rpc reply
// Data hello (client -> server), 80 bytes:
//   magic | version<<16 | op | client node | connection index | client nonce (32) | mac (32)
//   mac = HMAC(client token, "fabperf-data-hello\0" | server node | the first 48 bytes)
// Data ack (server -> client), 40 bytes:
//   magic | status | mac (32),  mac = HMAC(client token, "fabperf-data-ack\0" | nonce | status)
// The client token (derive_client_token) never crosses the wire, so neither side can be fooled
// by a peer that merely saw a handshake; the ack's mac proves the server holds the test token,
// so a client sends load only to an agent of its own test. A (node, index) is accepted once by
// each server, and the hello names the server it is for (inside the mac), so a hello seen on
// its way to one server is refused by every other (version 3).
constexpr std::uint16_t kDataVersion = 3;
constexpr std::size_t kHelloFields = 16;
constexpr std::size_t kHelloSigned = kHelloFields + auth::kNonceBytes;
constexpr std::size_t kHelloSize = kHelloSigned + auth::kProofBytes;
constexpr std::size_t kAckSigned = 8;
constexpr std::size_t kAckSize = kAckSigned + auth::kProofBytes;
constexpr std::string_view kHelloLabel{"fabperf-data-hello\0", 19};
constexpr std::string_view kAckLabel{"fabperf-data-ack\0", 17};
constexpr std::size_t kRpcHdrSize = 16;
constexpr int kTickMs = 200;
constexpr int kConnectTimeoutMs = 5000;
constexpr int kHandshakeTimeoutMs = 5000;
// Data connections accepted and waiting for their hello at one time (accept_loop).
constexpr std::size_t kMaxPendingHandshakes = 256;
// Receive chunks: the two candidates of the receive-chunk trial (engine/trial.hpp). The kernel's
// copy-out is the receive side's main cost, and which chunk makes it cheapest depends on the host:
// on one machine of this kind a 256 KiB destination that stays in the core's L2 beat a 4 MiB one
// (stream 4 MiB blocks 5212 vs 3350 MB/s on loopback), while iperf2's 1 MiB reads ran ahead of
// 256 KiB on another. Blocks up to the small size are received whole; larger ones try both.
constexpr std::size_t kRecvChunkSmall = 256u << 10;
constexpr std::size_t kRecvChunkLarge = 1u << 20;
// The pattern's period for blocks larger than this that it divides (ensure_tx_buffer).
constexpr std::size_t kPatternPeriod = 1u << 20;

enum WireOp : std::uint32_t { kOpWrite = 1, kOpRead = 2, kOpRpc = 3, kOpProbe = 4 };
// An rpc request with this op and length 0 is a ping: answered at once, counts no data.
constexpr std::uint32_t kOpPing = 3;
constexpr std::int64_t kProbePeriodNs = 10'000'000;
enum AckStatus : std::uint32_t { kAckOk = 0, kAckBadHello = 1, kAckBadToken = 2, kAckTooMany = 3, kAckDuplicate = 4 };

std::span<const std::uint8_t> label_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}
auth::Proof hello_mac(const proto::Token& client_token, std::uint32_t server_node, const std::uint8_t* hello) {
  const std::array<std::uint8_t, 4> server{static_cast<std::uint8_t>(server_node >> 24), static_cast<std::uint8_t>(server_node >> 16),
                                          static_cast<std::uint8_t>(server_node >> 8), static_cast<std::uint8_t>(server_node)};
  return auth::hmac_sha256(client_token, {label_bytes(kHelloLabel), server, std::span<const std::uint8_t>(hello, kHelloSigned)});
}
auth::Proof ack_mac(const proto::Token& client_token, const std::uint8_t* nonce, const std::uint8_t* ack) {
  return auth::hmac_sha256(client_token, {label_bytes(kAckLabel), std::span<const std::uint8_t>(nonce, auth::kNonceBytes),
                                          std::span<const std::uint8_t>(ack, kAckSigned)});
}

void put32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}
std::uint32_t get32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}
void put64(std::uint8_t* p, std::uint64_t v) {
  put32(p, static_cast<std::uint32_t>(v >> 32));
  put32(p + 4, static_cast<std::uint32_t>(v));
}
std::uint64_t get64(const std::uint8_t* p) { return (std::uint64_t{get32(p)} << 32) | get32(p + 4); }

std::string sockaddr_text(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {};
  std::uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
    return fmt::format("{}:{}", host, port);
  }
  const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
  inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
  port = ntohs(a->sin6_port);
  return fmt::format("[{}]:{}", host, port);
}

std::string numeric_host(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, host, sizeof host);
  } else if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, host, sizeof host);
  }
  return host;
}

void set_port(sockaddr* sa, std::uint16_t port) {
  if (sa->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(sa)->sin_port = htons(port);
  if (sa->sa_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(sa)->sin6_port = htons(port);
}

std::string local_text(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_text(ss);
}

void set_timeouts(int fd, int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

std::uint64_t read_sysctl(const char* path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  in >> v;
  return v;
}

// Applies --socksize and reports, once per engine, what the kernel actually granted.
void apply_socksize(int fd, RunContext& ctx, std::atomic<bool>& warned) {
  const auto want = ctx.spec().socksize();
  if (want == 0) return;
  const int v = static_cast<int>(want);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
  int snd = 0, rcv = 0;
  socklen_t len = sizeof snd;
  getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &len);
  len = sizeof rcv;
  getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &len);
  // Linux doubles the requested value for bookkeeping; half of what it reports is usable data.
  const auto snd_got = static_cast<std::uint64_t>(snd) / 2;
  const auto rcv_got = static_cast<std::uint64_t>(rcv) / 2;
  if ((snd_got < want || rcv_got < want) && !warned.exchange(true)) {
    ctx.warn(fmt::format(
        "socksize {}: the kernel clamped SO_SNDBUF to {} and SO_RCVBUF to {} (net.core.wmem_max={}, "
        "net.core.rmem_max={}); raise them with sysctl to get the requested size",
        format_size(want), format_size(snd_got), format_size(rcv_got), read_sysctl("/proc/sys/net/core/wmem_max"),
        read_sysctl("/proc/sys/net/core/rmem_max")));
  }
}

// Applies the test's data-plane tuning to one connection; failures become reported warnings
// (the kernel lacks the feature, or the value is refused), never silent changes.
void tune_socket(int fd, RunContext& ctx) {
  const TestSpec& spec = ctx.spec();
  auto opt = [&](int level, int name, const void* v, socklen_t len, const std::string& what) {
    if (setsockopt(fd, level, name, v, len) != 0) ctx.warn(fmt::format("{}: refused by the kernel ({})", what, errno_text(errno)));
  };
  if (!spec.congestion().empty()) {
    opt(IPPROTO_TCP, TCP_CONGESTION, spec.congestion().data(), static_cast<socklen_t>(spec.congestion().size()),
        fmt::format("--congestion {} (see /proc/sys/net/ipv4/tcp_available_congestion_control)", spec.congestion()));
  }
  if (spec.rate() != 0) {
    const std::uint64_t r = spec.rate();
    opt(SOL_SOCKET, SO_MAX_PACING_RATE, &r, sizeof r, fmt::format("--rate {} B/s", r));
  }
  if (spec.busy_poll_us() != 0) {
    const int v = static_cast<int>(spec.busy_poll_us());
    opt(SOL_SOCKET, SO_BUSY_POLL, &v, sizeof v, fmt::format("--busy-poll {} us (needs CAP_NET_ADMIN above net.core.busy_poll)", v));
  }
  if (spec.notsent_lowat() != 0) {
    const int v = static_cast<int>(spec.notsent_lowat());
    opt(IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof v, fmt::format("--notsent-lowat {}", v));
  }
  if (spec.zerocopy()) {
    const int one = 1;
    opt(SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one, "--zerocopy (SO_ZEROCOPY)");
  }
}

// Drains MSG_ZEROCOPY completions (they pile up in the error queue and count against optmem).
// The send buffer never changes, so completions need no matching: only draining. Returns false
// when the kernel reported that it copied the data anyway (loopback and veth do).
bool reap_zerocopy(int fd) {
  bool zero = true;
  for (;;) {
    char control[128];
    msghdr msg{};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (::recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) break;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
      if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
            (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR))) {
        continue;
      }
      sock_extended_err ee{};
      std::memcpy(&ee, CMSG_DATA(cm), sizeof ee);
      if (ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && (ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED)) zero = false;
    }
  }
  return zero;
}

// Writes n bytes with op(done) (one send/sendfile call for the bytes after `done`), retrying
// ticks. Gives up at the hard deadline or on abort: an rpc sender must finish its block.
template <typename Op, typename Count>
bool write_all(std::size_t n, const RunContext& ctx, Count&& count, int& err, Op&& op) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t k = op(done);
    if (k > 0) {
      count(static_cast<std::uint64_t>(k));
      done += static_cast<std::size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (ctx.aborted() || mono_now_ns() > ctx.hard_deadline()) {
        err = ETIMEDOUT;
        return false;
      }
      continue;
    }
    err = k < 0 ? errno : EPIPE;
    return false;
  }
  return true;
}

template <typename Count>
bool send_all(int fd, const std::uint8_t* p, std::size_t n, const RunContext& ctx, Count&& count, int& err, int flags = 0) {
  return write_all(n, ctx, count, err, [&](std::size_t done) { return ::send(fd, p + done, n - done, MSG_NOSIGNAL | flags); });
}

// Sends one whole rpc block: with sendfile(2) from the memfd holding one period of the pattern
// when there is one (no copy from user space; the block is that period repeated), else from the
// pattern buffer.
template <typename Count>
bool send_block(int fd, int memfd, std::size_t period, const std::uint8_t* p, std::size_t n, const RunContext& ctx, Count&& count,
                int& err) {
  if (memfd < 0) return send_all(fd, p, n, ctx, count, err);
  return write_all(n, ctx, count, err, [&](std::size_t done) {
    const std::size_t at = done % period;
    off_t pos = static_cast<off_t>(at);
    return ::sendfile(fd, memfd, &pos, std::min(n - done, period - at));
  });
}

// Receives exactly n bytes. Returns 1 on success, 0 on a clean EOF before the first byte, -1 on
// error (err set; EPIPE for EOF mid-message).
template <typename Count>
int recv_exact(int fd, std::uint8_t* p, std::size_t n, const RunContext& ctx, Count&& count, int& err, int flags = 0) {
  std::size_t got = 0;
  while (got < n) {
    // With MSG_TRUNC the kernel consumes the bytes without copying them (p is not written).
    const ssize_t k = ::recv(fd, p + got, n - got, flags);
    if (k > 0) {
      count(static_cast<std::uint64_t>(k));
      got += static_cast<std::size_t>(k);
      continue;
    }
    if (k == 0) {
      if (got == 0) return 0;
      err = EPIPE;
      return -1;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (ctx.aborted() || mono_now_ns() > ctx.hard_deadline()) {
        err = ETIMEDOUT;
        return -1;
      }
      continue;
    }
    err = errno;
    return -1;
  }
  return 1;
}

std::string err_text(int err) {
  if (err == ETIMEDOUT) return "peer stalled: no progress before the deadline";
  if (err == EPIPE) return "connection closed by peer mid-message";
  return errno_text(err);
}

// Blocking handshake helpers used only during set-up (deadline in ms via poll).
bool io_exact(int fd, std::uint8_t* p, std::size_t n, bool sending, int timeout_ms) {
  const std::int64_t deadline = mono_now_ns() + std::int64_t{timeout_ms} * 1'000'000;
  std::size_t done = 0;
  while (done < n) {
    const auto left_ms = static_cast<int>((deadline - mono_now_ns()) / 1'000'000);
    if (left_ms <= 0) {
      errno = ETIMEDOUT;
      return false;
    }
    pollfd pfd{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
    const int pr = ::poll(&pfd, 1, left_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      errno = pr == 0 ? ETIMEDOUT : errno;
      return false;
    }
    const ssize_t k = sending ? ::send(fd, p + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                              : ::recv(fd, p + done, n - done, MSG_DONTWAIT);
    if (k > 0) {
      done += static_cast<std::size_t>(k);
    } else if (k == 0) {
      errno = ECONNRESET;
      return false;
    } else if (errno != EAGAIN && errno != EINTR) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::uint64_t estimate_buffer_memory(const TestSpec& spec, std::uint64_t flows) {
  return spec.buffsize() + flows * std::min<std::uint64_t>(spec.buffsize(), kRecvChunkLarge);
}

// ---- TcpFlow ------------------------------------------------------------------------------

TcpFlow::TcpFlow(int fd, FlowRole r, FlowOp o, std::uint32_t peer, std::string local_addr, std::string remote_addr)
    : Flow(r, o, peer, std::move(local_addr), std::move(remote_addr)), fd_(fd) {}

TcpFlow::~TcpFlow() {
  if (fd_ >= 0) ::close(fd_);
}

TcpSample TcpFlow::sample_transport() const {
  TcpSample s;
  tcp_info ti{};
  socklen_t len = sizeof ti;
  if (getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return s;
  s.valid = true;
  s.total_retrans = ti.tcpi_total_retrans;
  s.rtt_us = ti.tcpi_rtt;
  s.rttvar_us = ti.tcpi_rttvar;
  s.snd_mss = ti.tcpi_snd_mss;
  s.rcv_mss = ti.tcpi_rcv_mss;
  s.pmtu = ti.tcpi_pmtu;
  s.snd_cwnd = ti.tcpi_snd_cwnd;
  return s;
}

void TcpFlow::shutdown_both() noexcept { ::shutdown(fd_, SHUT_RDWR); }

// ---- rpc client connection -------------------------------------------------------------

// Several tester threads may share one connection (threads > parallel); requests are pipelined
// and the server answers in order, so a receiver thread completes waiters first-in first-out,
// as nsdperf's connection threads do.
struct TcpEngine::RpcConn {
  struct Waiter {
    std::binary_semaphore done{0};
    std::uint32_t op{kOpWrite};
    bool ok{false};
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

TcpEngine::TcpEngine() = default;

TcpEngine::~TcpEngine() {
  abort();
  join();
  if (tx_memfd_ >= 0) ::close(tx_memfd_);
}

// The pattern repeats every `period` bytes (a divisor of the block size), so sendfile can send
// any block from one period in a memfd: the source pages stay cache-hot like iperf's single
// buffer, whatever --buffsize is. Receivers compare against tx_buf_ at the block offset, which
// holds the same repeating bytes, so --verify is unchanged.
void TcpEngine::ensure_tx_buffer(std::size_t n, std::size_t period) {
  tx_buf_.resize(n);
  tx_period_ = period;
  // A non-constant pattern so nothing along the path can shortcut zero pages.
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = i % period;
    tx_buf_[i] = static_cast<std::uint8_t>((k * 131) ^ (k >> 9));
  }
}

std::uint16_t TcpEngine::prepare_server(RunContext& ctx, const ServerPlan& plan) {
  ctx_ = &ctx;
  server_plan_ = plan;
  // Socket buffer sizes set on the listener are inherited by accepted sockets.
  const auto l = net::listen_any_port(plan.bind_address, 4096, "data",
                                      [&](int fd) { apply_socksize(fd, ctx, socksize_warned_); });
  listen_fd_ = l.fd;
  const std::uint16_t port = l.port;
  accept_thread_ = std::thread([this] { accept_loop(); });
  return port;
}

// Data handshakes run concurrently on this one thread: every accepted connection waits for its
// hello in a poll set, so a client that is slow to send it (or never does) holds one slot until
// its own deadline instead of holding up every connection behind it. At 512 agents each server
// gets ~1000 connections in one burst; one at a time, clients at the back of the queue missed
// their 5 s deadline on a loaded host (docs/performance.md). The checks and the bookkeeping
// (seen, accepted) stay single-threaded. The bound keeps a flood of silent connections from
// using up descriptors; past it, new connections wait in the listen backlog.
void TcpEngine::accept_loop() {
  RunContext& ctx = *ctx_;
  std::uint32_t accepted = 0;
  std::unordered_set<std::uint64_t> seen;  // (client node, connection index) already accepted
  seen.reserve(server_plan_.expect_connections);
  struct Pending {
    int fd{-1};
    std::string remote;
    std::int64_t deadline_ns{0};
    std::size_t got{0};
    std::array<std::uint8_t, kHelloSize> hello{};
  };
  std::vector<Pending> pending;
  std::vector<pollfd> pfds;
  // Non-blocking listener: the accept loop below takes what the backlog holds and no more.
  fcntl(listen_fd_, F_SETFL, fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);

  // The hello is complete: every check, then the ack; the flow is registered before this returns,
  // so seal() (which joins this thread) never misses a connection whose ack was sent.
  auto handshake = [&](Pending& p) {
    const int fd = p.fd;
    const std::string& remote = p.remote;
    const std::uint8_t* hello = p.hello.data();
    std::uint8_t ack[kAckSize] = {};
    put32(ack, kDataMagic);
    // A fresh connection's send buffer is empty: the 40-byte ack never waits.
    auto send_ack = [&] { return ::send(fd, ack, sizeof ack, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof ack); };
    auto reject = [&](AckStatus st, const std::string& why) {
      put32(ack + 4, st);
      send_ack();
      ::close(fd);
      spdlog::warn("rejected data connection from {}: {}", remote, why);
    };
    if (get32(hello) != kDataMagic || (get32(hello + 4) >> 16) != kDataVersion) {
      reject(kAckBadHello, "not a fabperf data hello of this version");
      return;
    }
    const std::uint32_t op = get32(hello + 4) & 0xffff;
    const std::uint32_t client_node = get32(hello + 8);
    const std::uint32_t conn_index = get32(hello + 12);
    const proto::Token client_token = derive_client_token(server_plan_.token, client_node);
    const auth::Proof want = hello_mac(client_token, ctx.node_index(), hello);
    if (CRYPTO_memcmp(want.data(), hello + kHelloSigned, want.size()) != 0) {
      reject(kAckBadToken, "no valid proof of this test's token");
      return;
    }
    const std::uint64_t key = (std::uint64_t{client_node} << 32) | conn_index;
    if (seen.count(key) != 0) {
      reject(kAckDuplicate, fmt::format("client {} connection {} already connected (replayed hello?)", client_node, conn_index));
      return;
    }
    const bool op_ok = op == kOpProbe ||
                       (ctx.spec().mode() == Mode::rpc ? op == kOpRpc : (op == kOpWrite || op == kOpRead));
    if (!op_ok) {
      reject(kAckBadHello, fmt::format("operation {} does not match the test", op));
      return;
    }
    if (accepted >= server_plan_.expect_connections) {
      reject(kAckTooMany, "more connections than the test has");
      return;
    }
    put32(ack + 4, kAckOk);
    const auth::Proof mac = ack_mac(client_token, hello + kHelloFields, ack);
    std::memcpy(ack + kAckSigned, mac.data(), mac.size());
    if (!send_ack()) {
      spdlog::warn("data connection from {}: ack not sent ({})", remote, errno_text(errno));
      ::close(fd);
      return;
    }
    const FlowOp fop = op == kOpProbe ? FlowOp::probe
                       : op == kOpRpc ? FlowOp::rpc
                                      : (op == kOpWrite ? FlowOp::write : FlowOp::read);
    // Back to blocking with a tick, for the data loops.
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    set_timeouts(fd, kTickMs);
    auto flow = std::make_unique<TcpFlow>(fd, FlowRole::server, fop, client_node, local_text(fd), remote);
    auto* raw = flow.get();
    ctx.add_flow(std::move(flow));
    {
      std::lock_guard lk(mu_);
      server_flows_.push_back(raw);
    }
    seen.insert(key);
    ++accepted;
  };

  std::int64_t accept_paused_until = 0;  // out of descriptors: accept again after a pause
  while (!accept_stop_.load() && !ctx.aborted()) {
    const bool room = pending.size() < kMaxPendingHandshakes && mono_now_ns() >= accept_paused_until;
    pfds.clear();
    pfds.push_back({room ? listen_fd_ : -1, POLLIN, 0});  // poll ignores a negative fd
    for (const auto& p : pending) pfds.push_back({p.fd, POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), 100) < 0) continue;
    const std::int64_t now = mono_now_ns();
    std::size_t keep = 0;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      Pending& p = pending[i];
      bool done = false;
      if (pfds[i + 1].revents != 0) {
        const ssize_t k = ::recv(p.fd, p.hello.data() + p.got, kHelloSize - p.got, MSG_DONTWAIT);
        if (k > 0) {
          p.got += static_cast<std::size_t>(k);
          if (p.got == kHelloSize) {
            handshake(p);
            done = true;
          }
        } else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          const int e = k == 0 ? ECONNRESET : errno;
          ::close(p.fd);
          spdlog::warn("data connection from {}: no hello ({})", p.remote, errno_text(e));
          done = true;
        }
      }
      if (!done && now >= p.deadline_ns) {
        ::close(p.fd);
        spdlog::warn("data connection from {}: no hello ({})", p.remote, errno_text(ETIMEDOUT));
        done = true;
      }
      if (!done) {
        if (keep != i) pending[keep] = std::move(p);
        ++keep;
      }
    }
    pending.resize(keep);
    if (room && (pfds[0].revents & POLLIN) != 0) {
      // Everything the backlog holds, up to the bound: a burst is taken in at once.
      while (pending.size() < kMaxPendingHandshakes) {
        sockaddr_storage peer{};
        socklen_t plen = sizeof peer;
        const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &plen, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          // EMFILE and friends leave the connection in the backlog, so the listener stays
          // readable: polling it again at once would spin. Pause it for 100 ms instead.
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            accept_paused_until = now + 100'000'000;
          }
          break;
        }
        Pending p;
        p.fd = fd;
        p.remote = sockaddr_text(peer);
        p.deadline_ns = now + std::int64_t{kHandshakeTimeoutMs} * 1'000'000;
        pending.push_back(std::move(p));
      }
    }
  }
  // The test is sealed (or aborted): every client of the test has its ack by now, so what is still
  // waiting for a hello is not one of its connections.
  for (const auto& p : pending) ::close(p.fd);
}

int TcpEngine::connect_one(const proto::Target& t, FlowOp op, std::uint32_t conn_index, std::uint32_t pair_conn,
                           const ClientPlan& plan) {
  RunContext& ctx = *ctx_;
  // Per-link pinning: the pair's connection c uses link c mod L on both ends.
  const std::string& host = t.link_hosts.empty() ? t.host : t.link_hosts[pair_conn % t.link_hosts.size()];
  const std::string source = plan.source_addrs.empty() ? "" : plan.source_addrs[pair_conn % plan.source_addrs.size()];
  const std::string where = host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, t.port)
                                                                 : fmt::format("{}:{}", host, t.port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(t.port);
  const int gai = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (gai != 0) throw SystemError("resolve data address", where, gai_strerror(gai));
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    throw SystemError("socket for", where, errno);
  }
  if (!bind_devs_.empty()) {
    const std::string& dev = bind_devs_[pair_conn % bind_devs_.size()];
    if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev.c_str(), static_cast<socklen_t>(dev.size())) != 0) {
      const int e = errno;
      freeaddrinfo(res);
      ::close(fd);
      if (e == EPERM) {
        throw SystemError("--bind-dev", dev, "SO_BINDTODEVICE needs CAP_NET_RAW here: run the agent as root or grant it cap_net_raw");
      }
      throw SystemError("--bind-dev: bind data connection to device", dev, e);
    }
  }
  std::string bind_addr = source;
  std::optional<std::uint16_t> bind_port;
  if (ctx.spec().spread_ports() && op != FlowOp::probe) {
    // The kernel's choice of source address, asked without sending anything (UDP connect).
    std::string src_ip = source;
    if (src_ip.empty()) {
      const int u = ::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      if (u >= 0 && ::connect(u, res->ai_addr, res->ai_addrlen) == 0 &&
          getsockname(u, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
        src_ip = numeric_host(ss);
      }
      if (u >= 0) ::close(u);
    }
    sockaddr_storage dst{};
    std::memcpy(&dst, res->ai_addr, std::min<std::size_t>(res->ai_addrlen, sizeof dst));
    if (!src_ip.empty()) {
      bind_addr = src_ip;
      bind_port = spread_port(src_ip, numeric_host(dst), t.port, 0);
    }
  }
  if (!bind_addr.empty()) {
    addrinfo sh{};
    sh.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
    sh.ai_family = res->ai_family;
    sh.ai_socktype = SOCK_STREAM;
    addrinfo* src = nullptr;
    const int g2 = getaddrinfo(bind_addr.c_str(), "0", &sh, &src);
    int b = -1;
    int e = 0;
    if (g2 == 0) {
      if (bind_port) {
        // A chosen port may be in use (or in TIME_WAIT from an earlier test): take the next one
        // that lands on the same member.
        const int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_storage dst{};
        std::memcpy(&dst, res->ai_addr, std::min<std::size_t>(res->ai_addrlen, sizeof dst));
        for (int attempt = 0; attempt < 64 && bind_port; ++attempt) {
          set_port(src->ai_addr, *bind_port);
          b = ::bind(fd, src->ai_addr, src->ai_addrlen);
          e = errno;
          if (b == 0 || e != EADDRINUSE) break;
          spread_port_taken(bind_addr, *bind_port);
          bind_port = spread_port(bind_addr, numeric_host(dst), t.port, attempt + 1);
        }
      }
      if (!bind_port) {
        b = ::bind(fd, src->ai_addr, src->ai_addrlen);
        e = errno;
      }
    }
    if (src) freeaddrinfo(src);
    if (g2 != 0 || b != 0) {
      freeaddrinfo(res);
      ::close(fd);
      throw SystemError(bind_port ? "bind data connection to spread port on" : "bind data connection to link address",
                        bind_port ? fmt::format("{}:{}", bind_addr, *bind_port) : bind_addr,
                        g2 != 0 ? std::string(gai_strerror(g2)) : errno_text(e));
    }
  }
  apply_socksize(fd, ctx, socksize_warned_);
  if (ctx.spec().mode() == Mode::rpc) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd pfd{fd, POLLOUT, 0};
    rc = ::poll(&pfd, 1, kConnectTimeoutMs);
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (rc == 0) {
      ::close(fd);
      throw SystemError("data connection to", where, "connect timed out after 5 s (firewall?)");
    }
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
    if (soerr != 0) {
      ::close(fd);
      throw SystemError("data connection to", where, soerr);
    }
  } else if (rc != 0) {
    const int e = errno;
    ::close(fd);
    throw SystemError("data connection to", where, e);
  }
  std::uint8_t hello[kHelloSize] = {};
  const std::uint32_t wop = op == FlowOp::probe ? kOpProbe
                            : op == FlowOp::rpc ? kOpRpc
                                                : (op == FlowOp::write ? kOpWrite : kOpRead);
  put32(hello, kDataMagic);
  put32(hello + 4, (std::uint32_t{kDataVersion} << 16) | wop);
  put32(hello + 8, ctx.node_index());
  put32(hello + 12, conn_index);
  const auth::Nonce nonce = auth::make_nonce();
  std::memcpy(hello + kHelloFields, nonce.data(), nonce.size());
  const auth::Proof mac = hello_mac(plan.token, t.node_index, hello);
  std::memcpy(hello + kHelloSigned, mac.data(), mac.size());
  std::uint8_t ack[kAckSize];
  if (!io_exact(fd, hello, sizeof hello, true, kHandshakeTimeoutMs) ||
      !io_exact(fd, ack, sizeof ack, false, kHandshakeTimeoutMs)) {
    const int e = errno;
    ::close(fd);
    throw SystemError("data handshake with", where,
                      fmt::format("no answer from a fabperf agent of this test ({}); not an agent of this test?",
                                  errno_text(e)));
  }
  if (get32(ack) != kDataMagic) {
    ::close(fd);
    throw SystemError("data handshake with", where, "the peer is not a fabperf agent (no data ack); no load sent");
  }
  if (get32(ack + 4) != kAckOk) {
    ::close(fd);
    static constexpr const char* kWhy[] = {"ok", "hello not understood", "token rejected", "too many connections",
                                           "duplicate connection"};
    const auto st = get32(ack + 4);
    throw SystemError("data handshake with", where,
                      fmt::format("server refused the connection: {}", st < 5 ? kWhy[st] : "unknown status"));
  }
  const auth::Proof want = ack_mac(plan.token, nonce.data(), ack);
  if (CRYPTO_memcmp(want.data(), ack + kAckSigned, want.size()) != 0) {
    ::close(fd);
    throw SystemError("data handshake with", where,
                      "the peer did not prove it is an agent of this test (wrong ack proof); no load sent");
  }
  // Back to blocking with a tick, for the data loops.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  set_timeouts(fd, kTickMs);
  return fd;
}

// --bind-dev: one device per link, every one checked before any connection opens.
static std::vector<std::string> resolve_bind_devs(const ClientPlan& plan) {
  std::vector<std::string> out;
  if (plan.bind_devs.size() == 1 && plan.bind_devs.front() == "auto") {
    if (plan.source_addrs.empty()) {
      throw UsageError("--bind-dev auto: this client has no link addresses (give it as NAME@ADDR+ADDR)");
    }
    for (const auto& a : plan.source_addrs) {
      std::string dev = interface_of_address(a);
      if (dev.empty()) {
        throw UsageError(fmt::format("--bind-dev auto: no interface of {} owns link address {}", local_hostname(), a));
      }
      out.push_back(std::move(dev));
    }
    return out;
  }
  for (const auto& d : plan.bind_devs) {
    if (::if_nametoindex(d.c_str()) == 0) {
      throw UsageError(fmt::format("--bind-dev {}: no such network interface on {}", d, local_hostname()));
    }
    out.push_back(d);
  }
  return out;
}

std::optional<std::uint16_t> TcpEngine::spread_port(const std::string& src_ip, const std::string& dst_ip,
                                                    std::uint16_t dst_port, int attempt) {
  auto it = spread_.find(src_ip);
  if (it == spread_.end()) {
    Spread sp;
    const std::string iface = interface_of_address(src_ip);
    const auto bond = read_bond(iface);
    const auto policy = bond ? parse_hash_policy(bond->hash_policy) : std::nullopt;
    const int members = bond ? static_cast<int>(usable_members(*bond).size()) : 0;
    if (!bond) {
      ctx_->warn(fmt::format("--spread-ports: {} leaves on {}, which is not a bond: ports left to the kernel", src_ip,
                             iface.empty() ? "an unknown interface" : iface));
    } else if (!bond_hashes(*bond) || !policy || !policy_uses_ports(*policy)) {
      ctx_->warn(fmt::format("--spread-ports: bond {} ({}{}) does not choose members by port: ports left to the kernel",
                             bond->name, bond->mode, bond->hash_policy.empty() ? "" : ", " + bond->hash_policy));
    } else if (members < 1) {
      ctx_->warn(fmt::format("--spread-ports: bond {} has no usable member: ports left to the kernel", bond->name));
    } else {
      sp.bond = bond->name;
      sp.policy = *policy;
      sp.members = members;
    }
    it = spread_.emplace(src_ip, std::move(sp)).first;
  }
  Spread& sp = it->second;
  if (sp.bond.empty()) return std::nullopt;
  // A retry after EADDRINUSE stays on the member the first attempt aimed at.
  const int member = static_cast<int>((attempt == 0 ? sp.next++ : sp.next - 1) % static_cast<std::uint32_t>(sp.members));
  FlowHeaders h;
  h.src_ip = src_ip;
  h.dst_ip = dst_ip;
  h.dst_port = dst_port;
  // Below the default ephemeral range (32768-60999), so the kernel's own choices do not collide.
  const auto port = port_for_member(sp.policy, h, member, sp.members, 10000, 32767, sp.taken);
  if (port) sp.taken.push_back(*port);
  return port;
}

void TcpEngine::spread_port_taken(const std::string& src_ip, std::uint16_t port) {
  auto it = spread_.find(src_ip);
  if (it != spread_.end() && std::find(it->second.taken.begin(), it->second.taken.end(), port) == it->second.taken.end()) {
    it->second.taken.push_back(port);
  }
}

void TcpEngine::prepare_client(RunContext& ctx, const ClientPlan& plan) {
  // An agent that serves and loads in one test set ctx_ in prepare_server, and its accept thread
  // reads it from then on: writing it again, even the same value, would race with that read.
  if (ctx_ != &ctx) ctx_ = &ctx;
  bind_devs_ = resolve_bind_devs(plan);
  const TestSpec& spec = ctx.spec();
  const std::uint32_t per_pair = spec.connections_per_pair();
  std::uint32_t conn_index = 0;
  for (const auto& t : plan.targets) {
    std::vector<RpcConn*> row;
    for (std::uint32_t c = 0; c < per_pair; ++c) {
      FlowOp op = FlowOp::rpc;
      if (spec.mode() == Mode::stream) {
        op = is_write_like(spec.test())  ? FlowOp::write
             : spec.test() != TestKind::rw ? FlowOp::read
                                             : (c % 2 == 0 ? FlowOp::write : FlowOp::read);
      }
      const int fd = connect_one(t, op, conn_index++, c, plan);
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      auto flow = std::make_unique<TcpFlow>(fd, FlowRole::client, op, t.node_index, local_text(fd), sockaddr_text(ss));
      if (!bind_devs_.empty()) flow->device = bind_devs_[c % bind_devs_.size()];
      auto* raw = flow.get();
      ctx.add_flow(std::move(flow));
      std::lock_guard lk(mu_);
      client_flows_.push_back(raw);
      if (spec.mode() == Mode::rpc) {
        rpc_conns_.push_back(std::make_unique<RpcConn>(raw));
        row.push_back(rpc_conns_.back().get());
      }
    }
    if (spec.mode() == Mode::rpc) rpc_table_.push_back(std::move(row));
    // One more connection per server for delay pings; it carries no test data.
    const int pfd = connect_one(t, FlowOp::probe, conn_index++, 0, plan);
    const int one = 1;
    setsockopt(pfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_storage pss{};
    socklen_t plen = sizeof pss;
    getpeername(pfd, reinterpret_cast<sockaddr*>(&pss), &plen);
    auto probe = std::make_unique<TcpFlow>(pfd, FlowRole::client, FlowOp::probe, t.node_index, local_text(pfd), sockaddr_text(pss));
    auto* praw = probe.get();
    ctx.add_flow(std::move(probe));
    std::lock_guard lk(mu_);
    client_flows_.push_back(praw);
    probe_flows_.push_back(praw);
  }
  if (spec.mode() == Mode::rpc) {
    for (std::uint32_t t = 0; t < spec.threads(); ++t) tester_hist_.push_back(&ctx.add_histogram());
  }
  // Bond sanity before the test: what the flows leave on, and how many peers each bond talks to.
  std::map<std::string, std::set<std::string>> bond_peers;
  std::map<std::string, bool> is_bond;
  for (const auto* f : client_flows_) {
    const std::string iface = interface_of_address(f->local);
    auto it = is_bond.find(iface);
    if (it == is_bond.end()) it = is_bond.emplace(iface, read_bond(iface).has_value()).first;
    if (it->second) bond_peers[iface].insert(f->remote.substr(0, f->remote.rfind(':')));
  }
  for (const auto& [iface, peers] : bond_peers) {
    if (const auto b = read_bond(iface)) {
      for (const auto& w : bond_findings(*b, static_cast<int>(peers.size()))) ctx.warn(w);
    }
  }
}

void TcpEngine::seal(RunContext& ctx) {
  ctx_ = &ctx;
  // The accept loop finishes the connection in hand (ack sent, flow registered) before it exits.
  accept_stop_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
}

void TcpEngine::start(RunContext& ctx) {
  seal(ctx);
  const TestSpec& spec = ctx.spec();
  const std::size_t block = spec.buffsize();
  ensure_tx_buffer(block, block > kPatternPeriod && block % kPatternPeriod == 0 ? kPatternPeriod : block);
  const bool tcp_auto = spec.send_method() == SendMethod::automatic;
  if ((spec.send_method() == SendMethod::sendfile || tcp_auto) && tx_memfd_ < 0) {
    // One period of tx_buf_'s pattern, so receivers verify sendfile data exactly as written data.
    const int mfd = ::memfd_create("fabperf-tx", MFD_CLOEXEC);
    if (mfd < 0) throw SystemError("--send-method sendfile: memfd_create", "fabperf-tx", errno);
    std::size_t done = 0;
    while (done < tx_period_) {
      const ssize_t w = ::write(mfd, tx_buf_.data() + done, tx_period_ - done);
      if (w <= 0) {
        const int e = errno;
        ::close(mfd);
        throw SystemError("--send-method sendfile: fill memfd", "fabperf-tx", e);
      }
      done += static_cast<std::size_t>(w);
    }
    tx_memfd_ = mfd;
  }
  // The warm-up hosts the trials, one after the other so that each compares its candidates with
  // the other choice held still: the send method first (after one settle slice: slow start),
  // then the receive chunk; a trial alone gets the whole warm-up.
  const bool recv_choice = spec.transport() == Transport::tcp && spec.buffsize() > kRecvChunkSmall;
  if (!send_trial_ && !recv_trial_) {
    const Schedule& sch = ctx.schedule();
    const std::int64_t mid = tcp_auto && recv_choice ? sch.start_at + (sch.window_open - sch.start_at) / 2 : sch.window_open;
    if (tcp_auto) {
      send_trial_ = std::make_unique<ArmTrial>("send method", std::array<std::string, 2>{"write", "sendfile"}, sch.start_at,
                                               mid, true);
    }
    if (recv_choice) {
      const auto sizes = recv_chunks(spec);
      recv_trial_ = std::make_unique<ArmTrial>("receive chunk",
                                               std::array<std::string, 2>{format_size(sizes[0]), format_size(sizes[1])},
                                               tcp_auto ? mid : sch.start_at, sch.window_open, !tcp_auto);
    }
  }
  std::lock_guard lk(mu_);
  for (TcpFlow* f : server_flows_) {
    if (f->op == FlowOp::rpc || f->op == FlowOp::probe) {
      threads_.emplace_back([this, f] { rpc_server(*f); });
    } else if (f->op == FlowOp::write) {
      threads_.emplace_back([this, f] { stream_receive(*f); });
    } else {
      threads_.emplace_back([this, f] { stream_send(*f); });
    }
  }
  if (!probe_flows_.empty()) {
    ctx.mark_delay();
    threads_.emplace_back([this] { probe_loop(); });
  }
  if (spec.mode() == Mode::stream) {
    for (TcpFlow* f : client_flows_) {
      if (f->op == FlowOp::probe) continue;
      if (f->op == FlowOp::write) {
        threads_.emplace_back([this, f] { stream_send(*f); });
      } else {
        threads_.emplace_back([this, f] { stream_receive(*f); });
      }
    }
  } else if (!rpc_table_.empty()) {
    for (auto& c : rpc_conns_) {
      RpcConn* conn = c.get();
      receivers_.emplace_back([this, conn] { rpc_receiver(*conn); });
    }
    for (std::uint32_t t = 0; t < spec.threads(); ++t) {
      testers_.emplace_back([this, t] { rpc_tester(t); });
    }
  }
}

void TcpEngine::abort() noexcept {
  accept_stop_ = true;
  std::lock_guard lk(mu_);
  for (TcpFlow* f : server_flows_) f->shutdown_both();
  for (TcpFlow* f : client_flows_) f->shutdown_both();
}

void TcpEngine::join() {
  accept_stop_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  for (auto& t : testers_) {
    if (t.joinable()) t.join();
  }
  testers_.clear();
  // All testers are done: tell each server no more requests will come, then wait for the replies
  // still in flight and the server's close.
  for (auto& c : rpc_conns_) ::shutdown(c->flow->fd(), SHUT_WR);
  for (auto& t : receivers_) {
    if (t.joinable()) t.join();
  }
  receivers_.clear();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
}

ArmPicker TcpEngine::send_picker() const {
  // A trial only where the user left the choice to the host (auto); zerocopy sends from the
  // buffer (arm 0) with MSG_ZEROCOPY.
  return ArmPicker(send_trial_.get(), ctx_->spec().send_method() == SendMethod::sendfile ? 1 : 0);
}

std::array<std::size_t, 2> TcpEngine::recv_chunks(const TestSpec& spec) {
  const auto block = static_cast<std::size_t>(spec.buffsize());
  return {std::min(block, kRecvChunkSmall), std::min(block, kRecvChunkLarge)};
}

ArmPicker TcpEngine::recv_picker() const { return ArmPicker(recv_trial_.get(), 0); }

std::vector<TrialResult> TcpEngine::trials() const {
  std::vector<TrialResult> out;
  for (const auto* t : {send_trial_.get(), recv_trial_.get()}) {
    if (t != nullptr && t->used()) out.push_back(t->result());
  }
  return out;
}

// ---- hot loops ----------------------------------------------------------------------------

void TcpEngine::stream_send(TcpFlow& f) {
  ctx_->enter_data_thread("send", f.id);
  tune_socket(f.fd(), *ctx_);
  const RunContext& ctx = *ctx_;
  const std::size_t n = ctx.spec().buffsize();
  const std::uint8_t* buf = tx_buf_.data();
  const int fd = f.fd();
  const bool zc = ctx.spec().zerocopy();
  const int flags = MSG_NOSIGNAL | (zc ? MSG_ZEROCOPY : 0);
  bool all_zero = true;
  unsigned sends = 0;
  ArmPicker method = send_picker();
  // The stream is the pattern repeated, so its byte i is pattern[i % period] whichever way it
  // is sent: sendfile goes round one period of it (from the memfd), write round the block; either
  // resumes where a partial send stopped, and the two may alternate (--send-method auto's trial).
  std::uint64_t sent = 0;
  ctx.wait_for_start();
  while (!ctx.stopping()) {
    ssize_t k = 0;
    if (method.arm(mono_now_ns) == 1) {
      const std::size_t off = static_cast<std::size_t>(sent % tx_period_);
      off_t pos = static_cast<off_t>(off);  // sendfile reads the page cache of the memfd: no user copy
      k = ::sendfile(fd, tx_memfd_, &pos, tx_period_ - off);
    } else {
      const std::size_t off = static_cast<std::size_t>(sent % n);
      k = ::send(fd, buf + off, n - off, flags);
    }
    if (k > 0) {
      f.counters.add_tx(static_cast<std::uint64_t>(k));
      method.count(static_cast<std::uint64_t>(k));
      sent += static_cast<std::uint64_t>(k);
      if (zc && (++sends & 7) == 0) all_zero = reap_zerocopy(fd) && all_zero;
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      continue;  // a tick: look at the stop flag again
    } else if (k < 0 && zc && errno == ENOBUFS) {
      all_zero = reap_zerocopy(fd) && all_zero;  // completions exhausted optmem: drain and retry
    } else {
      if (!ctx.aborted()) f.fail(fmt::format("send: {}", err_text(k < 0 ? errno : EPIPE)));
      return;
    }
  }
  if (zc) {
    all_zero = reap_zerocopy(fd) && all_zero;
    if (!all_zero) ctx_->warn("--zerocopy: the kernel copied the data anyway on this path (it does for loopback and veth)");
  }
  ::shutdown(fd, SHUT_WR);
  // Wait for the peer to read everything and close, so both ends count the same bytes. What the
  // kernel still holds may take seconds to leave on a slow link: while the send queue shrinks the
  // deadline moves on (RunContext::hard_deadline), so the connection is not cut while it delivers.
  std::uint8_t sink[4096];
  int queued = -1;
  for (;;) {
    const ssize_t k = ::recv(fd, sink, sizeof sink, 0);
    if (k == 0) return;  // the peer read everything and closed its side
    if (k > 0) continue;  // a stream receiver sends nothing; nothing to count
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      if (!ctx.aborted()) f.fail(fmt::format("after the test, before the peer read everything: {}", errno_text(errno)));
      return;
    }
    int q = 0;
    if (::ioctl(fd, SIOCOUTQ, &q) == 0) {
      if (queued >= 0 && q < queued) ctx.note_drain_progress();
      queued = q;
    }
    if (ctx.aborted()) return;
    if (mono_now_ns() > ctx.hard_deadline()) {
      f.fail(fmt::format("peer did not read the last {} bytes and close within {:.0f} s after the test", std::max(queued, 0),
                         static_cast<double>(ctx.hard_deadline() - ctx.schedule().end_at) / 1e9));
      return;
    }
  }
}

void TcpEngine::stream_receive(TcpFlow& f) {
  ctx_->enter_data_thread("recv", f.id);
  tune_socket(f.fd(), *ctx_);
  const RunContext& ctx = *ctx_;
  const auto sizes = recv_chunks(ctx.spec());
  ArmPicker chunk = recv_picker();
  std::vector<std::uint8_t> buf(sizes[1]);
  const int fd = f.fd();
  const int flags = ctx.spec().skip_rx_copy() ? MSG_TRUNC : 0;
  const bool verify = ctx.spec().verify();
  const std::size_t period = ctx.spec().buffsize();
  std::size_t pos = 0;  // offset in the sender's buffer of the next byte
  ctx.wait_for_start();
  for (;;) {
    const ssize_t k = ::recv(fd, buf.data(), sizes[static_cast<std::size_t>(chunk.arm(mono_now_ns))], flags);
    if (k > 0) {
      f.counters.add_rx(static_cast<std::uint64_t>(k));
      chunk.count(static_cast<std::uint64_t>(k));
      if (ctx.stopping()) ctx.note_drain_progress();  // the sender's queue still drains
      if (verify) {
        std::size_t done = 0;
        const auto got = static_cast<std::size_t>(k);
        while (done < got) {
          const std::size_t run = std::min(got - done, period - pos);
          if (std::memcmp(buf.data() + done, tx_buf_.data() + pos, run) != 0) f.add_verify_error();
          done += run;
          pos = (pos + run) % period;
        }
      }
    } else if (k == 0) {
      break;  // the sender finished
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (ctx.aborted()) return;
      if (mono_now_ns() > ctx.hard_deadline()) {
        f.fail("peer stalled: still open after the test's end");
        break;
      }
    } else {
      if (!ctx.aborted()) f.fail(fmt::format("recv: {}", errno_text(errno)));
      return;
    }
  }
  ::shutdown(fd, SHUT_WR);
}

void TcpEngine::rpc_server(TcpFlow& f) {
  ctx_->enter_data_thread("serve", f.id);
  tune_socket(f.fd(), *ctx_);
  const RunContext& ctx = *ctx_;
  const int rx_flags = ctx.spec().skip_rx_copy() ? MSG_TRUNC : 0;
  const bool verify = ctx.spec().verify();
  const std::uint64_t max_len = ctx.spec().buffsize();
  const auto sizes = recv_chunks(ctx.spec());
  ArmPicker rchunk = recv_picker();
  std::vector<std::uint8_t> buf(sizes[1]);
  const std::uint8_t* tx = tx_buf_.data();
  ArmPicker method = send_picker();
  const int fd = f.fd();
  auto rx_count = [&f](std::uint64_t k) { f.counters.add_rx(k); };
  auto tx_count = [&f](std::uint64_t k) { f.counters.add_tx(k); };
  auto none = [](std::uint64_t) {};
  std::uint8_t hdr[kRpcHdrSize];
  std::uint8_t reply[kRpcHdrSize];
  int err = 0;
  for (;;) {
    const int rc = recv_exact(fd, hdr, sizeof hdr, ctx, none, err);
    if (rc == 0) break;  // client finished
    if (rc < 0) {
      if (!ctx.aborted()) f.fail(fmt::format("rpc request: {}", err_text(err)));
      return;
    }
    const std::uint32_t op = get32(hdr + 4);
    const std::uint64_t len = get64(hdr + 8);
    if (get32(hdr) == kRpcMagic && op == kOpPing && len == 0) {
      put32(reply, kReplyMagic);
      put32(reply + 4, 0);
      put64(reply + 8, 0);
      if (!send_all(fd, reply, sizeof reply, ctx, none, err)) {
        if (!ctx.aborted()) f.fail(fmt::format("ping reply: {}", err_text(err)));
        return;
      }
      continue;
    }
    if (get32(hdr) != kRpcMagic || (op != kOpWrite && op != kOpRead) || len == 0 || len > max_len) {
      f.fail(fmt::format("rpc request: malformed (op {}, length {}, limit {})", op, len, max_len));
      return;
    }
    put32(reply, kReplyMagic);
    put32(reply + 4, 0);
    if (op == kOpWrite) {
      std::uint64_t left = len;
      while (left > 0) {
        const std::size_t chunk =
            static_cast<std::size_t>(std::min<std::uint64_t>(left, sizes[static_cast<std::size_t>(rchunk.arm(mono_now_ns))]));
        if (recv_exact(fd, buf.data(), chunk, ctx, rx_count, err, rx_flags) <= 0) {
          if (!ctx.aborted()) f.fail(fmt::format("rpc write block: {}", err_text(err == 0 ? EPIPE : err)));
          return;
        }
        rchunk.count(chunk);
        // Every block carries the same pattern: compare with it at this offset in the block.
        if (verify && std::memcmp(buf.data(), tx + (len - left), chunk) != 0) f.add_verify_error();
        left -= chunk;
      }
      put64(reply + 8, 0);
      if (!send_all(fd, reply, sizeof reply, ctx, none, err)) {
        if (!ctx.aborted()) f.fail(fmt::format("rpc reply: {}", err_text(err)));
        return;
      }
    } else {
      put64(reply + 8, len);
      if (!send_all(fd, reply, sizeof reply, ctx, none, err, MSG_MORE) ||
          !send_block(fd, method.arm(mono_now_ns) == 1 ? tx_memfd_ : -1, tx_period_, tx, static_cast<std::size_t>(len), ctx,
                      tx_count, err)) {
        if (!ctx.aborted()) f.fail(fmt::format("rpc read block: {}", err_text(err)));
        return;
      }
      method.count(len);
    }
    f.counters.add_msg();
  }
  ::shutdown(fd, SHUT_WR);
}

void TcpEngine::rpc_tester(std::uint32_t t) {
  ctx_->enter_data_thread("rpc", t);
  const RunContext& ctx = *ctx_;
  const TestSpec& spec = ctx.spec();
  const std::uint64_t len = spec.buffsize();
  const std::uint32_t op = is_write_like(spec.test())     ? kOpWrite
                           : spec.test() != TestKind::rw ? kOpRead
                                                           : (t % 2 == 0 ? kOpWrite : kOpRead);
  LatencyHistogram& hist = *tester_hist_[t];
  const std::size_t servers = rpc_table_.size();
  const std::uint32_t lane = t % spec.parallel();
  std::size_t s = t % servers;
  const bool sticky = is_sticky(spec.test());
  ArmPicker method = send_picker();
  std::uint8_t hdr[kRpcHdrSize];
  put32(hdr, kRpcMagic);
  put32(hdr + 4, op);
  put64(hdr + 8, len);
  ctx.wait_for_start();
  std::size_t dead_in_a_row = 0;
  while (!ctx.stopping()) {
    RpcConn& c = *rpc_table_[s][lane];
    if (!sticky) s = (s + 1) % servers;  // swrite/sread: the thread stays with its server
    if (c.broken.load(std::memory_order_relaxed)) {
      if (sticky || ++dead_in_a_row >= servers) return;  // every server this thread uses is gone
      continue;
    }
    dead_in_a_row = 0;
    RpcConn::Waiter w;
    w.op = op;
    const std::int64_t t0 = mono_now_ns();
    {
      std::lock_guard lk(c.send_mu);
      {
        // broken is set under q_mu by the receiver before it releases the last waiters, so a
        // waiter queued here is always either answered or released.
        std::lock_guard q(c.q_mu);
        if (c.broken.load()) continue;
        c.pending.push_back(&w);
      }
      int err = 0;
      auto tx_count = [&c](std::uint64_t k) { c.flow->counters.add_tx(k); };
      if (!send_all(c.flow->fd(), hdr, sizeof hdr, ctx, [](std::uint64_t) {}, err, op == kOpWrite ? MSG_MORE : 0) ||
          (op == kOpWrite && !send_block(c.flow->fd(), method.arm(mono_now_ns) == 1 ? tx_memfd_ : -1, tx_period_,
                                         tx_buf_.data(), static_cast<std::size_t>(len), ctx, tx_count, err))) {
        c.break_conn(ctx.aborted() ? std::string() : fmt::format("rpc send: {}", err_text(err)));
      } else if (op == kOpWrite) {
        method.count(len);
      }
    }
    w.done.acquire();
    if (!w.ok) continue;
    const std::int64_t t1 = mono_now_ns();
    if (ctx.in_window(t1)) hist.record(static_cast<std::uint64_t>(t1 - t0));
  }
}

void TcpEngine::rpc_receiver(RpcConn& c) {
  ctx_->enter_data_thread("reply", c.flow->id);
  tune_socket(c.flow->fd(), *ctx_);
  const RunContext& ctx = *ctx_;
  const int rx_flags = ctx.spec().skip_rx_copy() ? MSG_TRUNC : 0;
  const bool verify = ctx.spec().verify();
  const std::uint64_t max_len = ctx.spec().buffsize();
  const auto sizes = recv_chunks(ctx.spec());
  ArmPicker rchunk = recv_picker();
  std::vector<std::uint8_t> buf(sizes[1]);
  const int fd = c.flow->fd();
  auto rx_count = [&c](std::uint64_t k) { c.flow->counters.add_rx(k); };
  auto none = [](std::uint64_t) {};
  std::uint8_t hdr[kRpcHdrSize];
  int err = 0;
  ctx.wait_for_start();
  for (;;) {
    const int rc = recv_exact(fd, hdr, sizeof hdr, ctx, none, err);
    if (rc == 0) break;
    if (rc < 0) {
      if (!ctx.aborted() && !c.broken) c.break_conn(fmt::format("rpc reply: {}", err_text(err)));
      break;
    }
    RpcConn::Waiter* w = nullptr;
    {
      std::lock_guard q(c.q_mu);
      if (!c.pending.empty()) {
        w = c.pending.front();
        c.pending.pop_front();
      }
    }
    const std::uint64_t len = get64(hdr + 8);
    const bool want_data = w && w->op == kOpRead;
    if (!w || get32(hdr) != kReplyMagic || get32(hdr + 4) != 0 || (want_data ? len != max_len : len != 0)) {
      c.break_conn("rpc reply: malformed or unexpected reply from server");
      if (w) w->done.release();
      break;
    }
    std::uint64_t left = len;
    bool ok = true;
    while (left > 0) {
      const std::size_t chunk =
          static_cast<std::size_t>(std::min<std::uint64_t>(left, sizes[static_cast<std::size_t>(rchunk.arm(mono_now_ns))]));
      if (recv_exact(fd, buf.data(), chunk, ctx, rx_count, err, rx_flags) <= 0) {
        ok = false;
        break;
      }
      rchunk.count(chunk);
      if (verify && std::memcmp(buf.data(), tx_buf_.data() + (len - left), chunk) != 0) c.flow->add_verify_error();
      left -= chunk;
    }
    if (!ok) {
      if (!ctx.aborted()) c.break_conn(fmt::format("rpc read block: {}", err_text(err == 0 ? EPIPE : err)));
      w->done.release();
      break;
    }
    c.flow->counters.add_msg();
    w->ok = true;
    w->done.release();
  }
  // Nothing more will be answered on this connection: release whoever still waits.
  std::lock_guard q(c.q_mu);
  c.broken = true;
  for (auto* w : c.pending) w->done.release();
  c.pending.clear();
}

// Network delay under load: a zero-length ping to each server in turn every 10 ms on the probe
// connections; only round trips that complete inside the window are recorded.
void TcpEngine::probe_loop() {
  ctx_->enter_data_thread("probe", 0);
  RunContext& ctx = *ctx_;
  LatencyHistogram& hist = ctx.delay_histogram();
  std::uint8_t ping[kRpcHdrSize], reply[kRpcHdrSize];
  put32(ping, kRpcMagic);
  put32(ping + 4, kOpPing);
  put64(ping + 8, 0);
  auto none = [](std::uint64_t) {};
  std::vector<bool> dead(probe_flows_.size(), false);
  ctx.wait_for_start();
  std::int64_t next = mono_now_ns();
  while (!ctx.stopping()) {
    for (std::size_t i = 0; i < probe_flows_.size() && !ctx.stopping(); ++i) {
      if (dead[i]) continue;
      TcpFlow& f = *probe_flows_[i];
      int err = 0;
      const std::int64_t t0 = mono_now_ns();
      if (!send_all(f.fd(), ping, sizeof ping, ctx, none, err) || recv_exact(f.fd(), reply, sizeof reply, ctx, none, err) <= 0 ||
          get32(reply) != kReplyMagic) {
        if (!ctx.aborted()) f.fail(fmt::format("delay probe: {}", err_text(err == 0 ? EPIPE : err)));
        dead[i] = true;
        continue;
      }
      const std::int64_t t1 = mono_now_ns();
      if (ctx.in_window(t1)) hist.record(static_cast<std::uint64_t>(t1 - t0));
    }
    next += kProbePeriodNs;
    const std::int64_t now = mono_now_ns();
    if (next < now) next = now;
    ctx.sleep_until(std::min(next, ctx.schedule().end_at));
  }
  for (TcpFlow* f : probe_flows_) ::shutdown(f->fd(), SHUT_WR);
}

}  // namespace fabperf
