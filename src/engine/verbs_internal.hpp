// What the RDMA engine's files share: the objects it owns (a device port with its protection
// domain and registered buffer, a queue pair with its CQ) and the engine's class. The work is split
// by concern: verbs_device.cpp (which port a connection uses), verbs_qp.cpp (QP set-up),
// verbs_engine.cpp (set-up through the coordinator, start, stop), verbs_cm.cpp (--rdma-cm),
// verbs_peer_proof.cpp (the proof over each QP before any load), verbs_loops.cpp (the hot loops).
#pragma once

#include <fabperf/core/error.hpp>
#include <fabperf/engine/engine.hpp>
#include <fabperf/engine/rdma_cm_wire.hpp>
#include <fabperf/engine/rdma_qp_proof.hpp>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <sys/socket.h>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace fabperf::verbs {

// Owners of the verbs and rdma_cm objects: each is released by the call that matches its creator,
// once, however set-up ends (a throw half-way included). A struct that holds several declares them
// in creation order, so they go in reverse: a QP before its CQ, an MR before its PD, everything
// before the device context.
template <auto Release>
struct Releaser {
  void operator()(auto* p) const noexcept { (void)Release(p); }
};
template <class T, auto Release>
using Owned = std::unique_ptr<T, Releaser<Release>>;

using DeviceListPtr = Owned<ibv_device*, ibv_free_device_list>;
using ContextPtr = Owned<ibv_context, ibv_close_device>;
using PdPtr = Owned<ibv_pd, ibv_dealloc_pd>;
using MrPtr = Owned<ibv_mr, ibv_dereg_mr>;
using CompChannelPtr = Owned<ibv_comp_channel, ibv_destroy_comp_channel>;
using CqPtr = Owned<ibv_cq, ibv_destroy_cq>;
using CmIdPtr = Owned<rdma_cm_id, rdma_destroy_id>;
using EventChannelPtr = Owned<rdma_event_channel, rdma_destroy_event_channel>;
using BufferPtr = Owned<std::uint8_t, ::free>;
using CmEventPtr = Owned<rdma_cm_event, rdma_ack_cm_event>;

// A QP that rdma_create_qp made belongs to its cm id's bookkeeping (id->qp) and goes with
// rdma_destroy_qp, which needs the id still alive: the owner of the id outlives this handle.
struct QpRelease {
  rdma_cm_id* cm_id{nullptr};
  void operator()(ibv_qp* qp) const noexcept { cm_id ? rdma_destroy_qp(cm_id) : (void)ibv_destroy_qp(qp); }
};
using QpPtr = std::unique_ptr<ibv_qp, QpRelease>;

// Page-aligned, as registered memory should be; null (with errno) when the allocation failed.
inline BufferPtr aligned_buffer(std::size_t bytes) {
  void* p = nullptr;
  if (const int e = posix_memalign(&p, 4096, bytes); e != 0) errno = e;
  return BufferPtr(static_cast<std::uint8_t*>(p));
}

// One opened device port with its protection domain and the test's one registered buffer.
struct Device {
  std::string name;
  std::string label;     // "rxe0:1"
  BufferPtr buf;         // 2 x block: src = buf, dst = buf + block
  ContextPtr owned_ctx;  // null for librdmacm's context (--rdma-cm): it closes that one, not us
  ibv_context* ctx{nullptr};
  PdPtr pd;
  MrPtr mr;
  std::size_t block{0};
  std::uint8_t port{1};
  int gid_index{-1};
  ibv_gid gid{};
  bool infiniband{false};
  std::uint16_t lid{0};
  ibv_mtu mtu{IBV_MTU_1024};
  std::uint32_t max_rd_atomic{1};
  std::uint32_t max_inline{0};
  std::string key;  // the local address it was chosen for ("cm:DEV:PORT" with --rdma-cm)
};

VerbsError verbs_fail(const char* call, const std::string& dev, int err);
// Throws Fail(call, where, errno) when a call failed: a non-zero return (the errno itself when
// positive, as the verbs return it; -1 leaves it in errno, as rdma_cm does) or a null object.
template <auto Fail = verbs_fail>
void verbs_check(int rc, const char* call, const std::string& where) {
  if (rc != 0) throw Fail(call, where, rc > 0 ? rc : errno);
}
template <auto Fail = verbs_fail, class Ptr>
Ptr verbs_made(Ptr p, const char* call, const std::string& where) {
  if (!p) throw Fail(call, where, errno);
  return p;
}
std::string gid_text(std::span<const std::uint8_t, 16> g);
// A numeric address (and port) as a socket address; throws naming what it was for.
sockaddr_storage numeric_sockaddr(const std::string& host, std::uint16_t port, const char* what);
// The local address the kernel would use towards `host` (from `source` when given).
sockaddr_storage local_address_towards(const std::string& host, const std::string& source);
// Fails at set-up, not at the first client, when this node has no usable device at all.
void check_devices_present(const TestSpec& spec);
// Opens the port whose GID matches `local` (or the --gid-index one), registers the buffer.
std::unique_ptr<Device> open_device(const TestSpec& spec, const sockaddr_storage& local);
// --rdma-cm: the port librdmacm bound the connection to (its own device context).
std::unique_ptr<Device> open_cm_device(ibv_context* ctx, std::uint8_t port, const TestSpec& spec);

inline constexpr int kTickMs = 200;

// write, read, nwrite; the values are the rdma_cm wire's direction codes.
enum class Dir : std::uint8_t {
  push = rdma_cm::kDirPush,
  pull_back = rdma_cm::kDirPullBack,
  nread = rdma_cm::kDirNread
};
// The direction of connection c of a client-server pair (rw alternates).
Dir dir_for(const TestSpec& spec, std::uint32_t c);

// An RDMA peer did not prove the test token over its queue pair: nothing was posted to it. The
// message names the peer ("node 1 (198.18.100.2) qpn 17"), the reason and the local QP.
struct PeerProofError : Error {
  explicit PeerProofError(const std::string& message) : Error(ExitCode::infrastructure, message) {}
};

inline constexpr std::size_t kProofSlot = 128;  // one proof message (68 bytes) per slot
inline constexpr std::size_t kProofSlots = 4;
// The proof's SENDs complete with this id, which no data work request uses (block ids count
// from 1, notices are 0): the data loops skip a late one.
inline constexpr std::uint64_t kProofWrId = 0xfab0'0000'0000'0000ull;
inline constexpr std::int64_t kProofTimeoutNs = 10'000'000'000;  // an emulated guest can be slow

struct Qp {
  Device* dev{nullptr};
  // The peer proof (set-up through the coordinator only): a small registered buffer of
  // kProofSlots slots (0 and 1 for what this end sends, 2 and 3 for what it receives).
  BufferPtr proof_buf;
  MrPtr proof_mr;
  CompChannelPtr ch;
  CqPtr cq;
  CmIdPtr cm_id;  // --rdma-cm: the connection; declared before the QP, which needs it to go
  QpPtr qp;
  // What each end of the QP tells the other; local.peer is the peer's node, local.conn the
  // connection index within the client-server pair.
  proto::RdmaEndpoint local;
  proto::RdmaEndpoint remote;
  Dir dir{Dir::push};
  bool rpc{false};
  bool client{true};
  std::string peer;  // "node N (ADDR) qpn Q"
  Flow* flow{nullptr};
  LatencyHistogram* hist{nullptr};
  // The key and what this end knows about the QP (the proof).
  bool proof{false};
  proto::Token proof_token{};
  qp_proof::Binding binding{};
  // The end of a stream that does not post: the server for write, the client for read and nwrite.
  [[nodiscard]] bool stream_passive() const { return !rpc && (dir == Dir::push) != client; }
};

// Creates the QP with its CQ and posts the receives; throws naming the verb. With a cm id the QP
// is made by rdma_create_qp and released through the id, which the caller keeps alive. With a
// proof token (set-up through the coordinator) the QP's end proves it to the peer before any load.
std::unique_ptr<Qp> create_qp(Device& d, const TestSpec& spec, Dir dir, bool rpc, bool client, std::uint32_t peer_node,
                              std::uint32_t conn, rdma_cm_id* id = nullptr, const proto::Token* proof = nullptr);
// INIT -> RTR -> RTS against the peer's endpoint.
void connect_qp(Qp& q);

class VerbsEngine final : public Engine, public EndpointExchange {
 public:
  VerbsEngine() = default;
  // The members release the QPs (and their cm ids) before the listener, the event channels and
  // the devices they belong to: they are declared in the opposite order.
  ~VerbsEngine() override {
    abort();
    join();
  }
  [[nodiscard]] std::string_view name() const override { return "rdma"; }
  std::uint16_t prepare_server(RunContext& ctx, const ServerPlan& plan) override;
  void prepare_client(RunContext& ctx, const ClientPlan& plan) override;
  EndpointExchange* endpoint_exchange() override { return this; }
  std::vector<proto::RdmaEndpoint> take_endpoints() override;
  std::size_t connect_endpoints(RunContext& ctx, const std::vector<proto::RdmaEndpoint>& peers) override;
  void seal(RunContext& ctx) override;
  void start(RunContext& ctx) override;
  void abort() noexcept override {
    stop_ = true;
    accept_stop_ = true;
  }
  void join() override;

 private:
  Device& device_for(rdma_cm_id* id, const sockaddr_storage& local = {});
  void add_flow(Qp& q, FlowRole role, const std::string& remote);
  void connect_to(Qp& q, const proto::RdmaEndpoint& e, const std::string& where, const std::string& host);
  // --rdma-cm.
  std::uint16_t cm_listen(const ServerPlan& plan);
  void cm_accept_loop();
  void cm_serve_request(CmIdPtr id, std::span<const std::uint8_t> req, std::uint32_t peer_qpn);
  void cm_connect(const ClientPlan& plan, const proto::Target& t, std::uint32_t c, const std::string& host);
  // Hot loops.
  int poll(Qp& q, ibv_wc* wc, int n) noexcept;
  void make_data_wr(Qp& q, Dir dir, ibv_send_wr& wr, ibv_sge& sge) noexcept;
  int post_data(Qp& q, Dir dir, bool signaled, std::uint64_t wr_id) noexcept;
  // The peer proof over the QP (before any load); throws PeerProofError naming the peer.
  void prove_peer(Qp& q);
  // The next proof message the peer sent (its bytes), or throws naming what came instead.
  std::span<const std::uint8_t> next_proof(Qp& q, std::uint32_t& received, std::int64_t deadline);
  void stream_active(Qp& q);
  void stream_passive(Qp& q);
  void rpc_client(Qp& q);
  void rpc_server(Qp& q);

  RunContext* ctx_{nullptr};
  ServerPlan server_plan_;
  std::thread accept_thread_;
  std::atomic<bool> accept_stop_{false};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::unique_ptr<Device>> devices_;
  EventChannelPtr cm_client_ch_;
  EventChannelPtr cm_listen_ch_;
  CmIdPtr cm_listen_id_;
  std::vector<std::unique_ptr<Qp>> pending_;  // server QPs waiting for RDMA_CONNECT
  std::vector<std::unique_ptr<Qp>> qps_;
  std::vector<proto::RdmaEndpoint> fresh_;  // endpoints for the coordinator (take_endpoints)
  std::vector<std::thread> threads_;
};

// One receive into [at, at + len).
inline int post_recv(ibv_qp* qp, const std::uint8_t* at, std::size_t len, std::uint32_t lkey,
                     std::uint64_t wr_id = 0) noexcept {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(at), static_cast<std::uint32_t>(len), lkey};
  ibv_recv_wr wr{.wr_id = wr_id, .next = nullptr, .sg_list = &sge, .num_sge = 1};
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &wr, &bad);
}
// The name a completion's opcode goes by in messages.
const char* opcode_name(ibv_wc_opcode op);
inline bool is_recv(const ibv_wc& wc) {
  return (wc.opcode & IBV_WC_RECV) != 0;
}

}  // namespace fabperf::verbs
