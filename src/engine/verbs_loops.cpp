// The RDMA engine's hot loops: one thread per QP moves the data. Meanings as nsdperf's
// ("notice" = a zero-byte SEND_WITH_IMM):
//   write  client -> server: RDMA WRITE_WITH_IMM (or SEND with --rdma-verb send)
//   read   server -> client: the same, server to client
//   nwrite server pulls the client's block with RDMA READ; a notice tells the client
//   rpc: one block per request with a reply (write: data + notice back; read: notice + data back;
//        nwrite: notice, READ, notice back); latency from post to reply.
// They never allocate, log or throw; a failed post or a completion error ends that flow with a
// message naming the verb, the device, the status and the peer.
#include "engine/verbs_internal.hpp"

#include <fabperf/core/clock.hpp>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <poll.h>
#include <algorithm>
#include <cerrno>
#include <vector>

namespace fabperf::verbs {

const char* opcode_name(ibv_wc_opcode op) {
  switch (op) {
    case IBV_WC_SEND: return "SEND";
    case IBV_WC_RDMA_WRITE: return "RDMA WRITE";
    case IBV_WC_RDMA_READ: return "RDMA READ";
    case IBV_WC_RECV: return "RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV (WRITE_WITH_IMM)";
    default: return "work request";
  }
}

namespace {

// Stream writes tell the target how many blocks landed in the immediate of the signalled
// WRITE_WITH_IMM only (the others are plain RDMA WRITEs): the target takes one receive and one
// completion per --cq-mod blocks, as the sender does. The top bit marks the count, so an
// immediate without it (rpc, an older sender) still means "byte_len bytes".
constexpr std::uint32_t kImmBlocks = 0x80000000u;
// The active side's last work request of a stream (blocks are at most 16 MiB, so no byte count
// has this bit): the target counts until it arrives instead of guessing from a quiet spell, which
// a guest stalled past the guess cut short by whole blocks (Soft-RoCE lab: sender 3 blocks ahead).
constexpr std::uint32_t kImmFinal = 0x40000000u;
constexpr int kPollBatch = 32;

std::uint32_t imm_of(const ibv_wc& wc) {
  return (wc.wc_flags & IBV_WC_WITH_IMM) != 0 ? ntohl(wc.imm_data) : 0;
}

// Bytes a target's receive completion stands for.
std::uint64_t received_bytes(const ibv_wc& wc, std::uint64_t block) {
  const std::uint32_t imm = imm_of(wc);
  if ((imm & kImmBlocks) != 0) return std::uint64_t{imm & ~(kImmBlocks | kImmFinal)} * block;
  return wc.byte_len;
}

// After the stop: true while completions still arrive (the peer's drain), bounded.
bool keep_draining(std::int64_t& last_activity, int n) noexcept {
  const std::int64_t now = mono_now_ns();
  if (last_activity == 0 || n > 0) last_activity = now;
  return now - last_activity < 500'000'000;
}

void fail(Qp& q, const char* what, int err) noexcept {
  try {
    q.flow->fail(fmt::format("{}: {} on {} (peer {})", what, errno_text(err), q.dev->label, q.peer));
  } catch (...) {
  }
}

void fail_wc(Qp& q, const ibv_wc& wc) noexcept {
  try {
    q.flow->fail(fmt::format("{} completion on {}: {} (wc status {}, vendor error {:#x}; peer {})",
                             opcode_name(wc.opcode), q.dev->label, ibv_wc_status_str(wc.status),
                             static_cast<int>(wc.status), wc.vendor_err, q.peer));
  } catch (...) {
  }
}

int post_notice(Qp& q, std::uint32_t imm, bool signaled, std::uint64_t wr_id = 0) noexcept {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(imm);
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(q.qp.get(), &wr, &bad);
}

int repost_recv(Qp& q) noexcept {
  const Device& d = *q.dev;
  return post_recv(q.qp.get(), d.buf.get() + d.block, d.block, d.mr->lkey);
}

}  // namespace

// Up to n completions; with --rdma-events sleeps on the channel (at most one tick) when idle.
int VerbsEngine::poll(Qp& q, ibv_wc* wc, int n) noexcept {
  int k = ibv_poll_cq(q.cq.get(), n, wc);
  if (k != 0 || !q.ch) return k;
  pollfd pfd{q.ch->fd, POLLIN, 0};
  if (::poll(&pfd, 1, kTickMs) <= 0) return 0;
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  if (ibv_get_cq_event(q.ch.get(), &ev_cq, &ev_ctx) == 0) {
    ibv_ack_cq_events(ev_cq, 1);
    ibv_req_notify_cq(q.cq.get(), 0);
  }
  return ibv_poll_cq(q.cq.get(), n, wc);
}

// One block's work request: push/pull_back move it with WRITE_WITH_IMM (or SEND), nread pulls it
// with READ. The caller sets wr_id and the signalled flag.
void VerbsEngine::make_data_wr(Qp& q, Dir dir, ibv_send_wr& wr, ibv_sge& sge) noexcept {
  const Device& d = *q.dev;
  const auto len = static_cast<std::uint32_t>(d.block);
  wr = ibv_send_wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (dir == Dir::nread) {
    // Read the peer's source block into our destination block.
    sge = {reinterpret_cast<std::uintptr_t>(d.buf.get() + d.block), len, d.mr->lkey};
    wr.opcode = IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = q.remote.addr;
    wr.wr.rdma.rkey = q.remote.rkey;
    return;
  }
  sge = {reinterpret_cast<std::uintptr_t>(d.buf.get()), len, d.mr->lkey};
  if (ctx_->spec().rdma_verb() == RdmaVerb::send) {
    wr.opcode = IBV_WR_SEND;
  } else {
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htonl(len);
    wr.wr.rdma.remote_addr = q.remote.addr + q.remote.len / 2;
    wr.wr.rdma.rkey = q.remote.rkey;
  }
  if (len <= d.max_inline) wr.send_flags = IBV_SEND_INLINE;
}

int VerbsEngine::post_data(Qp& q, Dir dir, bool signaled, std::uint64_t wr_id) noexcept {
  ibv_sge sge{};
  ibv_send_wr wr{};
  make_data_wr(q, dir, wr, sge);
  wr.wr_id = wr_id;
  if (signaled) wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(q.qp.get(), &wr, &bad);
}

// The posting side of a stream: keeps qdepth blocks in flight, a completion every --cq-mod posts.
// Each refill goes down as one chained post list (one doorbell, one system call on Soft-RoCE),
// not one ibv_post_send per block.
void VerbsEngine::stream_active(Qp& q) {
  ctx_->enter_data_thread("rdma-tx", q.flow->id, q.flow->role);
  RunContext& ctx = *ctx_;
  const std::uint64_t len = q.dev->block;
  const bool nread = q.dir == Dir::nread;
  const bool imm_writes = !nread && ctx.spec().rdma_verb() != RdmaVerb::send;
  // READs are bounded by the responder resources; every READ is signalled (its data counts).
  const std::uint64_t depth =
      nread ? std::min<std::uint64_t>(ctx.spec().qdepth(), q.dev->max_rd_atomic) : ctx.spec().qdepth();
  const std::uint32_t mod = nread ? 1 : ctx.spec().cq_mod();
  // Built before the start: the loop only sets ids, flags and opcodes.
  std::vector<ibv_send_wr> wrs;
  std::vector<ibv_sge> sges;
  try {
    wrs.resize(depth);
    sges.resize(depth);
  } catch (...) {
    ctx.wait_for_start();
    return fail(q, "allocating work requests", ENOMEM);
  }
  for (std::size_t i = 0; i < depth; ++i) make_data_wr(q, q.dir, wrs[i], sges[i]);
  const unsigned inline_flag = wrs[0].send_flags & IBV_SEND_INLINE;
  ctx.wait_for_start();
  std::uint64_t posted = 0, completed = 0, last_signaled = 0;
  std::uint32_t since = 0;
  ibv_wc wc[kPollBatch];
  // Retires the blocks the n completions in wc stand for (ids up to each wr_id); false when the
  // flow failed. While draining the nread notices are signalled and unchecked, and count no message.
  auto retire = [&](int n, bool draining) {
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        fail_wc(q, wc[i]);
        return false;
      }
      const std::uint64_t upto = wc[i].wr_id;
      if (is_recv(wc[i]) || upto == 0 || upto >= kProofWrId || upto <= completed) continue;  // notices, the proof
      const std::uint64_t blocks = upto - completed;
      completed = upto;
      if (!nread) {
        q.flow->counters.add_tx(blocks * len);
      } else {
        q.flow->counters.add_rx(blocks * len);
        // Tell the client its block was taken (unsignalled but while draining: the next READ's
        // completion retires it).
        if (int e = post_notice(q, static_cast<std::uint32_t>(len), draining); e != 0 && !draining) {
          fail(q, "ibv_post_send(notice)", e);
          return false;
        }
      }
      if (!draining) q.flow->counters.add_msg();
    }
    return true;
  };
  while (!ctx.stopping() && !stop_) {
    std::size_t k = 0;
    std::uint64_t sig_upto = last_signaled;
    while (posted + k - completed < depth) {
      ibv_send_wr& wr = wrs[k];
      const std::uint64_t id = posted + k + 1;
      // Signalled every --cq-mod posts, and always when the queue becomes full (else nothing
      // would complete to make room).
      const bool sig = ++since >= mod || id - completed >= depth;
      if (sig) since = 0;
      wr.wr_id = id;
      wr.send_flags = inline_flag | (sig ? static_cast<unsigned>(IBV_SEND_SIGNALED) : 0u);
      if (imm_writes) {
        wr.opcode = sig ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        wr.imm_data = htonl(kImmBlocks | static_cast<std::uint32_t>(id - sig_upto));
      }
      if (sig) sig_upto = id;
      wr.next = nullptr;
      if (k > 0) wrs[k - 1].next = &wr;
      ++k;
    }
    if (k > 0) {
      ibv_send_wr* bad = nullptr;
      if (int e = ibv_post_send(q.qp.get(), wrs.data(), &bad); e != 0) {
        return fail(q, nread ? "ibv_post_send(RDMA READ)" : "ibv_post_send", e);
      }
      posted += k;
      last_signaled = sig_upto;
    }
    const int n = poll(q, wc, kPollBatch);
    if (!retire(n, false)) return;
    if (n < 0) return fail(q, "ibv_poll_cq", EIO);
  }
  // The final notice, signalled: RC completes in order, so its completion retires the blocks
  // posted after the last signalled one; its immediate tells the target how many blocks it has
  // not been told of yet, and that nothing follows.
  if (!nread && !ctx.aborted()) {
    const std::uint32_t imm =
        kImmFinal | (imm_writes ? kImmBlocks | static_cast<std::uint32_t>(posted - last_signaled) : 0);
    if (post_notice(q, imm, true, posted) == 0) last_signaled = posted;
  }
  // Drain what is still in flight (bounded), so the peer's count matches ours.
  const std::int64_t until = std::min(ctx.hard_deadline() - 1'000'000'000, mono_now_ns() + 2'000'000'000);
  while (completed < last_signaled && mono_now_ns() < until && !ctx.aborted()) {
    if (!retire(poll(q, wc, kPollBatch), true)) return;
  }
  if (nread && !ctx.aborted()) post_notice(q, kImmFinal, true);  // after every block's notice
}

// The target of a stream: counts what arrives (WRITE_WITH_IMM/SEND) or what was taken (notices).
void VerbsEngine::stream_passive(Qp& q) {
  ctx_->enter_data_thread("rdma-rx", q.flow->id, q.flow->role);
  RunContext& ctx = *ctx_;
  ctx.wait_for_start();
  const std::uint64_t block = q.dev->block;
  ibv_wc wc[kPollBatch];
  // The passive side keeps counting after the stop until the active side's final notice (or,
  // without one, until the active side's drain is over).
  const std::int64_t until = ctx.hard_deadline() - 1'000'000'000;
  bool final_seen = false;
  // The target only counts, so poll() sleeps on its completion channel when the CQ is empty
  // (create_qp gives every passive QP one): with 2 x qdepth + 2 receives posted and an immediate
  // only every --cq-mod writes, the wakeup latency cannot starve the sender of receives.
  // Spinning here took CPU from the sender and the provider (Soft-RoCE does its work in the
  // kernel on the same CPUs): the 50 us naps used before still cost this thread 43 % of a vCPU,
  // and fabperf / ib_write_bw (64K, q128/Q100, 3 alternating rounds, idle host) went from 0.89 to
  // 1.05 with the channel (docs/rdma.md).
  while (!final_seen && !stop_ && !ctx.aborted()) {
    const int n = poll(q, wc, kPollBatch);
    if (n < 0) return fail(q, "ibv_poll_cq", EIO);
    // The clock is read only when there is nothing to do (a system call in some guests).
    if (n == 0 && mono_now_ns() >= until) break;
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) return fail_wc(q, wc[i]);
      if (!is_recv(wc[i])) continue;
      const std::uint32_t imm = imm_of(wc[i]);
      final_seen = final_seen || (imm & kImmFinal) != 0;
      if (q.dir == Dir::nread) {
        if (imm == kImmFinal) continue;
        q.flow->counters.add_tx(imm);
      } else {
        q.flow->counters.add_rx(received_bytes(wc[i], block));
      }
      q.flow->counters.add_msg();
      if (int e = repost_recv(q); e != 0) return fail(q, "ibv_post_recv", e);
    }
  }
}

// One request in flight: push = data then a notice back; pull_back = notice then data back;
// nread = notice, the server READs, notice back. Latency from the post to the reply.
void VerbsEngine::rpc_client(Qp& q) {
  ctx_->enter_data_thread("rdma-rpc", q.flow->id, q.flow->role);
  RunContext& ctx = *ctx_;
  ctx.wait_for_start();
  const std::uint64_t len = q.dev->block;
  ibv_wc wc[8];
  const std::int64_t until = ctx.hard_deadline() - 1'000'000'000;
  while (!ctx.stopping() && !stop_) {
    const std::int64_t t0 = mono_now_ns();
    const int e = q.dir == Dir::push ? post_data(q, Dir::push, true, 1) : post_notice(q, 0, true);
    if (e != 0) return fail(q, "ibv_post_send", e);
    bool sent = false, replied = false;
    std::uint32_t got = 0;
    while (!(sent && replied)) {
      if (stop_ || ctx.aborted() || mono_now_ns() > until) return;
      const int n = poll(q, wc, 8);
      if (n < 0) return fail(q, "ibv_poll_cq", EIO);
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) return fail_wc(q, wc[i]);
        if (is_recv(wc[i])) {
          replied = true;
          got = wc[i].byte_len;
          if (int r = repost_recv(q); r != 0) return fail(q, "ibv_post_recv", r);
        } else if (wc[i].wr_id < kProofWrId) {
          sent = true;
        }
      }
    }
    const std::int64_t t1 = mono_now_ns();
    if (ctx.in_window(t1)) q.hist->record(static_cast<std::uint64_t>(t1 - t0));
    if (q.dir == Dir::pull_back) {
      q.flow->counters.add_rx(got);
    } else {
      q.flow->counters.add_tx(len);
    }
    q.flow->counters.add_msg();
  }
}

void VerbsEngine::rpc_server(Qp& q) {
  ctx_->enter_data_thread("rdma-srv", q.flow->id, q.flow->role);
  RunContext& ctx = *ctx_;
  ctx.wait_for_start();
  const std::uint64_t len = q.dev->block;
  ibv_wc wc[8];
  const std::int64_t until = ctx.hard_deadline() - 1'000'000'000;
  std::int64_t last = 0;
  while (!stop_ && !ctx.aborted() && mono_now_ns() < until) {
    const int n = poll(q, wc, 8);
    if (n < 0) return fail(q, "ibv_poll_cq", EIO);
    if (ctx.stopping() && !keep_draining(last, n)) break;
    for (int i = 0; i < n; ++i) {
      const ibv_wc& w = wc[i];
      if (w.status != IBV_WC_SUCCESS) return fail_wc(q, w);
      if (is_recv(w)) {
        if (int r = repost_recv(q); r != 0) return fail(q, "ibv_post_recv", r);
        q.flow->counters.add_msg();
        int e = 0;
        if (q.dir == Dir::push) {
          q.flow->counters.add_rx(w.byte_len);
          e = post_notice(q, 0, true);
        } else {
          e = post_data(q, q.dir, true, 1);  // pull_back sends the block, nread READs it
        }
        if (e != 0) return fail(q, "ibv_post_send", e);
      } else if (w.opcode == IBV_WC_RDMA_READ) {
        q.flow->counters.add_rx(len);
        if (int e = post_notice(q, static_cast<std::uint32_t>(len), true); e != 0)
          return fail(q, "ibv_post_send(notice)", e);
      } else if (w.wr_id == 1 && q.dir == Dir::pull_back) {
        q.flow->counters.add_tx(len);
      }
    }
  }
}

}  // namespace fabperf::verbs
