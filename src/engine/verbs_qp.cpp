// Queue pair set-up for the RDMA engine: the CQ, the QP and its first receives, and the move to
// RTS against the peer's endpoint.
#include "engine/verbs_internal.hpp"

#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <random>

namespace fabperf::verbs {
namespace {

std::uint32_t random_psn() {
  std::random_device rd;
  return rd() & 0xffffff;
}

}  // namespace

proto::RdmaEndpoint to_wire(const Endpoint& e, std::uint32_t node, std::uint32_t peer, std::uint32_t conn) {
  proto::RdmaEndpoint w{node, peer, conn, e.qpn, e.psn, e.lid, {}, e.addr, e.len, e.rkey};
  std::memcpy(w.gid.data(), e.gid.raw, 16);
  return w;
}
Endpoint from_wire(const proto::RdmaEndpoint& w) {
  Endpoint e{w.qpn, w.psn, w.lid, w.rkey, w.addr, w.len, {}};
  std::memcpy(e.gid.raw, w.gid.data(), 16);
  return e;
}

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
  q->peer_node = peer_node;
  q->conn = conn;
  q->proof = proof != nullptr;
  if (proof) q->proof_token = *proof;
  const std::uint32_t proof_recvs = proof ? (client ? 1u : 2u) : 0u;
  const int depth = static_cast<int>(spec.qdepth());
  if (spec.rdma_events() || q->stream_passive()) {
    q->ch.reset(ibv_create_comp_channel(d.ctx));
    if (!q->ch) throw verbs_fail("ibv_create_comp_channel", d.label, errno);
  }
  q->cq.reset(ibv_create_cq(d.ctx, 4 * depth + 8, nullptr, q->ch.get(), 0));
  if (!q->cq) throw verbs_fail("ibv_create_cq", d.label, errno);
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
    if (rdma_create_qp(id, d.pd.get(), &ia) != 0) throw verbs_fail("rdma_create_qp", d.label, errno);
    q->qp = QpPtr(id->qp, QpRelease{id});
  } else {
    q->qp.reset(ibv_create_qp(d.pd.get(), &ia));
    if (!q->qp) throw verbs_fail("ibv_create_qp", d.label, errno);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = d.port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (int e = ibv_modify_qp(q->qp.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
        e != 0) {
      throw verbs_fail("ibv_modify_qp(INIT)", d.label, e);
    }
  }
  d.max_inline = ia.cap.max_inline_data;
  q->local.qpn = q->qp->qp_num;
  q->local.psn = random_psn();
  q->local.lid = d.lid;
  q->local.rkey = d.mr->rkey;
  q->local.addr = reinterpret_cast<std::uintptr_t>(d.buf.get());
  q->local.len = 2 * d.block;
  q->local.gid = d.gid;
  if (proof) {
    q->proof_buf = aligned_buffer(kProofSlot * kProofSlots);
    if (!q->proof_buf) throw verbs_fail("allocating the peer proof buffer", d.label, ENOMEM);
    std::memset(q->proof_buf.get(), 0, kProofSlot * kProofSlots);
    // Local access only: the peer can SEND into the posted slots, never write or read them.
    q->proof_mr.reset(
        ibv_reg_mr(d.pd.get(), q->proof_buf.get(), kProofSlot * kProofSlots, static_cast<int>(IBV_ACCESS_LOCAL_WRITE)));
    if (!q->proof_mr) throw verbs_fail("ibv_reg_mr(peer proof)", d.label, errno);
    for (std::uint32_t i = 0; i < proof_recvs; ++i) {
      const std::uint8_t* at = q->proof_buf.get() + kProofSlot * (2 + i);
      if (int e = post_recv(q->qp.get(), at, kProofSlot, q->proof_mr->lkey, kProofWrId + 2 + i); e != 0)
        throw verbs_fail("ibv_post_recv(peer proof)", d.label, e);
    }
  }
  for (int i = 0; i < 2 * depth + 2; ++i) {
    if (int e = post_recv(q->qp.get(), d.buf.get() + d.block, d.block, d.mr->lkey); e != 0)
      throw verbs_fail("ibv_post_recv", d.label, e);
  }
  if (q->ch && ibv_req_notify_cq(q->cq.get(), 0) != 0) throw verbs_fail("ibv_req_notify_cq", d.label, errno);
  return q;
}

void connect_qp(Qp& q) {
  const Device& d = *q.dev;
  // Both transitions name the peer whose endpoint they were given.
  auto refused = [&](const char* call, int e) {
    return VerbsError(call, d.label, e, fmt::format("{} (peer {})", verbs_fail(call, d.label, e).what(), q.peer));
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
    a.ah_attr.grh.dgid = q.remote.gid;
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(d.gid_index);
    a.ah_attr.grh.hop_limit = 64;
  }
  if (int e = ibv_modify_qp(q.qp.get(), &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      e != 0) {
    throw refused("ibv_modify_qp(RTR)", e);
  }
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = 14;  // 4.096 us * 2^14 = 67 ms per try: a dead peer is noticed within ~0.5 s
  r.retry_cnt = 7;
  r.rnr_retry = 7;
  r.sq_psn = q.local.psn;
  r.max_rd_atomic = static_cast<std::uint8_t>(d.max_rd_atomic);
  if (int e = ibv_modify_qp(q.qp.get(), &r,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                IBV_QP_MAX_QP_RD_ATOMIC);
      e != 0) {
    throw refused("ibv_modify_qp(RTS)", e);
  }
}

}  // namespace fabperf::verbs
