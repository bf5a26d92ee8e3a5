// TCP data plane: plain blocking sockets on dedicated threads. Sockets carry a short
// SO_SNDTIMEO/SO_RCVTIMEO "tick" so every blocked call comes back often enough to see the stop
// flag; the loops never allocate, log or throw.
#include "engine/tcp_engine.hpp"

#include <fabperf/auth.hpp>
#include <fabperf/clock.hpp>
#include <fabperf/error.hpp>
#include <fabperf/units.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <semaphore>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fabperf {
namespace {

constexpr std::uint32_t kDataMagic = 0x46425044;   // "FBPD": data connection hello
constexpr std::uint32_t kRpcMagic = 0x46425052;    // "FBPR": rpc request
constexpr std::uint32_t kReplyMagic = 0x46425041;  // "FBPA": rpc reply
// Data hello (client -> server), 80 bytes:
//   magic | version<<16 | op | client node | connection index | client nonce (32) | mac (32)
//   mac = HMAC(client token, "fabperf-data-hello\0" | the first 48 bytes)
// Data ack (server -> client), 40 bytes:
//   magic | status | mac (32),  mac = HMAC(client token, "fabperf-data-ack\0" | nonce | status)
// The client token (derive_client_token) never crosses the wire, so neither side can be fooled
// by a peer that merely saw a handshake; the ack's mac proves the server holds the test token,
// so a client sends load only to an agent of its own test. A (node, index) is accepted once.
constexpr std::uint16_t kDataVersion = 2;
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
constexpr std::size_t kMaxRecvChunk = 4u << 20;

enum WireOp : std::uint32_t { kOpWrite = 1, kOpRead = 2, kOpRpc = 3 };
enum AckStatus : std::uint32_t { kAckOk = 0, kAckBadHello = 1, kAckBadToken = 2, kAckTooMany = 3, kAckDuplicate = 4 };

std::span<const std::uint8_t> label_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}
auth::Proof hello_mac(const proto::Token& client_token, const std::uint8_t* hello) {
  return auth::hmac_sha256(client_token, {label_bytes(kHelloLabel), std::span<const std::uint8_t>(hello, kHelloSigned)});
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

// Sends all of [p, p+n); returns bytes sent. Gives up at the hard deadline or on abort, or when
// stop_early says so (stream senders may stop mid-buffer; rpc senders must finish the block).
template <typename Count>
bool send_all(int fd, const std::uint8_t* p, std::size_t n, const RunContext& ctx, Count&& count, int& err) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      count(static_cast<std::uint64_t>(k));
      p += k;
      n -= static_cast<std::size_t>(k);
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

// Receives exactly n bytes. Returns 1 on success, 0 on a clean EOF before the first byte, -1 on
// error (err set; EPIPE for EOF mid-message).
template <typename Count>
int recv_exact(int fd, std::uint8_t* p, std::size_t n, const RunContext& ctx, Count&& count, int& err) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t k = ::recv(fd, p + got, n - got, 0);
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
  return spec.buffsize() + flows * std::min<std::uint64_t>(spec.buffsize(), kMaxRecvChunk);
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
}

void TcpEngine::ensure_tx_buffer(std::size_t n) {
  if (tx_buf_.size() >= n) return;
  tx_buf_.resize(n);
  // A non-constant pattern so nothing along the path can shortcut zero pages.
  for (std::size_t i = 0; i < n; ++i) tx_buf_[i] = static_cast<std::uint8_t>((i * 131) ^ (i >> 9));
}

std::uint16_t TcpEngine::prepare_server(RunContext& ctx, const ServerPlan& plan) {
  ctx_ = &ctx;
  server_plan_ = plan;
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai = getaddrinfo(plan.bind_address.c_str(), "0", &hints, &res);
  if (gai != 0) throw SystemError("resolve data address", plan.bind_address, gai_strerror(gai));
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    throw SystemError("socket", plan.bind_address, errno);
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  apply_socksize(fd, ctx, socksize_warned_);  // inherited by accepted sockets
  if (::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 4096) != 0) {
    const int e = errno;
    freeaddrinfo(res);
    ::close(fd);
    throw SystemError("listen for data connections on", plan.bind_address, e);
  }
  freeaddrinfo(res);
  listen_fd_ = fd;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  const std::uint16_t port = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                                     : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  accept_thread_ = std::thread([this] { accept_loop(); });
  return port;
}

void TcpEngine::accept_loop() {
  RunContext& ctx = *ctx_;
  std::uint32_t accepted = 0;
  std::vector<std::uint64_t> seen;  // (client node, connection index) already accepted
  seen.reserve(server_plan_.expect_connections);
  while (!accept_stop_.load() && !ctx.aborted()) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, 100);
    if (pr <= 0) continue;
    sockaddr_storage peer{};
    socklen_t plen = sizeof peer;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &plen, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const std::string remote = sockaddr_text(peer);
    std::uint8_t hello[kHelloSize];
    std::uint8_t ack[kAckSize] = {};
    put32(ack, kDataMagic);
    auto reject = [&](AckStatus st, const std::string& why) {
      put32(ack + 4, st);
      io_exact(fd, ack, sizeof ack, true, 500);
      ::close(fd);
      spdlog::warn("rejected data connection from {}: {}", remote, why);
    };
    if (!io_exact(fd, hello, sizeof hello, false, kHandshakeTimeoutMs)) {
      ::close(fd);
      spdlog::warn("data connection from {}: no hello ({})", remote, errno_text(errno));
      continue;
    }
    if (get32(hello) != kDataMagic || (get32(hello + 4) >> 16) != kDataVersion) {
      reject(kAckBadHello, "not a fabperf data hello of this version");
      continue;
    }
    const std::uint32_t op = get32(hello + 4) & 0xffff;
    const std::uint32_t client_node = get32(hello + 8);
    const std::uint32_t conn_index = get32(hello + 12);
    const proto::Token client_token = derive_client_token(server_plan_.token, client_node);
    const auth::Proof want = hello_mac(client_token, hello);
    if (CRYPTO_memcmp(want.data(), hello + kHelloSigned, want.size()) != 0) {
      reject(kAckBadToken, "no valid proof of this test's token");
      continue;
    }
    const std::uint64_t key = (std::uint64_t{client_node} << 32) | conn_index;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      reject(kAckDuplicate, fmt::format("client {} connection {} already connected (replayed hello?)", client_node, conn_index));
      continue;
    }
    const bool op_ok = ctx.spec().mode() == Mode::rpc ? op == kOpRpc : (op == kOpWrite || op == kOpRead);
    if (!op_ok) {
      reject(kAckBadHello, fmt::format("operation {} does not match the test", op));
      continue;
    }
    if (accepted >= server_plan_.expect_connections) {
      reject(kAckTooMany, "more connections than the test has");
      continue;
    }
    put32(ack + 4, kAckOk);
    const auth::Proof mac = ack_mac(client_token, hello + kHelloFields, ack);
    std::memcpy(ack + kAckSigned, mac.data(), mac.size());
    if (!io_exact(fd, ack, sizeof ack, true, kHandshakeTimeoutMs)) {
      ::close(fd);
      continue;
    }
    const FlowOp fop = op == kOpRpc ? FlowOp::rpc : (op == kOpWrite ? FlowOp::write : FlowOp::read);
    set_timeouts(fd, kTickMs);
    auto flow = std::make_unique<TcpFlow>(fd, FlowRole::server, fop, client_node, local_text(fd), remote);
    auto* raw = flow.get();
    ctx.add_flow(std::move(flow));
    {
      std::lock_guard lk(mu_);
      server_flows_.push_back(raw);
    }
    seen.push_back(key);
    ++accepted;
  }
}

int TcpEngine::connect_one(const proto::Target& t, FlowOp op, std::uint32_t conn_index, const ClientPlan& plan) {
  RunContext& ctx = *ctx_;
  const std::string where = t.host.find(':') != std::string::npos ? fmt::format("[{}]:{}", t.host, t.port)
                                                                   : fmt::format("{}:{}", t.host, t.port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(t.port);
  const int gai = getaddrinfo(t.host.c_str(), port.c_str(), &hints, &res);
  if (gai != 0) throw SystemError("resolve data address", where, gai_strerror(gai));
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    throw SystemError("socket for", where, errno);
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
  const std::uint32_t wop = op == FlowOp::rpc ? kOpRpc : (op == FlowOp::write ? kOpWrite : kOpRead);
  put32(hello, kDataMagic);
  put32(hello + 4, (std::uint32_t{kDataVersion} << 16) | wop);
  put32(hello + 8, ctx.node_index());
  put32(hello + 12, conn_index);
  const auth::Nonce nonce = auth::make_nonce();
  std::memcpy(hello + kHelloFields, nonce.data(), nonce.size());
  const auth::Proof mac = hello_mac(plan.token, hello);
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

void TcpEngine::prepare_client(RunContext& ctx, const ClientPlan& plan) {
  ctx_ = &ctx;
  const TestSpec& spec = ctx.spec();
  const std::uint32_t per_pair = spec.connections_per_pair();
  std::uint32_t conn_index = 0;
  for (const auto& t : plan.targets) {
    std::vector<RpcConn*> row;
    for (std::uint32_t c = 0; c < per_pair; ++c) {
      FlowOp op = FlowOp::rpc;
      if (spec.mode() == Mode::stream) {
        op = spec.test() == TestKind::write  ? FlowOp::write
             : spec.test() == TestKind::read ? FlowOp::read
                                             : (c % 2 == 0 ? FlowOp::write : FlowOp::read);
      }
      const int fd = connect_one(t, op, conn_index++, plan);
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      auto flow = std::make_unique<TcpFlow>(fd, FlowRole::client, op, t.node_index, local_text(fd), sockaddr_text(ss));
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
  }
  if (spec.mode() == Mode::rpc) {
    for (std::uint32_t t = 0; t < spec.threads(); ++t) tester_hist_.push_back(&ctx.add_histogram());
  }
}

void TcpEngine::start(RunContext& ctx) {
  ctx_ = &ctx;
  accept_stop_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  const TestSpec& spec = ctx.spec();
  ensure_tx_buffer(spec.buffsize());
  std::lock_guard lk(mu_);
  for (TcpFlow* f : server_flows_) {
    if (f->op == FlowOp::rpc) {
      threads_.emplace_back([this, f] { rpc_server(*f); });
    } else if (f->op == FlowOp::write) {
      threads_.emplace_back([this, f] { stream_receive(*f); });
    } else {
      threads_.emplace_back([this, f] { stream_send(*f); });
    }
  }
  if (spec.mode() == Mode::stream) {
    for (TcpFlow* f : client_flows_) {
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

// ---- hot loops ----------------------------------------------------------------------------

void TcpEngine::stream_send(TcpFlow& f) {
  const RunContext& ctx = *ctx_;
  const std::size_t n = ctx.spec().buffsize();
  const std::uint8_t* buf = tx_buf_.data();
  const int fd = f.fd();
  ctx.wait_for_start();
  while (!ctx.stopping()) {
    const ssize_t k = ::send(fd, buf, n, MSG_NOSIGNAL);
    if (k > 0) {
      f.counters.add_tx(static_cast<std::uint64_t>(k));
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      continue;  // a tick: look at the stop flag again
    } else {
      if (!ctx.aborted()) f.fail(fmt::format("send: {}", err_text(k < 0 ? errno : EPIPE)));
      return;
    }
  }
  ::shutdown(fd, SHUT_WR);
  // Wait for the peer to read everything and close, so both ends count the same bytes.
  std::uint8_t sink[4096];
  int err = 0;
  const int rc = recv_exact(fd, sink, sizeof sink, ctx, [](std::uint64_t) {}, err);
  if (rc < 0 && err == ETIMEDOUT && !ctx.aborted()) f.fail("peer did not close the connection after the test");
}

void TcpEngine::stream_receive(TcpFlow& f) {
  const RunContext& ctx = *ctx_;
  const std::size_t n = std::min<std::size_t>(ctx.spec().buffsize(), kMaxRecvChunk);
  std::vector<std::uint8_t> buf(n);
  const int fd = f.fd();
  ctx.wait_for_start();
  for (;;) {
    const ssize_t k = ::recv(fd, buf.data(), n, 0);
    if (k > 0) {
      f.counters.add_rx(static_cast<std::uint64_t>(k));
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
  const RunContext& ctx = *ctx_;
  const std::uint64_t max_len = ctx.spec().buffsize();
  std::vector<std::uint8_t> buf(std::min<std::size_t>(max_len, kMaxRecvChunk));
  const std::uint8_t* tx = tx_buf_.data();
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
    if (get32(hdr) != kRpcMagic || (op != kOpWrite && op != kOpRead) || len == 0 || len > max_len) {
      f.fail(fmt::format("rpc request: malformed (op {}, length {}, limit {})", op, len, max_len));
      return;
    }
    put32(reply, kReplyMagic);
    put32(reply + 4, 0);
    if (op == kOpWrite) {
      std::uint64_t left = len;
      while (left > 0) {
        const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
        if (recv_exact(fd, buf.data(), chunk, ctx, rx_count, err) <= 0) {
          if (!ctx.aborted()) f.fail(fmt::format("rpc write block: {}", err_text(err == 0 ? EPIPE : err)));
          return;
        }
        left -= chunk;
      }
      put64(reply + 8, 0);
      if (!send_all(fd, reply, sizeof reply, ctx, none, err)) {
        if (!ctx.aborted()) f.fail(fmt::format("rpc reply: {}", err_text(err)));
        return;
      }
    } else {
      put64(reply + 8, len);
      if (!send_all(fd, reply, sizeof reply, ctx, none, err) ||
          !send_all(fd, tx, static_cast<std::size_t>(len), ctx, tx_count, err)) {
        if (!ctx.aborted()) f.fail(fmt::format("rpc read block: {}", err_text(err)));
        return;
      }
    }
    f.counters.add_msg();
  }
  ::shutdown(fd, SHUT_WR);
}

void TcpEngine::rpc_tester(std::uint32_t t) {
  const RunContext& ctx = *ctx_;
  const TestSpec& spec = ctx.spec();
  const std::uint64_t len = spec.buffsize();
  const std::uint32_t op = spec.test() == TestKind::write ? kOpWrite
                           : spec.test() == TestKind::read ? kOpRead
                                                           : (t % 2 == 0 ? kOpWrite : kOpRead);
  LatencyHistogram& hist = *tester_hist_[t];
  const std::size_t servers = rpc_table_.size();
  const std::uint32_t lane = t % spec.parallel();
  std::size_t s = t % servers;
  std::uint8_t hdr[kRpcHdrSize];
  put32(hdr, kRpcMagic);
  put32(hdr + 4, op);
  put64(hdr + 8, len);
  ctx.wait_for_start();
  std::size_t dead_in_a_row = 0;
  while (!ctx.stopping()) {
    RpcConn& c = *rpc_table_[s][lane];
    s = (s + 1) % servers;
    if (c.broken.load(std::memory_order_relaxed)) {
      if (++dead_in_a_row >= servers) return;  // every server of this lane is gone
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
      if (!send_all(c.flow->fd(), hdr, sizeof hdr, ctx, [](std::uint64_t) {}, err) ||
          (op == kOpWrite && !send_all(c.flow->fd(), tx_buf_.data(), static_cast<std::size_t>(len), ctx, tx_count, err))) {
        c.break_conn(ctx.aborted() ? std::string() : fmt::format("rpc send: {}", err_text(err)));
      }
    }
    w.done.acquire();
    if (!w.ok) continue;
    const std::int64_t t1 = mono_now_ns();
    if (ctx.in_window(t1)) hist.record(static_cast<std::uint64_t>(t1 - t0));
  }
}

void TcpEngine::rpc_receiver(RpcConn& c) {
  const RunContext& ctx = *ctx_;
  const std::uint64_t max_len = ctx.spec().buffsize();
  std::vector<std::uint8_t> buf(std::min<std::size_t>(max_len, kMaxRecvChunk));
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
      const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
      if (recv_exact(fd, buf.data(), chunk, ctx, rx_count, err) <= 0) {
        ok = false;
        break;
      }
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

}  // namespace fabperf
