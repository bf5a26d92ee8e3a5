// The peer proof over each queue pair set up through the coordinator: before any load, both
// ends prove the test token to each other over the QP itself (include/fabperf/engine/rdma_qp_proof.hpp).
// An endpoint the coordinator forwarded is only a claim, and an address that does not answer with
// the proof gets no RDMA WRITE or READ.
#include "engine/verbs_internal.hpp"

#include <fabperf/core/clock.hpp>
#include <fabperf/proto/auth.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <cstring>
#include <ctime>

namespace fabperf::verbs {
namespace {

PeerProofError unproven(const Qp& q, std::string_view why) {
  return PeerProofError(
      fmt::format("RDMA peer {} did not prove the test token: {} (queue pair {} on {}; nothing was "
                  "posted to it)",
                  q.peer, why, q.local.qpn, q.dev->label));
}

}  // namespace

// Completions are taken one at a time and only until the proof message: the data that a proven
// peer sends right after its last proof message stays in the CQ for the data loop. Our own proof
// SENDs complete here or later (the data loops skip kProofWrId).
std::span<const std::uint8_t> VerbsEngine::next_proof(Qp& q, std::uint32_t& received, std::int64_t deadline) {
  ibv_wc wc{};
  for (;;) {
    if (stop_ || ctx_->aborted()) throw unproven(q, "the test stopped first");
    const int n = poll(q, &wc, 1);
    if (n < 0) throw unproven(q, "ibv_poll_cq failed");
    if (n == 0) {
      if (mono_now_ns() >= deadline)
        throw unproven(q, fmt::format("no proof within {} s", kProofTimeoutNs / 1'000'000'000));
      if (!q.ch) {
        timespec nap{0, 50'000};  // an idle peer is waited for without spinning a core
        nanosleep(&nap, nullptr);
      }
      continue;
    }
    if (wc.status != IBV_WC_SUCCESS) {
      throw unproven(q, fmt::format("{} completion: {} (wc status {})", opcode_name(wc.opcode),
                                    ibv_wc_status_str(wc.status), static_cast<int>(wc.status)));
    }
    if (!is_recv(wc)) continue;  // our own proof SEND
    if (wc.opcode != IBV_WC_RECV)
      throw unproven(q, fmt::format("it sent {} where a proof SEND belongs", opcode_name(wc.opcode)));
    const std::uint8_t* at = q.proof_buf.get() + kProofSlot * (2 + received);
    ++received;
    return {at, std::min<std::size_t>(wc.byte_len, kProofSlot)};
  }
}

// Client: hello (its nonce) -> the server's proof, checked -> its own proof. Server: the hello ->
// its proof -> the client's proof, checked. Each end posts load only after this returns.
void VerbsEngine::prove_peer(Qp& q) {
  const std::int64_t deadline = std::min(mono_now_ns() + kProofTimeoutNs, ctx_->hard_deadline() - 1'000'000'000);
  auto must = [&](const qp_proof::Checked& c) {
    if (!c.ok()) throw unproven(q, c.text);
  };
  auto post = [&](std::size_t slot, const qp_proof::Message& m) {
    std::uint8_t* at = q.proof_buf.get() + kProofSlot * slot;
    std::memcpy(at, m.data(), m.size());
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(at), static_cast<std::uint32_t>(m.size()), q.proof_mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kProofWrId;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (int e = ibv_post_send(q.qp.get(), &wr, &bad); e != 0) {
      throw PeerProofError(fmt::format("RDMA peer {}: posting the proof of the test token failed: {} on {}", q.peer,
                                       errno_text(e), q.dev->label));
    }
  };
  std::uint32_t received = 0;
  const auth::Nonce mine = auth::make_nonce();
  auth::Nonce theirs{};
  if (q.client) {
    post(0, qp_proof::encode_client_hello(mine));
    must(qp_proof::check_server_proof(next_proof(q, received, deadline), q.proof_token, q.binding, mine, theirs));
    post(1, qp_proof::encode_client_proof(q.proof_token, q.binding, mine, theirs));
  } else {
    must(qp_proof::check_client_hello(next_proof(q, received, deadline), theirs));
    post(0, qp_proof::encode_server_proof(q.proof_token, q.binding, theirs, mine));
    must(qp_proof::check_client_proof(next_proof(q, received, deadline), q.proof_token, q.binding, theirs, mine));
  }
}

}  // namespace fabperf::verbs
