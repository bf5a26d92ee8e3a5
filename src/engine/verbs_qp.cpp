// Queue pair set-up for the RDMA engine: the CQ, the QP and its first receives, and the move to
// RTS against the peer's endpoint.
#include "engine/verbs_internal.hpp"

#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <random>

namespace fabperf::verbs {
Dir dir_for(const TestSpec& spec, std::uint32_t c) {
  if (spec.test() == TestKind::nwrite) return Dir::nread;
  return pair_writes(spec, c) ? Dir::push : Dir::pull_back;
}

// Without a cm id the QP is created with ibv_create_qp and moved to INIT here; with one,
// rdma_create_qp does both (rdma_accept/rdma_connect bring it to RTS).
// The QP's role (direction, rpc, which end) is set here because it decides how the thread that
// serves the QP waits: the passive end of a stream (it only counts the immediates) always sleeps
// on completion events; everything else busy-polls unless --rdma-events.
// With `proof` (set-up through the coordinator) the first receives posted are the proof's:
// one on the client (the server's proof), two on the server (the client's hello and proof), so
// the peer's first SENDs land there and never in the data buffer.
std::unique_ptr<Qp> create_qp(Device& d, const TestSpec& spec, Dir dir, bool rpc, bool client, std::uint32_t peer_node,
                              std::uint32_t conn, rdma_cm_id* id, const proto::Token* proof) {
  auto q = std::make_unique<Qp>();
  q->dev = &d;
  q->dir = dir;
  q->rpc = rpc;
  q->client = client;
  q->proof = proof != nullptr;
  if (proof) q->proof_token = *proof;
  const std::uint32_t proof_recvs = proof ? (client ? 1u : 2u) : 0u;
  const int depth = static_cast<int>(spec.qdepth());
  if (spec.rdma_events() || q->stream_passive())
    q->ch = verbs_made(CompChannelPtr(ibv_create_comp_channel(d.ctx)), "ibv_create_comp_channel", d.label);
  q->cq = verbs_made(CqPtr(ibv_create_cq(d.ctx, 4 * depth + 8, nullptr, q->ch.get(), 0)), "ibv_create_cq", d.label);
  ibv_qp_init_attr ia{};
  ia.send_cq = q->cq.get();
  ia.recv_cq = q->cq.get();
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = static_cast<std::uint32_t>(2 * depth + 2);
  ia.cap.max_recv_wr = static_cast<std::uint32_t>(2 * depth + 2) + proof_recvs;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = spec.inline_size();
  if (id) {
    verbs_check(rdma_create_qp(id, d.pd.get(), &ia), "rdma_create_qp", d.label);
    q->qp = QpPtr(id->qp, QpRelease{id});
  } else {
    q->qp = verbs_made(QpPtr(ibv_create_qp(d.pd.get(), &ia)), "ibv_create_qp", d.label);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = d.port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    verbs_check(ibv_modify_qp(q->qp.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
                "ibv_modify_qp(INIT)", d.label);
  }
  d.max_inline = ia.cap.max_inline_data;
  q->local = {.peer = peer_node,
              .conn = conn,
              .qpn = q->qp->qp_num,
              .psn = std::random_device{}() & 0xffffff,
              .lid = d.lid,
              .addr = reinterpret_cast<std::uintptr_t>(d.buf.get()),
              .len = 2 * d.block,
              .rkey = d.mr->rkey};
  std::memcpy(q->local.gid.data(), d.gid.raw, 16);
  if (proof) {
    q->proof_buf = verbs_made(aligned_buffer(kProofSlot * kProofSlots), "allocating the peer proof buffer", d.label);
    std::memset(q->proof_buf.get(), 0, kProofSlot * kProofSlots);
    // Local access only: the peer can SEND into the posted slots, never write or read them.
    q->proof_mr = verbs_made(MrPtr(ibv_reg_mr(d.pd.get(), q->proof_buf.get(), kProofSlot * kProofSlots,
                                              static_cast<int>(IBV_ACCESS_LOCAL_WRITE))),
                             "ibv_reg_mr(peer proof)", d.label);
    for (std::uint32_t i = 0; i < proof_recvs; ++i) {
      const std::uint8_t* at = q->proof_buf.get() + kProofSlot * (2 + i);
      verbs_check(post_recv(q->qp.get(), at, kProofSlot, q->proof_mr->lkey, kProofWrId + 2 + i),
                  "ibv_post_recv(peer proof)", d.label);
    }
  }
  for (int i = 0; i < 2 * depth + 2; ++i)
    verbs_check(post_recv(q->qp.get(), d.buf.get() + d.block, d.block, d.mr->lkey), "ibv_post_recv", d.label);
  if (q->ch) verbs_check(ibv_req_notify_cq(q->cq.get(), 0), "ibv_req_notify_cq", d.label);
  return q;
}

void connect_qp(Qp& q) {
  const Device& d = *q.dev;
  // Both transitions name the peer whose endpoint they were given.
  auto modify_to_peer = [&](ibv_qp_attr& attr, int mask, const char* call) {
    if (const int e = ibv_modify_qp(q.qp.get(), &attr, mask); e != 0)
      throw VerbsError(call, d.label, e, fmt::format("{} (peer {})", verbs_fail(call, d.label, e).what(), q.peer));
  };
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = d.mtu;
  a.dest_qp_num = q.remote.qpn;
  a.rq_psn = q.remote.psn;
  a.max_dest_rd_atomic = static_cast<std::uint8_t>(d.max_rd_atomic);
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = d.port;
  if (d.infiniband) {
    a.ah_attr.dlid = static_cast<std::uint16_t>(q.remote.lid);
  } else {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, q.remote.gid.data(), 16);
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(d.gid_index);
    a.ah_attr.grh.hop_limit = 64;
  }
  modify_to_peer(a,
                 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                 "ibv_modify_qp(RTR)");
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = 14;  // 4.096 us * 2^14 = 67 ms per try: a dead peer is noticed within ~0.5 s
  r.retry_cnt = 7;
  r.rnr_retry = 7;
  r.sq_psn = q.local.psn;
  r.max_rd_atomic = static_cast<std::uint8_t>(d.max_rd_atomic);
  modify_to_peer(
      r, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
      "ibv_modify_qp(RTS)");
}

}  // namespace fabperf::verbs
