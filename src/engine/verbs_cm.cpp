// --rdma-cm set-up for the RDMA engine: the client resolves the server's address and connects, the
// server agent listens and accepts; the private data carries the buffer address and rkey under an
// HMAC of the client's token (so a stranger cannot get a QP) and the server's answer proves the
// test token in return (include/fabperf/engine/rdma_cm_wire.hpp). The per-test token makes a request
// useless in another test; within a test a (node, conn) is accepted once.
#include "engine/verbs_internal.hpp"
#include "net/sockaddr.hpp"

#include <fabperf/core/clock.hpp>
#include <fabperf/core/printable.hpp>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

namespace fabperf::verbs {
namespace {

constexpr int kCmTimeoutMs = 5000;  // each rdma_cm step (address, route, connect)

VerbsError cm_fail(const char* call, const std::string& where, int err) {
  return VerbsError(
      call, where, err,
      fmt::format("{} {}: {} (--rdma-cm; are rdma_cm and rdma_ucm loaded?)", call, where, errno_text(err)));
}

// The private data an event carries.
std::vector<std::uint8_t> private_data(const rdma_cm_event& ev) {
  const auto* p = static_cast<const std::uint8_t*>(ev.param.conn.private_data);
  return p ? std::vector<std::uint8_t>(p, p + ev.param.conn.private_data_len) : std::vector<std::uint8_t>();
}

// Waits for `want` on `id` (events of other ids on the channel are acknowledged and skipped).
// Returns the event's private data and the peer's QP number; throws naming what came instead.
struct CmResult {
  std::vector<std::uint8_t> data;
  std::uint32_t qp_num{0};
};
CmResult cm_wait(rdma_event_channel* ch, rdma_cm_id* id, rdma_cm_event_type want, const std::string& where) {
  const std::int64_t deadline = mono_now_ns() + std::int64_t{kCmTimeoutMs} * 1'000'000;
  for (;;) {
    const std::int64_t left = (deadline - mono_now_ns()) / 1'000'000;
    if (left <= 0) {
      throw Error(ExitCode::infrastructure, fmt::format("rdma_cm {}: no {} within {} s (--rdma-cm)", where,
                                                        rdma_event_str(want), kCmTimeoutMs / 1000));
    }
    pollfd pfd{ch->fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left)) <= 0) continue;
    rdma_cm_event* raw = nullptr;
    verbs_check<cm_fail>(rdma_get_cm_event(ch, &raw), "rdma_get_cm_event", where);
    const CmEventPtr ev(raw);
    if (ev->id != id) continue;
    CmResult r{private_data(*ev), ev->param.conn.qp_num};
    if (ev->event == want) return r;
    std::string reason;
    if (ev->event == RDMA_CM_EVENT_REJECTED && !r.data.empty()) {
      reason.assign(r.data.begin(), r.data.end());
      reason = printable(reason.c_str());  // the remote side's words: defused before any log
      if (!reason.empty()) reason.insert(0, ": refused by the server: ");
    }
    throw Error(ExitCode::infrastructure,
                fmt::format("rdma_cm {}: {} (status {}) instead of {}{}", where, rdma_event_str(ev->event), ev->status,
                            rdma_event_str(want), reason));
  }
}

// Both ends of an rdma_cm connection: the private data, RDMA READ resources from the device, and
// the same retry counts as the control-channel set-up.
rdma_conn_param cm_conn_param(const Device& d, const std::uint8_t* data, std::size_t len) {
  rdma_conn_param p{};
  p.private_data = data;
  p.private_data_len = static_cast<std::uint8_t>(len);
  p.responder_resources = static_cast<std::uint8_t>(d.max_rd_atomic);
  p.initiator_depth = static_cast<std::uint8_t>(d.max_rd_atomic);
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  return p;
}

// A cm id on the channel, which is created first when there is none yet.
CmIdPtr create_cm_id(EventChannelPtr& ch, const std::string& where) {
  if (!ch) ch = verbs_made<cm_fail>(EventChannelPtr(rdma_create_event_channel()), "rdma_create_event_channel", where);
  rdma_cm_id* id = nullptr;
  verbs_check<cm_fail>(rdma_create_id(ch.get(), &id, nullptr, RDMA_PS_TCP), "rdma_create_id", where);
  return CmIdPtr(id);
}

}  // namespace

std::uint16_t VerbsEngine::cm_listen(const ServerPlan& plan) {
  const std::string& where = plan.bind_address;
  cm_listen_id_ = create_cm_id(cm_listen_ch_, "on " + where);
  sockaddr_storage ss = numeric_sockaddr(plan.bind_address, 0, "resolve RDMA listen address");
  verbs_check<cm_fail>(rdma_bind_addr(cm_listen_id_.get(), reinterpret_cast<sockaddr*>(&ss)), "rdma_bind_addr",
                       where + " (no RDMA device has this address?)");
  verbs_check<cm_fail>(rdma_listen(cm_listen_id_.get(), 1024), "rdma_listen", "on " + where);
  const std::uint16_t port = ntohs(rdma_get_src_port(cm_listen_id_.get()));
  accept_thread_ = std::thread([this] { cm_accept_loop(); });
  return port;
}

void VerbsEngine::cm_accept_loop() {
  while (!accept_stop_) {
    pollfd pfd{cm_listen_ch_->fd, POLLIN, 0};
    if (::poll(&pfd, 1, kTickMs) <= 0) continue;
    rdma_cm_event* raw = nullptr;
    if (rdma_get_cm_event(cm_listen_ch_.get(), &raw) != 0) continue;
    CmEventPtr ev(raw);
    // ESTABLISHED and DISCONNECTED need nothing: a QP whose peer vanishes fails its completions.
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) continue;
    const std::vector<std::uint8_t> req = private_data(*ev);
    rdma_cm_id* const id = ev->id;
    const std::uint32_t peer_qpn = ev->param.conn.qp_num;  // the client's queue pair
    ev.reset();  // acknowledged first: a refused request's id goes, and rdma_destroy_id waits for that
    cm_serve_request(CmIdPtr(id), req, peer_qpn);
  }
}

// One QP per connection request: check the client's proof, create the QP on the request's id,
// accept with our buffer address, rkey and proof. A refused request's id goes when this returns,
// after the rejection that needs it.
void VerbsEngine::cm_serve_request(CmIdPtr id, std::span<const std::uint8_t> req, std::uint32_t peer_qpn) {
  rdma_cm_id* const raw = id.get();  // the QP that takes the id lives to the end of this function
  auto refuse = [&](const std::string& why) {
    char text[rdma_cm::kRejectSize] = {};
    why.copy(text, sizeof text - 1);  // into a zeroed buffer, the terminator left in place
    rdma_reject(raw, text, static_cast<std::uint8_t>(std::strlen(text) + 1));
  };
  sockaddr_storage peer_ss{};  // the peer address is held in a sockaddr_storage-sized union
  if (const sockaddr* pa = rdma_get_peer_addr(raw)) std::memcpy(&peer_ss, pa, sizeof peer_ss);
  const std::string peer_addr = net::numeric_host(peer_ss);
  const rdma_cm::CheckedRequest checked = rdma_cm::check_request(req, server_plan_.token, ctx_->node_index());
  if (!checked.request) {
    // Reported in the server's result: someone who is not a client of this test tried.
    ctx_->warn(fmt::format("RDMA connection request from {} refused: {}", peer_addr, checked.refusal));
    return refuse(checked.refusal);
  }
  const rdma_cm::Request& r = *checked.request;
  const std::uint32_t node = r.node;
  const proto::Token tok = derive_client_token(server_plan_.token, node);
  const auto dir = static_cast<Dir>(r.dir);
  {
    std::lock_guard lk(mu_);
    for (const auto& q : qps_) {
      if (!q->client && q->local.peer == node && q->local.conn == r.conn)
        return refuse("this connection is already set up");
    }
  }
  std::unique_ptr<Qp> q;
  try {
    Device& d = device_for(raw);
    q = create_qp(d, ctx_->spec(), dir, r.rpc, false, node, r.conn, raw);
    q->cm_id = std::move(id);
    q->remote = {.qpn = peer_qpn, .addr = r.addr, .len = 2 * d.block, .rkey = r.rkey};
    const rdma_cm::ReplyBytes rep = rdma_cm::encode_reply({q->local.rkey, q->local.addr}, tok, checked.mac);
    rdma_conn_param p = cm_conn_param(d, rep.data(), rep.size());
    verbs_check(rdma_accept(raw, &p), "rdma_accept", d.label);
    q->peer = fmt::format("node {} ({}) qpn {}", node, peer_addr, peer_qpn);
    add_flow(*q, FlowRole::server, peer_addr);
    std::lock_guard lk(mu_);
    qps_.push_back(std::move(q));
  } catch (const std::exception& e) {
    ctx_->warn(fmt::format("RDMA set-up (rdma_cm) for node {} failed: {}", node, e.what()));
    refuse(e.what());
  }
}

void VerbsEngine::cm_connect(const ClientPlan& plan, const proto::Target& t, std::uint32_t c, const std::string& host) {
  const TestSpec& spec = ctx_->spec();
  const std::string where = fmt::format("{}:{}", host, t.port);
  CmIdPtr owned = create_cm_id(cm_client_ch_, "for " + where);
  rdma_event_channel* const ch = cm_client_ch_.get();
  rdma_cm_id* const id = owned.get();
  sockaddr_storage dst = numeric_sockaddr(host, t.port, "resolve RDMA server address");
  sockaddr_storage src{};
  const bool bind_src = !plan.source_addrs.empty();
  if (bind_src) src = numeric_sockaddr(plan.source_addrs[c % plan.source_addrs.size()], 0, "resolve source address");
  verbs_check<cm_fail>(rdma_resolve_addr(id, bind_src ? reinterpret_cast<sockaddr*>(&src) : nullptr,
                                         reinterpret_cast<sockaddr*>(&dst), kCmTimeoutMs),
                       "rdma_resolve_addr", where);
  (void)cm_wait(ch, id, RDMA_CM_EVENT_ADDR_RESOLVED, "resolving " + where);
  verbs_check<cm_fail>(rdma_resolve_route(id, kCmTimeoutMs), "rdma_resolve_route", where);
  (void)cm_wait(ch, id, RDMA_CM_EVENT_ROUTE_RESOLVED, "route to " + where);
  Device& d = device_for(id);
  auto q = create_qp(d, spec, dir_for(spec, c), spec.mode() == Mode::rpc, true, t.node_index, c, id);
  q->cm_id = std::move(owned);
  const rdma_cm::RequestBytes req =
      rdma_cm::encode_request(rdma_cm::make_request(static_cast<std::uint8_t>(q->dir), q->rpc, ctx_->node_index(), c,
                                                    q->local.rkey, q->local.addr, t.node_index),
                              plan.token);
  // 4.096 us * 2^14 = 67 ms per try, as without rdma_cm: a dead peer is noticed within ~0.5 s.
  std::uint8_t ack_timeout = 14;
  (void)rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout, sizeof ack_timeout);
  rdma_conn_param p = cm_conn_param(d, req.data(), req.size());
  verbs_check<cm_fail>(rdma_connect(id, &p), "rdma_connect", where);
  const CmResult r = cm_wait(ch, id, RDMA_CM_EVENT_ESTABLISHED, "connect to " + where);
  std::string why;
  const auto reply = rdma_cm::check_reply(r.data, plan.token, rdma_cm::request_mac(req), why);
  if (!reply) throw Error(ExitCode::infrastructure, fmt::format("rdma_cm connect to {}: {}", where, why));
  q->remote = {.qpn = r.qp_num, .addr = reply->addr, .len = 2 * d.block, .rkey = reply->rkey};
  q->peer = fmt::format("node {} ({}) qpn {}", t.node_index, host, r.qp_num);
  add_flow(*q, FlowRole::client, host);
  std::lock_guard lk(mu_);
  qps_.push_back(std::move(q));
}

}  // namespace fabperf::verbs
