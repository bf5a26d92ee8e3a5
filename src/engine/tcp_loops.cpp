// The TCP engine's hot loops: stream send/receive, the rpc server, testers and reply receivers,
// and the delay probe. Plain blocking sockets on dedicated threads; every socket carries a
// SO_SNDTIMEO/SO_RCVTIMEO "tick" (kTickMs) so every blocked call comes back to see the stop flag
// and the deadlines; the loops never allocate, log or throw.
#include "engine/tcp_internal.hpp"

#include <fabperf/core/bytes.hpp>
#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>

#include <fmt/format.h>
#include <linux/errqueue.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

namespace fabperf {
namespace {

using namespace tcp;

// The words a failed data call is reported with: an errno, or one of fabperf's own codes below
// (negative, so a kernel's ETIMEDOUT is never taken for a stalled peer).
constexpr int kStalled = -1;     // no byte moved for RunContext::kGraceNs past the end
constexpr int kDrainLimit = -2;  // still moving at RunContext::kMaxDrainNs past the end

std::string err_text(int err) {
  // Past the test's end the deadline moves on with every byte (RunContext::hard_deadline): a
  // connection fails as stalled only after a whole grace with none moved, never for being slow.
  if (err == kStalled)
    return fmt::format("peer stalled: no byte moved in {:.0f} s, past the test's end",
                       static_cast<double>(RunContext::kGraceNs) / 1e9);
  if (err == kDrainLimit)
    return fmt::format("still moving {:.0f} s after the test's end: cut at the drain limit (slow, not stalled)",
                       static_cast<double>(RunContext::kMaxDrainNs) / 1e9);
  if (err == EPIPE) return "connection closed by peer mid-message";
  return errno_text(err);
}

// An rpc header: magic, operation (0 in a reply) and length.
void put_hdr(std::uint8_t* h, std::uint32_t magic, std::uint32_t op, std::uint64_t len) {
  put_be(h, magic);
  put_be(h + 4, op);
  put_be(h + 8, len);
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

// A data call that failed with err: the flow's error, naming `what`, unless the test was aborted
// (then every call fails, and the abort says why).
void fail_io(Flow& f, const RunContext& ctx, const char* what, int err) {
  if (!ctx.aborted()) f.fail(fmt::format("{}: {}", what, err_text(err)));
}

// Why a blocked call gave up (the callers say nothing when the test was aborted): the drain limit
// reached while bytes still moved, or a whole grace with none moved.
int deadline_err(const RunContext& ctx) {
  return mono_now_ns() >= ctx.schedule().end_at + RunContext::kMaxDrainNs ? kDrainLimit : kStalled;
}

// Moves n bytes with op(done) (one send/sendfile/recv call for the bytes after `done`), adding
// each call's to `count` (one of the flow's counters), retrying ticks; gives up at the hard
// deadline or on abort (an rpc sender must finish its block). Returns 1 on success, 0 on a clean
// EOF before the first byte, -1 on error (err set; EPIPE for EOF mid-message).
using Count = std::atomic<std::uint64_t>;
template <typename Op>
int move_all(std::size_t n, const RunContext& ctx, Count& count, int& err, Op&& op) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t k = op(done);
    if (k > 0) {
      count.fetch_add(static_cast<std::uint64_t>(k), std::memory_order_relaxed);
      done += static_cast<std::size_t>(k);
      if (ctx.stopping()) ctx.note_drain_progress();  // slow past the end, not stalled
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (ctx.aborted() || mono_now_ns() > ctx.hard_deadline()) {
        err = deadline_err(ctx);
        return -1;
      }
      continue;
    }
    err = k < 0 ? errno : EPIPE;
    return k == 0 && done == 0 ? 0 : -1;
  }
  return 1;
}

bool send_all(int fd, const std::uint8_t* p, std::size_t n, const RunContext& ctx, Count& count, int& err,
              int flags = 0) {
  return move_all(n, ctx, count, err,
                  [&](std::size_t done) { return ::send(fd, p + done, n - done, MSG_NOSIGNAL | flags); }) > 0;
}

// Sends one whole rpc block, the pattern's period repeated, round that one period (cache-hot
// however large the block): with sendfile(2) from the memfd holding it when there is one (no copy
// from user space), else from the pattern buffer.
bool send_block(int fd, int memfd, std::size_t period, const std::uint8_t* p, std::size_t n, const RunContext& ctx,
                Count& count, int& err) {
  return move_all(n, ctx, count, err, [&](std::size_t done) {
           const std::size_t at = done % period;
           const std::size_t len = std::min(n - done, period - at);
           off_t pos = static_cast<off_t>(at);
           return memfd < 0 ? ::send(fd, p + at, len, MSG_NOSIGNAL) : ::sendfile(fd, memfd, &pos, len);
         }) > 0;
}

// Receives exactly n bytes (move_all's result). With MSG_TRUNC the kernel consumes the bytes
// without copying them (p is not written).
int recv_exact(int fd, std::uint8_t* p, std::size_t n, const RunContext& ctx, Count& count, int& err, int flags = 0) {
  return move_all(n, ctx, count, err, [&](std::size_t got) { return ::recv(fd, p + got, n - got, flags); });
}

// How the rpc server and the reply receivers take blocks in: in the receive trial's chunks, and
// with --verify compared with the pattern, which every block carries from its start.
struct BlockReader {
  const RunContext& ctx;
  ArmPicker chunk;
  std::array<std::size_t, 2> sizes;
  const std::uint8_t* pattern;
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(sizes[1]);
  int flags = ctx.spec().skip_rx_copy() ? MSG_TRUNC : 0;
  bool verify = ctx.spec().verify();

  // One block of len bytes, counted in f's rx; false with err set (EPIPE for an EOF before its end).
  bool read(int fd, std::uint64_t len, int& err, Flow& f) {
    for (std::uint64_t left = len; left > 0;) {
      const std::size_t n = static_cast<std::size_t>(
          std::min<std::uint64_t>(left, sizes[static_cast<std::size_t>(chunk.arm(mono_now_ns))]));
      if (recv_exact(fd, buf.data(), n, ctx, f.counters.rx_bytes, err, flags) <= 0) return false;
      chunk.count(n);
      if (verify && std::memcmp(buf.data(), pattern + (len - left), n) != 0) f.counters.add_verify_error();
      left -= n;
    }
    return true;
  }
};

// The server's reply to one rpc request on c: its header, then the block a read asked for.
// op_of() names the request it answers (nullopt: none is pending). 1: answered; 0: the server
// closed the connection (its end of the test); -1: the connection broke (marked, its error named
// unless the test was aborted).
template <typename Conn, typename OpOf>
int take_reply(const RunContext& ctx, Conn& c, BlockReader& rx, OpOf&& op_of) {
  const int fd = c.flow->fd();
  std::uint8_t hdr[kRpcHdrSize];
  int err = 0;
  const int rc = recv_exact(fd, hdr, sizeof hdr, ctx, c.flow->counters.framing_rx, err);
  if (rc <= 0) {
    if (rc < 0 && !ctx.aborted() && !c.broken) c.break_conn(fmt::format("rpc reply: {}", err_text(err)));
    return rc;
  }
  const std::optional<std::uint32_t> op = op_of();
  const std::uint64_t len = get_be<std::uint64_t>(hdr + 8);
  if (!op || get_be<std::uint32_t>(hdr) != kReplyMagic || get_be<std::uint32_t>(hdr + 4) != 0 ||
      len != (*op == kOpRead ? ctx.spec().buffsize() : 0)) {
    c.break_conn("rpc reply: malformed or unexpected reply from server");
    return -1;
  }
  if (!rx.read(fd, len, err, *c.flow)) {
    if (!ctx.aborted()) c.break_conn(fmt::format("rpc read block: {}", err_text(err)));
    return -1;
  }
  c.flow->counters.add_msg();
  return 1;
}

}  // namespace

bool TcpEngine::send_rpc(TcpFlow& f, const std::uint8_t* hdr, std::uint64_t len, ArmPicker& method, int& err) {
  if (!send_all(f.fd(), hdr, kRpcHdrSize, *ctx_, f.counters.framing_tx, err, len > 0 ? MSG_MORE : 0)) return false;
  if (len == 0) return true;
  if (!send_block(f.fd(), method.arm(mono_now_ns) == 1 ? tx_memfd_.get() : -1, tx_period_, tx_buf_.data(),
                  static_cast<std::size_t>(len), *ctx_, f.counters.tx_bytes, err)) {
    return false;
  }
  method.count(len);
  return true;
}

void TcpEngine::stream_send(TcpFlow& f) {
  ctx_->enter_data_thread("send", f.id, f.role);
  tune_socket(f.fd(), *ctx_);
  const RunContext& ctx = *ctx_;
  const std::uint8_t* buf = tx_buf_.data();
  const int fd = f.fd();
  const bool zc = ctx.spec().zerocopy();
  const int flags = MSG_NOSIGNAL | (zc ? MSG_ZEROCOPY : 0);
  bool all_zero = true;
  unsigned sends = 0;
  ArmPicker method = send_picker();
  // The stream is the pattern repeated, so its byte i is pattern[i % period] whichever way it
  // is sent: both go round one period of it (sendfile from the memfd, write from the buffer, the
  // source cache-hot either way); either resumes where a partial send stopped, and the two may
  // alternate (--send-method auto's trial).
  std::uint64_t sent = 0;
  ctx.wait_for_start();
  while (!ctx.stopping()) {
    const std::size_t off = static_cast<std::size_t>(sent % tx_period_);
    off_t pos = static_cast<off_t>(off);  // sendfile reads the page cache of the memfd: no user copy
    const ssize_t k = method.arm(mono_now_ns) == 1 ? ::sendfile(fd, tx_memfd_.get(), &pos, tx_period_ - off)
                                                   : ::send(fd, buf + off, tx_period_ - off, flags);
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
      return fail_io(f, ctx, "send", k < 0 ? errno : EPIPE);
    }
  }
  if (zc) {
    all_zero = reap_zerocopy(fd) && all_zero;
    if (!all_zero)
      ctx_->warn("--zerocopy: the kernel copied the data anyway on this path (it does for loopback and veth)");
  }
  ::shutdown(fd, SHUT_WR);
  set_timeouts(fd, kDrainTickMs);
  // Wait for the peer to read everything and close, so both ends count the same bytes. What the
  // kernel still holds may take seconds to leave on a slow link: while the send queue shrinks the
  // deadline moves on (RunContext::hard_deadline), so the connection is not cut while it delivers.
  std::uint8_t sink[4096];
  int queued = -1;
  for (;;) {
    const ssize_t k = ::recv(fd, sink, sizeof sink, 0);
    if (k == 0) return;   // the peer read everything and closed its side
    if (k > 0) continue;  // a stream receiver sends nothing; nothing to count
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return fail_io(f, ctx, "after the test, before the peer read everything", errno);
    }
    int q = 0;
    if (::ioctl(fd, SIOCOUTQ, &q) == 0) {
      if (queued >= 0 && q < queued) ctx.note_drain_progress();
      queued = q;
    }
    if (ctx.aborted()) return;
    if (mono_now_ns() > ctx.hard_deadline()) {
      f.fail(fmt::format("peer did not read the last {} bytes and close within {:.0f} s after the test",
                         std::max(queued, 0), static_cast<double>(ctx.hard_deadline() - ctx.schedule().end_at) / 1e9));
      return;
    }
  }
}

void TcpEngine::stream_receive(TcpFlow& f) {
  ctx_->enter_data_thread("recv", f.id, f.role);
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
          if (std::memcmp(buf.data() + done, tx_buf_.data() + pos, run) != 0) f.counters.add_verify_error();
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
      return fail_io(f, ctx, "recv", errno);
    }
  }
  ::shutdown(fd, SHUT_WR);
}

void TcpEngine::rpc_server(std::vector<TcpFlow*> flows) {
  const bool data = std::ranges::any_of(flows, [](const TcpFlow* f) { return f->op != FlowOp::probe; });
  ctx_->enter_data_thread("serve", flows.front()->id, FlowRole::server, data);
  for (const TcpFlow* f : flows) tune_socket(f->fd(), *ctx_);
  const RunContext& ctx = *ctx_;
  const std::uint64_t max_len = ctx.spec().buffsize();
  BlockReader rx{ctx, recv_picker(), recv_chunks(ctx.spec()), tx_buf_.data()};
  ArmPicker method = send_picker();
  std::uint8_t hdr[kRpcHdrSize];
  std::uint8_t ack[kRpcHdrSize];  // the reply to a ping and to a write
  std::uint8_t reply[kRpcHdrSize];
  put_hdr(ack, kReplyMagic, 0, 0);
  // One request of f answered; false when f is done: its client finished, or it failed.
  auto serve_one = [&](TcpFlow& f) {
    const int fd = f.fd();
    int err = 0;
    auto failed = [&](const char* what) {
      fail_io(f, ctx, what, err);
      return false;
    };
    const int rc = recv_exact(fd, hdr, sizeof hdr, ctx, f.counters.framing_rx, err);
    if (rc == 0) {
      ::shutdown(fd, SHUT_WR);  // client finished
      return false;
    }
    if (rc < 0) return failed("rpc request");
    const std::uint32_t op = get_be<std::uint32_t>(hdr + 4);
    const std::uint64_t len = get_be<std::uint64_t>(hdr + 8);
    if (get_be<std::uint32_t>(hdr) == kRpcMagic && op == kOpPing && len == 0) {
      if (!send_all(fd, ack, sizeof ack, ctx, f.counters.framing_tx, err)) return failed("ping reply");
      return true;
    }
    if (get_be<std::uint32_t>(hdr) != kRpcMagic || (op != kOpWrite && op != kOpRead) || len == 0 || len > max_len) {
      f.fail(fmt::format("rpc request: malformed (op {}, length {}, limit {})", op, len, max_len));
      return false;
    }
    if (op == kOpWrite) {
      if (!rx.read(fd, len, err, f)) return failed("rpc write block");
      if (!send_all(fd, ack, sizeof ack, ctx, f.counters.framing_tx, err)) return failed("rpc reply");
    } else {
      put_hdr(reply, kReplyMagic, 0, len);
      if (!send_rpc(f, reply, len, method, err)) return failed("rpc read block");
    }
    f.counters.add_msg();
    return true;
  };
  if (flows.size() == 1) {
    while (serve_one(*flows.front())) {
    }
    return;
  }
  // Several connections: answer the ones with a request waiting. A request comes whole (the
  // client sends it at once), so serving one blocks only for as long as it takes to arrive.
  std::vector<pollfd> pfds(flows.size());
  std::ranges::transform(flows, pfds.begin(), [](const TcpFlow* f) { return pollfd{f->fd(), POLLIN, 0}; });
  while (!flows.empty()) {
    ::poll(pfds.data(), pfds.size(), kTickMs);
    // What a blocked recv sees at its tick (recv_exact): an idle connection past the deadline.
    const bool late = ctx.aborted() || mono_now_ns() > ctx.hard_deadline();
    std::size_t keep = 0;
    for (std::size_t i = 0; i < flows.size(); ++i) {
      const bool ready = pfds[i].revents != 0;
      if (!ready && late) fail_io(*flows[i], ctx, "rpc request", deadline_err(ctx));
      if (ready ? serve_one(*flows[i]) : !late) {
        flows[keep] = flows[i];
        pfds[keep] = {flows[i]->fd(), POLLIN, 0};
        ++keep;
      }
    }
    flows.resize(keep);
    pfds.resize(keep);
  }
}

void TcpEngine::rpc_tester(std::uint32_t t) {
  ctx_->enter_data_thread("rpc", t, FlowRole::client);
  const RunContext& ctx = *ctx_;
  const TestSpec& spec = ctx.spec();
  const std::uint64_t len = spec.buffsize();
  const std::uint32_t op = pair_writes(spec, t) ? kOpWrite : kOpRead;
  LatencyHistogram& hist = *tester_hist_[t];
  const std::size_t servers = rpc_table_.size();
  const std::uint32_t lane = t % spec.parallel();
  std::size_t s = t % servers;
  const bool sticky = is_sticky(spec.test());
  ArmPicker method = send_picker();
  std::optional<BlockReader> rx;
  if (one_tester_per_connection(spec)) {
    rx.emplace(BlockReader{ctx, recv_picker(), recv_chunks(spec), tx_buf_.data()});
    for (const auto& row : rpc_table_) tune_socket(row[lane]->flow->fd(), *ctx_);
  }
  std::uint8_t hdr[kRpcHdrSize];
  put_hdr(hdr, kRpcMagic, op, len);
  ctx.wait_for_start();
  std::size_t dead_in_a_row = 0;
  // One waiter for every request, not one a request: its condition variable's set-up and
  // tear-down showed in the profile of small-block rpc (3% of the host at 1,024 agents).
  RpcConn::Waiter w;
  w.op = op;
  while (!ctx.stopping()) {
    RpcConn& c = *rpc_table_[s][lane];
    if (!sticky) s = (s + 1) % servers;  // swrite/sread: the thread stays with its server
    if (c.broken.load(std::memory_order_relaxed)) {
      if (sticky || ++dead_in_a_row >= servers) return;  // every server this thread uses is gone
      continue;
    }
    dead_in_a_row = 0;
    w.done = w.ok = false;  // no receiver holds it: the last one released it before acquire returned
    const std::int64_t t0 = mono_now_ns();
    bool sent = false;
    {
      std::lock_guard lk(c.send_mu);
      if (!rx) {
        // broken is set under q_mu by the receiver before it releases the last waiters, so a
        // waiter queued here is always either answered or released.
        std::lock_guard q(c.q_mu);
        if (c.broken.load()) continue;
        c.pending.push_back(&w);
      }
      int err = 0;
      sent = send_rpc(*c.flow, hdr, op == kOpWrite ? len : 0, method, err);
      if (!sent) c.break_conn(ctx.aborted() ? std::string() : fmt::format("rpc send: {}", err_text(err)));
    }
    if (rx) {
      if (!sent || take_reply(ctx, c, *rx, [op] { return std::optional<std::uint32_t>(op); }) <= 0) continue;
    } else {
      w.acquire();
      if (!w.ok) continue;
    }
    const std::int64_t t1 = mono_now_ns();
    if (ctx.in_window(t1)) hist.record(static_cast<std::uint64_t>(t1 - t0));
  }
}

// Each tester keeps one request in flight and issues the next the moment its reply is in, as a
// tester thread does; the server answers in order, so the oldest request in flight owns the next reply.
void TcpEngine::rpc_pipeline(RpcConn& c, std::vector<std::uint32_t> testers) {
  ctx_->enter_data_thread("rpc", testers.front(), FlowRole::client);
  tune_socket(c.flow->fd(), *ctx_);
  const RunContext& ctx = *ctx_;
  const std::uint32_t op = pair_writes(ctx.spec(), testers.front()) ? kOpWrite : kOpRead;
  BlockReader rx{ctx, recv_picker(), recv_chunks(ctx.spec()), tx_buf_.data()};
  ArmPicker method = send_picker();
  std::uint8_t hdr[kRpcHdrSize];
  put_hdr(hdr, kRpcMagic, op, ctx.spec().buffsize());
  std::vector<std::pair<std::uint32_t, std::int64_t>> due;  // (tester, when it issued its request)
  std::deque<std::pair<std::uint32_t, std::int64_t>> in_flight;
  ctx.wait_for_start();
  due.reserve(testers.size());
  for (const std::uint32_t t : testers) due.emplace_back(t, mono_now_ns());
  for (;;) {
    for (; !due.empty() && !ctx.stopping(); due.pop_back()) {
      int err = 0;
      if (!send_rpc(*c.flow, hdr, op == kOpWrite ? ctx.spec().buffsize() : 0, method, err)) {
        c.break_conn(ctx.aborted() ? std::string() : fmt::format("rpc send: {}", err_text(err)));
        return;
      }
      in_flight.push_back(due.back());
    }
    if (in_flight.empty() || take_reply(ctx, c, rx, [op] { return std::optional<std::uint32_t>(op); }) <= 0) return;
    const auto [t, t0] = in_flight.front();
    in_flight.pop_front();
    const std::int64_t t1 = mono_now_ns();
    if (ctx.in_window(t1)) tester_hist_[t]->record(static_cast<std::uint64_t>(t1 - t0));
    due.emplace_back(t, t1);
  }
}

void TcpEngine::rpc_receiver(RpcConn& c) {
  ctx_->enter_data_thread("reply", c.flow->id, FlowRole::client);
  tune_socket(c.flow->fd(), *ctx_);
  BlockReader rx{*ctx_, recv_picker(), recv_chunks(ctx_->spec()), tx_buf_.data()};
  ctx_->wait_for_start();
  for (;;) {
    RpcConn::Waiter* w = nullptr;
    const int rc = take_reply(*ctx_, c, rx, [&]() -> std::optional<std::uint32_t> {
      std::lock_guard q(c.q_mu);
      if (c.pending.empty()) return std::nullopt;
      w = c.pending.front();
      c.pending.pop_front();
      return w->op;
    });
    if (w) {
      w->ok = rc > 0;
      w->release();
    }
    if (rc <= 0) break;
  }
  // Nothing more will be answered on this connection: release whoever still waits.
  std::lock_guard q(c.q_mu);
  c.broken = true;
  for (auto* w : c.pending) w->release();
  c.pending.clear();
}

// Network delay under load: a zero-length ping to each server in turn every --delay-probe on the probe
// connections; only round trips that complete inside the window are recorded.
void TcpEngine::probe_loop() {
  ctx_->enter_data_thread("probe", 0, FlowRole::client, false);
  RunContext& ctx = *ctx_;
  LatencyHistogram& hist = ctx.delay_histogram();
  std::uint8_t ping[kRpcHdrSize], reply[kRpcHdrSize];
  put_hdr(ping, kRpcMagic, kOpPing, 0);
  std::vector<bool> dead(probe_flows_.size(), false);
  ctx.wait_for_start();
  std::int64_t next = mono_now_ns();
  while (!ctx.stopping()) {
    for (std::size_t i = 0; i < probe_flows_.size() && !ctx.stopping(); ++i) {
      if (dead[i]) continue;
      TcpFlow& f = *probe_flows_[i];
      int err = 0;
      const std::int64_t t0 = mono_now_ns();
      if (!send_all(f.fd(), ping, sizeof ping, ctx, f.counters.framing_tx, err) ||
          recv_exact(f.fd(), reply, sizeof reply, ctx, f.counters.framing_rx, err) <= 0 ||
          get_be<std::uint32_t>(reply) != kReplyMagic) {
        fail_io(f, ctx, "delay probe", err == 0 ? EPIPE : err);
        dead[i] = true;
        continue;
      }
      const std::int64_t t1 = mono_now_ns();
      if (ctx.in_window(t1)) hist.record(static_cast<std::uint64_t>(t1 - t0));
    }
    next += ctx.spec().delay_probe().count();
    const std::int64_t now = mono_now_ns();
    if (next < now) next = now;
    ctx.sleep_until(std::min(next, ctx.schedule().end_at));
  }
  for (TcpFlow* f : probe_flows_) ::shutdown(f->fd(), SHUT_WR);
}

}  // namespace fabperf
