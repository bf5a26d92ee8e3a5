// RDMA verbs data plane: RC queue pairs on libibverbs, one thread and one CQ per QP.
//
// Set-up follows perftest's order (find device -> open -> check port -> PD/MR/CQ/QP -> exchange
// -> RTR/RTS). The exchange goes one of two ways (docs/rdma.md "Set-up"):
//  - by default through the coordinator's control channel, which is already authenticated: the
//    server creates its QPs at SETUP_SERVER and returns their endpoints (QP number, PSN, GID/LID,
//    buffer address, rkey), each client gets them with SETUP_CLIENT, connects its QPs and returns
//    its own, and RDMA_CONNECT hands those to the server, which then connects its QPs. Before any
//    load, both ends of every QP prove the test token to each other over the QP itself
//    (verbs_peer_proof.cpp);
//  - with --rdma-cm through librdmacm (verbs_cm.cpp).
// This file holds the first way, the start and the stop; verbs_internal.hpp lists the others.
#include "engine/verbs_engine.hpp"
#include "engine/verbs_internal.hpp"
#include "net/sockaddr.hpp"
#include "sysinfo/file_read.hpp"

#include <fmt/format.h>
#include <algorithm>

namespace fabperf {
namespace verbs {

// The device port a connection uses, opened once: by rdma_cm's choice with an id (--rdma-cm),
// else by the GID of the local address.
Device& VerbsEngine::device_for(rdma_cm_id* id, const sockaddr_storage& local) {
  if (id && !id->verbs) throw Error(ExitCode::infrastructure, "rdma_cm bound the connection to no RDMA device");
  const std::string key =
      id ? fmt::format("cm:{}:{}", ibv_get_device_name(id->verbs->device), id->port_num) : net::numeric_host(local);
  std::lock_guard lk(mu_);
  for (auto& d : devices_) {
    if (d->key == key && (!id || d->ctx == id->verbs)) return *d;
  }
  devices_.push_back(id ? open_cm_device(id->verbs, id->port_num, ctx_->spec()) : open_device(ctx_->spec(), local));
  return *devices_.back();
}

void VerbsEngine::add_flow(Qp& q, FlowRole role, const std::string& remote) {
  const Device& d = *q.dev;
  const FlowOp op = q.rpc ? FlowOp::rpc : (q.dir == Dir::pull_back ? FlowOp::read : FlowOp::write);
  const std::string local =
      q.cm_id ? fmt::format("{} rdma_cm qpn {}", d.label, q.local.qpn)
              : fmt::format("{} gid[{}] {} qpn {}", d.label, d.gid_index, gid_text(d.gid.raw), q.local.qpn);
  auto flow = std::make_unique<Flow>(role, op, q.local.peer, local, fmt::format("{} qpn {}", remote, q.remote.qpn));
  q.flow = flow.get();
  ctx_->add_flow(std::move(flow));
  if (q.rpc && q.client) q.hist = &ctx_->add_histogram();
}

// Connects q to the peer's endpoint e (`where` it came from; host names the peer) and gives it
// its flow and the binding its peer proof covers, the same on both ends.
void VerbsEngine::connect_to(Qp& q, const proto::RdmaEndpoint& e, const std::string& where, const std::string& host) {
  if (e.len < 2 * q.dev->block) {
    throw ProtocolError(fmt::format("{}.len: {} bytes, smaller than the {} this test registers (2 x buffsize)", where,
                                    e.len, 2 * q.dev->block));
  }
  q.remote = e;
  q.peer = fmt::format("node {} ({}) qpn {}", e.node, host, q.remote.qpn);
  const proto::RdmaEndpoint& server = q.client ? q.remote : q.local;
  const proto::RdmaEndpoint& client = q.client ? q.local : q.remote;
  q.binding = {server.node, client.node, e.conn, server.qpn, client.qpn, server.gid, client.gid};
  connect_qp(q);
  add_flow(q, q.client ? FlowRole::client : FlowRole::server, host);
}

std::uint16_t VerbsEngine::prepare_server(RunContext& ctx, const ServerPlan& plan) {
  ctx_ = &ctx;
  server_plan_ = plan;
  const TestSpec& spec = ctx.spec();
  check_devices_present(spec);
  if (spec.rdma_cm()) return cm_listen(plan);
  // Through the coordinator: one QP per connection of every client, returned by take_endpoints.
  const std::uint32_t per_pair = spec.connections_per_pair();
  for (const std::uint32_t client : plan.rdma_clients) {
    for (std::uint32_t c = 0; c < per_pair; ++c) {
      const std::string& addr =
          plan.link_addrs.empty() ? plan.control_address : plan.link_addrs[c % plan.link_addrs.size()];
      Device& d = device_for(nullptr, numeric_sockaddr(addr, 0, "resolve RDMA server address"));
      const proto::Token key = derive_client_token(plan.token, client);
      auto q = create_qp(d, spec, dir_for(spec, c), spec.mode() == Mode::rpc, false, client, c, nullptr, &key);
      q->local.node = ctx.node_index();
      std::lock_guard lk(mu_);
      fresh_.push_back(q->local);
      pending_.push_back(std::move(q));
    }
  }
  return 0;
}

std::vector<proto::RdmaEndpoint> VerbsEngine::take_endpoints() {
  std::lock_guard lk(mu_);
  return std::exchange(fresh_, {});
}

// RDMA_CONNECT: the clients' endpoints for the QPs prepare_server created.
std::size_t VerbsEngine::connect_endpoints(RunContext& ctx, const std::vector<proto::RdmaEndpoint>& peers) {
  ctx_ = &ctx;
  std::lock_guard lk(mu_);
  std::size_t ready = 0;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const auto& e = peers[i];
    const std::string where = fmt::format("RDMA_CONNECT.endpoints[{}]", i);
    if (e.peer != ctx.node_index()) {
      throw ProtocolError(fmt::format("{}.peer: node {}, but this agent is node {}", where, e.peer, ctx.node_index()));
    }
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const auto& q) { return q->local.peer == e.node && q->local.conn == e.conn; });
    if (it == pending_.end()) {
      throw ProtocolError(
          fmt::format("{}: no queue pair of this server waits for node {} connection {} (unknown or already connected)",
                      where, e.node, e.conn));
    }
    connect_to(**it, e, where, gid_text(e.gid));
    qps_.push_back(std::move(*it));
    pending_.erase(it);
    ++ready;
  }
  if (!pending_.empty()) {
    const Qp& q = *pending_.front();
    throw ProtocolError(fmt::format(
        "RDMA_CONNECT: no endpoint for node {} connection {} ({} queue pairs of this server left unconnected)",
        q.local.peer, q.local.conn, pending_.size()));
  }
  return ready;
}

void VerbsEngine::prepare_client(RunContext& ctx, const ClientPlan& plan) {
  ctx_ = &ctx;
  const TestSpec& spec = ctx.spec();
  const std::uint32_t per_pair = spec.connections_per_pair();
  for (std::size_t ti = 0; ti < plan.targets.size(); ++ti) {
    const auto& t = plan.targets[ti];
    const std::string list = fmt::format("SETUP_CLIENT.targets[{}].rdma", ti);
    if (!spec.rdma_cm() && t.rdma.size() != per_pair) {
      throw ProtocolError(fmt::format("{}: {} queue pairs of node {}, expected {} (one per connection)", list,
                                      t.rdma.size(), t.node_index, per_pair));
    }
    for (std::uint32_t c = 0; c < per_pair; ++c) {
      const std::string host = t.link_hosts.empty() ? t.host : t.link_hosts[c % t.link_hosts.size()];
      if (spec.rdma_cm()) {
        cm_connect(plan, t, c, host);
        continue;
      }
      auto e = std::find_if(t.rdma.begin(), t.rdma.end(), [&](const proto::RdmaEndpoint& x) { return x.conn == c; });
      if (e == t.rdma.end()) throw ProtocolError(fmt::format("{}: no queue pair for connection {}", list, c));
      if (e->node != t.node_index || e->peer != ctx.node_index()) {
        throw ProtocolError(fmt::format("{}: endpoint of node {} for node {}, expected node {} for this node {}", list,
                                        e->node, e->peer, t.node_index, ctx.node_index()));
      }
      const std::string source =
          plan.source_addrs.empty() ? std::string() : plan.source_addrs[c % plan.source_addrs.size()];
      Device& d = device_for(nullptr, local_address_towards(host, source));
      auto q =
          create_qp(d, spec, dir_for(spec, c), spec.mode() == Mode::rpc, true, t.node_index, c, nullptr, &plan.token);
      q->local.node = ctx.node_index();
      connect_to(*q, *e, list, host);
      std::lock_guard lk(mu_);
      fresh_.push_back(q->local);
      qps_.push_back(std::move(q));
    }
  }
  if (spec.mode() == Mode::rpc && spec.threads() != 4) {
    ctx.warn(
        "--threads does not apply to --transport rdma: rpc concurrency is one request in flight per QP (--parallel QPs "
        "per pair)");
  }
}

void VerbsEngine::seal(RunContext& ctx) {
  ctx_ = &ctx;
  accept_stop_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  // The run samples the port counters of every QP's port, and the counters of the interface a
  // RoCE GID belongs to like a TCP link's (the flow set is final here, before the run reads it).
  std::lock_guard lk(mu_);
  for (auto& q : qps_) {
    if (!q->flow || !q->flow->rdma_port.empty()) continue;
    q->flow->rdma_port = q->dev->label;
    if (!q->dev->infiniband && q->flow->device.empty()) {
      q->flow->device = sysfs::read_line(fmt::format("/sys/class/infiniband/{}/ports/{}/gid_attrs/ndevs/{}",
                                                     q->dev->name, q->dev->port, q->dev->gid_index));
    }
  }
}

void VerbsEngine::start(RunContext& ctx) {
  seal(ctx);
  std::lock_guard lk(mu_);
  for (auto& qp : qps_) {
    Qp* q = qp.get();
    threads_.emplace_back([this, q] {
      if (q->proof) {
        try {
          prove_peer(*q);
        } catch (const std::exception& e) {
          // Nothing was posted to this peer; the whole test on this node stops with the reason
          // (the result is then incomplete, and the coordinator exits 3 naming it). An unproven
          // peer's QP goes to the error state so that it cannot reach this node's buffer either.
          if (dynamic_cast<const PeerProofError*>(&e) != nullptr) {
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_ERR;
            (void)ibv_modify_qp(q->qp.get(), &a, IBV_QP_STATE);
          }
          q->flow->fail(e.what());
          ctx_->abort(e.what());
          return;
        }
      }
      if (q->rpc) {
        q->client ? rpc_client(*q) : rpc_server(*q);
      } else {
        q->stream_passive() ? stream_passive(*q) : stream_active(*q);
      }
    });
  }
}

void VerbsEngine::join() {
  accept_stop_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  join_all(threads_);
}

}  // namespace verbs

std::unique_ptr<Engine> make_verbs_engine() {
  return std::make_unique<verbs::VerbsEngine>();
}

}  // namespace fabperf
