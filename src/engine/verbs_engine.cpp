// RDMA verbs data plane: RC queue pairs on libibverbs, one thread and one CQ per QP.
//
// Set-up follows perftest's order (find device -> open -> check port -> PD/MR/CQ/QP -> exchange
// -> RTR/RTS). The exchange goes one of two ways (docs/rdma.md "Set-up"):
//  - by default through the coordinator's control channel, which is already authenticated: the
//    server creates its QPs at SETUP_SERVER and returns their endpoints (QP number, PSN, GID/LID,
//    buffer address, rkey), each client gets them with SETUP_CLIENT, connects its QPs and returns
//    its own, and RDMA_CONNECT hands those to the server, which then connects its QPs. Before any
//    load, both ends of every QP prove the test token to each other over the QP itself
//    (include/fabperf/rdma_qp_proof.hpp): an endpoint the coordinator forwarded is only a claim,
//    and an address that does not answer with the proof gets no RDMA WRITE or READ;
//  - with --rdma-cm through librdmacm: the client resolves the server's address and connects, the
//    server agent listens and accepts; the private data carries the buffer address and rkey under
//    an HMAC of the client's token (so a stranger cannot get a QP) and the server's answer proves
//    the test token in return.
// Without rdma_cm the port and GID are chosen by matching the address the test uses on each node
// against each port's RoCE v2 GIDs, so multi-GID RoCE ports work without --gid-index.
//
// Data movement (nsdperf's meanings; "notice" = a zero-byte SEND_WITH_IMM):
//   write  client -> server: RDMA WRITE_WITH_IMM (or SEND with --rdma-verb send)
//   read   server -> client: the same, server to client
//   nwrite server pulls the client's block with RDMA READ; a notice tells the client
//   rpc: one block per request with a reply (write: data + notice back; read: notice + data back;
//        nwrite: notice, READ, notice back); latency from post to reply.
// The hot loops never allocate, log or throw; a failed post or a completion error ends that
// flow with a message naming the verb, the device, the status and the peer.
#include "engine/verbs_engine.hpp"
#include "net/listen.hpp"
#include "net/sockaddr.hpp"

#include <fabperf/auth.hpp>
#include <fabperf/clock.hpp>
#include <fabperf/error.hpp>
#include <fabperf/printable.hpp>
#include <fabperf/rdma_cm_wire.hpp>
#include <fabperf/rdma_qp_proof.hpp>
#include <fabperf/units.hpp>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <span>

namespace fabperf {
namespace {

constexpr int kTickMs = 200;
constexpr int kCmTimeoutMs = 5000;  // each rdma_cm step (address, route, connect)
// --rdma-cm private data: include/fabperf/rdma_cm_wire.hpp. The per-test token makes a request
// useless in another test; within a test a (node, conn) is accepted once.

// write, read, nwrite; the values are the rdma_cm wire's direction codes.
enum class Dir : std::uint8_t {
  push = rdma_cm::kDirPush,
  pull_back = rdma_cm::kDirPullBack,
  nread = rdma_cm::kDirNread
};

// What one side of a QP tells the other.
struct Endpoint {
  std::uint32_t qpn{0};
  std::uint32_t psn{0};
  std::uint32_t lid{0};
  std::uint32_t rkey{0};
  std::uint64_t addr{0};
  std::uint64_t len{0};
  ibv_gid gid{};
};
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

std::string gid_text(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
  return buf;
}

// The GID a RoCE port holds for this IP address (IPv4 as ::ffff:a.b.c.d).
ibv_gid gid_for(const sockaddr_storage& ss) {
  ibv_gid g{};
  if (ss.ss_family == AF_INET) {
    g.raw[10] = 0xff;
    g.raw[11] = 0xff;
    std::memcpy(g.raw + 12, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, 4);
  } else {
    const auto& a6 = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
    std::memcpy(g.raw, &a6, 16);
  }
  return g;
}

// A numeric address (and port) as a socket address; throws naming what it was for.
sockaddr_storage numeric_sockaddr(const std::string& host, std::uint16_t port, const char* what) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  if (const int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); gai != 0) {
    throw SystemError(what, host, gai_strerror(gai));
  }
  sockaddr_storage ss{};
  std::memcpy(&ss, res->ai_addr, std::min<std::size_t>(res->ai_addrlen, sizeof ss));
  freeaddrinfo(res);
  return ss;
}

// The local address the kernel would use towards `host` (from `source` when given): the address
// this connection uses on this node, whose GID picks the RDMA port. A connected UDP socket
// sends nothing.
sockaddr_storage local_address_towards(const std::string& host, const std::string& source) {
  const sockaddr_storage dst = numeric_sockaddr(host, 4791, "resolve RDMA peer address");
  const int fd = ::socket(dst.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw SystemError("socket", host, errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const socklen_t dlen = dst.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (!source.empty()) {
    const sockaddr_storage src = numeric_sockaddr(source, 0, "resolve source address");
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&src), dlen) != 0)
      throw SystemError("bind source address", source, errno);
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&dst), dlen) != 0)
    throw SystemError("find the local address towards", host, errno);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0)
    throw SystemError("getsockname towards", host, errno);
  return local;
}

// Device selection: DEV[:PORT][,...] from --rdma-device.
struct DevSel {
  std::string name;
  int port{0};  // 0 = every port
};
std::vector<DevSel> parse_device_list(const std::string& text) {
  std::vector<DevSel> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    DevSel d;
    const auto colon = item.find(':');
    d.name = item.substr(0, colon);
    if (colon != std::string::npos) {
      d.port = static_cast<int>(parse_int(item.substr(colon + 1), "--rdma-device port", 1, 255));
    }
    if (d.name.empty()) throw UsageError(fmt::format("--rdma-device '{}': empty device name", text));
    out.push_back(d);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// One opened device port with its protection domain and the test's one registered buffer.
struct Device {
  std::string name;
  std::string label;  // "rxe0:1"
  ibv_context* ctx{nullptr};
  bool borrowed_ctx{false};  // librdmacm's context (--rdma-cm): it closes it, not us
  ibv_pd* pd{nullptr};
  ibv_mr* mr{nullptr};
  std::uint8_t* buf{nullptr};
  std::size_t block{0};  // src = buf, dst = buf + block
  std::uint8_t port{1};
  int gid_index{-1};
  ibv_gid gid{};
  bool infiniband{false};
  std::uint16_t lid{0};
  ibv_mtu mtu{IBV_MTU_1024};
  std::uint32_t max_rd_atomic{1};
  std::uint32_t max_inline{0};
  std::string key;  // the local address it was chosen for ("cm:DEV:PORT" with --rdma-cm)
  ~Device() {
    if (mr) ibv_dereg_mr(mr);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx && !borrowed_ctx) ibv_close_device(ctx);
    std::free(buf);
  }
};

VerbsError verbs_fail(const char* call, const std::string& dev, int err) {
  return VerbsError(call, dev, err, fmt::format("{}: {} on {}", call, errno_text(err), dev));
}

// The protection domain and the one registered buffer (2 x --buffsize) of an opened port.
void register_buffer(Device& d, const TestSpec& spec) {
  d.pd = ibv_alloc_pd(d.ctx);
  if (!d.pd) throw verbs_fail("ibv_alloc_pd", d.label, errno);
  d.block = spec.buffsize();
  if (posix_memalign(reinterpret_cast<void**>(&d.buf), 4096, 2 * d.block) != 0) {
    throw Error(ExitCode::infrastructure,
                fmt::format("allocating {} for RDMA buffers failed", format_size(2 * d.block)));
  }
  for (std::size_t k = 0; k < 2 * d.block; ++k) d.buf[k] = static_cast<std::uint8_t>((k * 131) ^ (k >> 9));
  d.mr =
      ibv_reg_mr(d.pd, d.buf, 2 * d.block, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!d.mr) throw verbs_fail("ibv_reg_mr", d.label, errno);
}

// Opens the port whose GID matches `local` (or the --gid-index one), registers the buffer.
std::unique_ptr<Device> open_device(const TestSpec& spec, const sockaddr_storage& local) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    throw Error(ExitCode::infrastructure,
                "no RDMA device found (ibv_get_device_list: none under /sys/class/infiniband; load a driver or add "
                "Soft-RoCE with 'rdma link add rxe0 type rxe netdev IF')");
  }
  std::vector<DevSel> want;
  if (!spec.rdma_device().empty()) want = parse_device_list(spec.rdma_device());
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  for (const auto& w : want) {
    if (std::find(names.begin(), names.end(), w.name) == names.end()) {
      ibv_free_device_list(list);
      throw Error(ExitCode::infrastructure,
                  fmt::format("--rdma-device {}: no such RDMA device (found: {})", w.name, fmt::join(names, ", ")));
    }
  }
  const ibv_gid want_gid = gid_for(local);
  const std::string addr = net::numeric_host(local);
  std::vector<std::string> looked;
  std::string problem;
  for (int i = 0; i < n; ++i) {
    const std::string name = names[static_cast<std::size_t>(i)];
    int only_port = 0;
    if (!want.empty()) {
      auto it = std::find_if(want.begin(), want.end(), [&](const DevSel& d) { return d.name == name; });
      if (it == want.end()) continue;
      only_port = it->port;
    }
    ibv_context* c = ibv_open_device(list[i]);
    if (!c) {
      problem = verbs_fail("ibv_open_device", name, errno).what();
      looked.push_back(name + " (cannot open)");
      continue;
    }
    ibv_device_attr da{};
    if (ibv_query_device(c, &da) != 0) {
      problem = verbs_fail("ibv_query_device", name, errno).what();
      ibv_close_device(c);
      continue;
    }
    for (int p = 1; p <= da.phys_port_cnt; ++p) {
      if (only_port != 0 && p != only_port) continue;
      const std::string label = fmt::format("{}:{}", name, p);
      ibv_port_attr pa{};
      if (ibv_query_port(c, static_cast<std::uint8_t>(p), &pa) != 0) {
        looked.push_back(label + " (" + verbs_fail("ibv_query_port", label, errno).what() + ")");
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        looked.push_back(fmt::format("{} ({})", label, ibv_port_state_str(pa.state)));
        continue;
      }
      int chosen = -1;
      ibv_gid chosen_gid{};
      const bool ib = pa.link_layer == IBV_LINK_LAYER_INFINIBAND;
      std::vector<std::string> gids;
      if (spec.gid_index() >= 0) {
        ibv_gid_entry e{};
        if (spec.gid_index() >= pa.gid_tbl_len ||
            ibv_query_gid_ex(c, static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(spec.gid_index()), &e, 0) !=
                0) {
          ibv_close_device(c);
          ibv_free_device_list(list);
          throw Error(ExitCode::infrastructure,
                      fmt::format("--gid-index {}: {} has no GID at that index (table size {})", spec.gid_index(),
                                  label, pa.gid_tbl_len));
        }
        chosen = spec.gid_index();
        std::memcpy(chosen_gid.raw, e.gid.raw, 16);
      } else if (ib) {
        ibv_query_gid(c, static_cast<std::uint8_t>(p), 0, &chosen_gid);
        chosen = 0;
      } else {
        for (int g = 0; g < pa.gid_tbl_len; ++g) {
          ibv_gid_entry e{};
          if (ibv_query_gid_ex(c, static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(g), &e, 0) != 0) continue;
          ibv_gid gg{};
          std::memcpy(gg.raw, e.gid.raw, 16);
          gids.push_back(fmt::format("{}={}{}", g, gid_text(gg), e.gid_type == IBV_GID_TYPE_ROCE_V2 ? "/v2" : "/v1"));
          if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && std::memcmp(gg.raw, want_gid.raw, 16) == 0) {
            chosen = g;
            chosen_gid = gg;
            break;
          }
        }
      }
      if (chosen < 0) {
        looked.push_back(fmt::format("{} [GIDs {}]", label, fmt::join(gids, " ")));
        continue;
      }
      auto d = std::make_unique<Device>();
      d->name = name;
      d->label = label;
      d->ctx = c;
      d->port = static_cast<std::uint8_t>(p);
      d->gid_index = chosen;
      d->gid = chosen_gid;
      d->infiniband = ib;
      d->lid = pa.lid;
      d->mtu = pa.active_mtu;
      d->max_rd_atomic = static_cast<std::uint32_t>(std::clamp(da.max_qp_rd_atom, 1, 16));
      d->key = addr;
      ibv_free_device_list(list);
      register_buffer(*d, spec);
      return d;
    }
    ibv_close_device(c);
  }
  ibv_free_device_list(list);
  throw Error(ExitCode::infrastructure,
              fmt::format("no active RDMA port has a RoCE v2 GID for {} (looked at: {}{}){}", addr,
                          looked.empty() ? std::string("no port") : fmt::format("{}", fmt::join(looked, "; ")),
                          spec.rdma_device().empty() ? "" : ", --rdma-device " + spec.rdma_device(),
                          problem.empty() ? std::string() : "; " + problem));
}

// --rdma-cm: the port librdmacm bound the connection to (its own device context).
std::unique_ptr<Device> open_cm_device(ibv_context* ctx, std::uint8_t port, const TestSpec& spec) {
  auto d = std::make_unique<Device>();
  d->name = ibv_get_device_name(ctx->device);
  d->label = fmt::format("{}:{}", d->name, port);
  d->ctx = ctx;
  d->borrowed_ctx = true;
  d->port = port;
  d->key = "cm:" + d->label;
  ibv_device_attr da{};
  if (ibv_query_device(ctx, &da) != 0) throw verbs_fail("ibv_query_device", d->label, errno);
  // rdma_cm passes these as the connection's responder resources and initiator depth.
  d->max_rd_atomic = static_cast<std::uint32_t>(std::clamp(std::min(da.max_qp_rd_atom, da.max_qp_init_rd_atom), 1, 16));
  ibv_port_attr pa{};
  if (ibv_query_port(ctx, port, &pa) != 0) throw verbs_fail("ibv_query_port", d->label, errno);
  d->infiniband = pa.link_layer == IBV_LINK_LAYER_INFINIBAND;
  d->lid = pa.lid;
  d->mtu = pa.active_mtu;
  register_buffer(*d, spec);
  return d;
}

// ---- queue pairs ----------------------------------------------------------------------------

class VerbsFlow final : public Flow {
 public:
  using Flow::Flow;
};

struct Qp {
  Device* dev{nullptr};
  ibv_comp_channel* ch{nullptr};
  ibv_cq* cq{nullptr};
  ibv_qp* qp{nullptr};
  rdma_cm_id* cm_id{nullptr};  // --rdma-cm: owns the QP and the connection
  Endpoint local;
  Endpoint remote;
  Dir dir{Dir::push};
  bool rpc{false};
  bool client{true};
  std::uint32_t peer_node{0};
  std::uint32_t conn{0};  // connection index within the client-server pair
  std::string peer;       // "node N (ADDR) qpn Q"
  VerbsFlow* flow{nullptr};
  LatencyHistogram* hist{nullptr};
  // The peer proof (set-up through the coordinator only): a small registered buffer of
  // kProofSlots slots (0 and 1 for what this end sends, 2 and 3 for what it receives), the key
  // and what this end knows about the QP.
  bool proof{false};
  std::uint8_t* proof_buf{nullptr};
  ibv_mr* proof_mr{nullptr};
  proto::Token proof_token{};
  qp_proof::Binding binding{};
  // The end of a stream that does not post: the server for write, the client for read and nwrite.
  [[nodiscard]] bool stream_passive() const { return !rpc && (dir == Dir::push) != client; }
  ~Qp() {
    if (cm_id) {
      if (cm_id->qp) rdma_destroy_qp(cm_id);
      rdma_destroy_id(cm_id);
    } else if (qp) {
      ibv_destroy_qp(qp);
    }
    if (cq) ibv_destroy_cq(cq);
    if (ch) ibv_destroy_comp_channel(ch);
    if (proof_mr) ibv_dereg_mr(proof_mr);
    std::free(proof_buf);
  }
};

constexpr std::size_t kProofSlot = 128;  // one proof message (68 bytes) per slot
constexpr std::size_t kProofSlots = 4;
// The proof's SENDs complete with this id, which no data work request uses (block ids count
// from 1, notices are 0): the data loops skip a late one.
constexpr std::uint64_t kProofWrId = 0xfab0'0000'0000'0000ull;
constexpr std::int64_t kProofTimeoutNs = 10'000'000'000;  // an emulated guest can be slow

std::uint32_t random_psn() {
  std::random_device rd;
  return rd() & 0xffffff;
}

// The direction of connection c of a client-server pair (rw alternates).
Dir dir_for(const TestSpec& spec, std::uint32_t c) {
  const TestKind k = spec.test();
  if (k == TestKind::nwrite) return Dir::nread;
  if (k == TestKind::read || k == TestKind::sread) return Dir::pull_back;
  if (k == TestKind::rw) return c % 2 == 0 ? Dir::push : Dir::pull_back;
  return Dir::push;
}

// Creates the QP with its CQ and posts the receives; throws naming the verb. Without a cm id the
// QP is created with ibv_create_qp and moved to INIT here; with one, rdma_create_qp does both and
// the QP then belongs to the id (rdma_accept/rdma_connect bring it to RTS).
// The QP's role (direction, rpc, which end) is set here because it decides how the thread that
// serves the QP waits: the passive end of a stream (it only counts the immediates) always sleeps
// on completion events; everything else busy-polls unless --rdma-events.
// With `proof` (set-up through the coordinator) the first receives posted are the proof's:
// one on the client (the server's proof), two on the server (the client's hello and proof), so
// the peer's first SENDs land there and never in the data buffer.
std::unique_ptr<Qp> create_qp(Device& d, const TestSpec& spec, Dir dir, bool rpc, bool client, rdma_cm_id* id = nullptr,
                              bool proof = false) {
  auto q = std::make_unique<Qp>();
  q->dev = &d;
  q->dir = dir;
  q->rpc = rpc;
  q->client = client;
  q->proof = proof;
  const std::uint32_t proof_recvs = proof ? (client ? 1u : 2u) : 0u;
  const int depth = static_cast<int>(spec.qdepth());
  if (spec.rdma_events() || q->stream_passive()) {
    q->ch = ibv_create_comp_channel(d.ctx);
    if (!q->ch) throw verbs_fail("ibv_create_comp_channel", d.label, errno);
  }
  q->cq = ibv_create_cq(d.ctx, 4 * depth + 8, nullptr, q->ch, 0);
  if (!q->cq) throw verbs_fail("ibv_create_cq", d.label, errno);
  ibv_qp_init_attr ia{};
  ia.send_cq = q->cq;
  ia.recv_cq = q->cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = static_cast<std::uint32_t>(2 * depth + 2);
  ia.cap.max_recv_wr = static_cast<std::uint32_t>(2 * depth + 2) + proof_recvs;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = spec.inline_size();
  if (id) {
    if (rdma_create_qp(id, d.pd, &ia) != 0) throw verbs_fail("rdma_create_qp", d.label, errno);
    q->qp = id->qp;
  } else {
    q->qp = ibv_create_qp(d.pd, &ia);
    if (!q->qp) throw verbs_fail("ibv_create_qp", d.label, errno);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = d.port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (int e = ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
        e != 0) {
      throw verbs_fail("ibv_modify_qp(INIT)", d.label, e);
    }
  }
  d.max_inline = ia.cap.max_inline_data;
  q->local.qpn = q->qp->qp_num;
  q->local.psn = random_psn();
  q->local.lid = d.lid;
  q->local.rkey = d.mr->rkey;
  q->local.addr = reinterpret_cast<std::uintptr_t>(d.buf);
  q->local.len = 2 * d.block;
  q->local.gid = d.gid;
  if (proof) {
    if (posix_memalign(reinterpret_cast<void**>(&q->proof_buf), 4096, kProofSlot * kProofSlots) != 0) {
      q->proof_buf = nullptr;
      throw verbs_fail("allocating the peer proof buffer", d.label, ENOMEM);
    }
    std::memset(q->proof_buf, 0, kProofSlot * kProofSlots);
    // Local access only: the peer can SEND into the posted slots, never write or read them.
    q->proof_mr = ibv_reg_mr(d.pd, q->proof_buf, kProofSlot * kProofSlots, static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
    if (!q->proof_mr) throw verbs_fail("ibv_reg_mr(peer proof)", d.label, errno);
    for (std::uint32_t i = 0; i < proof_recvs; ++i) {
      ibv_sge sge{reinterpret_cast<std::uintptr_t>(q->proof_buf + kProofSlot * (2 + i)),
                  static_cast<std::uint32_t>(kProofSlot), q->proof_mr->lkey};
      ibv_recv_wr wr{};
      wr.wr_id = kProofWrId + 2 + i;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      if (int e = ibv_post_recv(q->qp, &wr, &bad); e != 0) throw verbs_fail("ibv_post_recv(peer proof)", d.label, e);
    }
  }
  for (int i = 0; i < 2 * depth + 2; ++i) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(d.buf + d.block), static_cast<std::uint32_t>(d.block), d.mr->lkey};
    ibv_recv_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (int e = ibv_post_recv(q->qp, &wr, &bad); e != 0) throw verbs_fail("ibv_post_recv", d.label, e);
  }
  if (q->ch && ibv_req_notify_cq(q->cq, 0) != 0) throw verbs_fail("ibv_req_notify_cq", d.label, errno);
  return q;
}

// INIT -> RTR -> RTS against the peer's endpoint.
void connect_qp(Qp& q) {
  const Device& d = *q.dev;
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
  if (int e = ibv_modify_qp(&*q.qp, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      e != 0) {
    throw VerbsError("ibv_modify_qp(RTR)", d.label, e,
                     fmt::format("{} (peer {})", verbs_fail("ibv_modify_qp(RTR)", d.label, e).what(), q.peer));
  }
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = 14;  // 4.096 us * 2^14 = 67 ms per try: a dead peer is noticed within ~0.5 s
  r.retry_cnt = 7;
  r.rnr_retry = 7;
  r.sq_psn = q.local.psn;
  r.max_rd_atomic = static_cast<std::uint8_t>(d.max_rd_atomic);
  if (int e = ibv_modify_qp(q.qp, &r,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                IBV_QP_MAX_QP_RD_ATOMIC);
      e != 0) {
    throw VerbsError("ibv_modify_qp(RTS)", d.label, e,
                     fmt::format("{} (peer {})", verbs_fail("ibv_modify_qp(RTS)", d.label, e).what(), q.peer));
  }
}

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

// ---- the engine -----------------------------------------------------------------------------

// In the anonymous namespace with the types its members use (only make_verbs_engine is seen
// outside); a named class holding them would not link in a unity build.
class VerbsEngine final : public Engine, public EndpointExchange {
 public:
  VerbsEngine() = default;
  ~VerbsEngine() override {
    abort();
    join();
    qps_.clear();  // QPs (and their cm ids) before the devices and channels they belong to
    pending_.clear();
    if (cm_listen_id_) rdma_destroy_id(cm_listen_id_);
    if (cm_listen_ch_) rdma_destroy_event_channel(cm_listen_ch_);
    if (cm_client_ch_) rdma_destroy_event_channel(cm_client_ch_);
    devices_.clear();
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
  Device& device_for(const sockaddr_storage& local);
  Device& cm_device_for(rdma_cm_id* id);
  void add_flow(Qp& q, FlowRole role, const std::string& remote);
  // --rdma-cm.
  std::uint16_t cm_listen(const ServerPlan& plan);
  void cm_accept_loop();
  void cm_serve_request(rdma_cm_id* id, const std::uint8_t* req, std::size_t len);
  void cm_connect(const ClientPlan& plan, const proto::Target& t, std::uint32_t c, const std::string& host);
  // Hot loops.
  int poll(Qp& q, ibv_wc* wc, int n) noexcept;
  void make_data_wr(Qp& q, Dir dir, ibv_send_wr& wr, ibv_sge& sge) noexcept;
  int post_data(Qp& q, Dir dir, bool signaled, std::uint64_t wr_id) noexcept;
  int post_notice(Qp& q, std::uint32_t imm, bool signaled, std::uint64_t wr_id = 0) noexcept;
  // After the stop: true while completions still arrive (the peer's drain), bounded.
  bool keep_draining(std::int64_t& last_activity, int n) const noexcept;
  int repost_recv(Qp& q) noexcept;
  void fail(Qp& q, const char* what, int err) noexcept;
  void fail_wc(Qp& q, const ibv_wc& wc) noexcept;
  // The peer proof over the QP (before any load); throws PeerProofError naming the peer.
  void prove_peer(Qp& q);
  int post_proof(Qp& q, std::size_t slot, const qp_proof::Message& m) noexcept;
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
  std::vector<std::unique_ptr<Qp>> qps_;
  std::vector<std::unique_ptr<Qp>> pending_;  // server QPs waiting for RDMA_CONNECT
  std::vector<proto::RdmaEndpoint> fresh_;    // endpoints for the coordinator (take_endpoints)
  rdma_event_channel* cm_listen_ch_{nullptr};
  rdma_cm_id* cm_listen_id_{nullptr};
  rdma_event_channel* cm_client_ch_{nullptr};
  std::vector<std::thread> threads_;
};

}  // namespace

Device& VerbsEngine::device_for(const sockaddr_storage& local) {
  const std::string key = net::numeric_host(local);
  std::lock_guard lk(mu_);
  for (auto& d : devices_) {
    if (d->key == key) return *d;
  }
  devices_.push_back(open_device(ctx_->spec(), local));
  return *devices_.back();
}

Device& VerbsEngine::cm_device_for(rdma_cm_id* id) {
  if (!id->verbs) throw Error(ExitCode::infrastructure, "rdma_cm bound the connection to no RDMA device");
  const std::string key = fmt::format("cm:{}:{}", ibv_get_device_name(id->verbs->device), id->port_num);
  std::lock_guard lk(mu_);
  for (auto& d : devices_) {
    if (d->key == key && d->ctx == id->verbs) return *d;
  }
  devices_.push_back(open_cm_device(id->verbs, id->port_num, ctx_->spec()));
  return *devices_.back();
}

void VerbsEngine::add_flow(Qp& q, FlowRole role, const std::string& remote) {
  const Device& d = *q.dev;
  const FlowOp op = q.rpc ? FlowOp::rpc : (q.dir == Dir::pull_back ? FlowOp::read : FlowOp::write);
  const std::string local =
      q.cm_id ? fmt::format("{} rdma_cm qpn {}", d.label, q.local.qpn)
              : fmt::format("{} gid[{}] {} qpn {}", d.label, d.gid_index, gid_text(d.gid), q.local.qpn);
  auto flow = std::make_unique<VerbsFlow>(role, op, q.peer_node, local, fmt::format("{} qpn {}", remote, q.remote.qpn));
  q.flow = flow.get();
  ctx_->add_flow(std::move(flow));
  if (q.rpc && q.client) q.hist = &ctx_->add_histogram();
}

std::uint16_t VerbsEngine::prepare_server(RunContext& ctx, const ServerPlan& plan) {
  ctx_ = &ctx;
  server_plan_ = plan;
  const TestSpec& spec = ctx.spec();
  // Fail at set-up, not at the first client, when this node has no usable device at all.
  {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list) ibv_free_device_list(list);
    if (n == 0) {
      throw Error(ExitCode::infrastructure,
                  "no RDMA device found (ibv_get_device_list: none under /sys/class/infiniband; load a driver or add "
                  "Soft-RoCE with 'rdma link add rxe0 type rxe netdev IF')");
    }
    if (!spec.rdma_device().empty()) (void)parse_device_list(spec.rdma_device());
  }
  if (spec.rdma_cm()) return cm_listen(plan);
  // Through the coordinator: one QP per connection of every client, returned by take_endpoints.
  const std::uint32_t per_pair = spec.connections_per_pair();
  for (const std::uint32_t client : plan.rdma_clients) {
    for (std::uint32_t c = 0; c < per_pair; ++c) {
      const std::string& addr =
          plan.link_addrs.empty() ? plan.control_address : plan.link_addrs[c % plan.link_addrs.size()];
      Device& d = device_for(numeric_sockaddr(addr, 0, "resolve RDMA server address"));
      auto q = create_qp(d, spec, dir_for(spec, c), spec.mode() == Mode::rpc, false, nullptr, true);
      q->peer_node = client;
      q->proof_token = derive_client_token(plan.token, client);
      q->conn = c;
      std::lock_guard lk(mu_);
      fresh_.push_back(to_wire(q->local, ctx.node_index(), client, c));
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
                           [&](const auto& q) { return q->peer_node == e.node && q->conn == e.conn; });
    if (it == pending_.end()) {
      throw ProtocolError(
          fmt::format("{}: no queue pair of this server waits for node {} connection {} (unknown or already connected)",
                      where, e.node, e.conn));
    }
    Qp& q = **it;
    if (e.len < 2 * q.dev->block) {
      throw ProtocolError(fmt::format("{}.len: {} bytes, smaller than the {} this test registers (2 x buffsize)", where,
                                      e.len, 2 * q.dev->block));
    }
    q.remote = from_wire(e);
    q.peer = fmt::format("node {} ({}) qpn {}", e.node, gid_text(q.remote.gid), q.remote.qpn);
    q.binding = {ctx.node_index(), e.node, e.conn, q.local.qpn, q.remote.qpn, {}, {}};
    std::memcpy(q.binding.server_gid.data(), q.local.gid.raw, 16);
    std::memcpy(q.binding.client_gid.data(), q.remote.gid.raw, 16);
    connect_qp(q);
    add_flow(q, FlowRole::server, gid_text(q.remote.gid));
    qps_.push_back(std::move(*it));
    pending_.erase(it);
    ++ready;
  }
  if (!pending_.empty()) {
    const Qp& q = *pending_.front();
    throw ProtocolError(fmt::format(
        "RDMA_CONNECT: no endpoint for node {} connection {} ({} queue pairs of this server left unconnected)",
        q.peer_node, q.conn, pending_.size()));
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
      Device& d = device_for(local_address_towards(host, source));
      if (e->len < 2 * d.block) {
        throw ProtocolError(fmt::format("{}.len: {} bytes, smaller than the {} this test registers (2 x buffsize)",
                                        list, e->len, 2 * d.block));
      }
      auto q = create_qp(d, spec, dir_for(spec, c), spec.mode() == Mode::rpc, true, nullptr, true);
      q->peer_node = t.node_index;
      q->conn = c;
      q->remote = from_wire(*e);
      q->peer = fmt::format("node {} ({}) qpn {}", t.node_index, host, q->remote.qpn);
      q->proof_token = plan.token;
      q->binding = {t.node_index, ctx.node_index(), c, q->remote.qpn, q->local.qpn, {}, {}};
      std::memcpy(q->binding.server_gid.data(), q->remote.gid.raw, 16);
      std::memcpy(q->binding.client_gid.data(), q->local.gid.raw, 16);
      connect_qp(*q);
      add_flow(*q, FlowRole::client, host);
      std::lock_guard lk(mu_);
      fresh_.push_back(to_wire(q->local, ctx.node_index(), t.node_index, c));
      qps_.push_back(std::move(q));
    }
  }
  if (spec.mode() == Mode::rpc && spec.threads() != 4) {
    ctx.warn(
        "--threads does not apply to --transport rdma: rpc concurrency is one request in flight per QP (--parallel QPs "
        "per pair)");
  }
}

// ---- --rdma-cm ------------------------------------------------------------------------------

namespace {

VerbsError cm_fail(const char* call, const std::string& where, int err) {
  return VerbsError(
      call, where, err,
      fmt::format("{} {}: {} (--rdma-cm; are rdma_cm and rdma_ucm loaded?)", call, where, errno_text(err)));
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
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) != 0) throw cm_fail("rdma_get_cm_event", where, errno);
    if (ev->id != id) {
      rdma_ack_cm_event(ev);
      continue;
    }
    CmResult r;
    const rdma_cm_event_type got = ev->event;
    const int status = ev->status;
    if (ev->param.conn.private_data && ev->param.conn.private_data_len > 0) {
      const auto* p = static_cast<const std::uint8_t*>(ev->param.conn.private_data);
      r.data.assign(p, p + ev->param.conn.private_data_len);
    }
    r.qp_num = ev->param.conn.qp_num;
    rdma_ack_cm_event(ev);
    if (got == want) return r;
    std::string reason;
    if (got == RDMA_CM_EVENT_REJECTED && !r.data.empty()) {
      reason.assign(r.data.begin(), r.data.end());
      reason = printable(reason.c_str());  // the remote side's words: defused before any log
      if (!reason.empty()) reason.insert(0, ": refused by the server: ");
    }
    throw Error(ExitCode::infrastructure, fmt::format("rdma_cm {}: {} (status {}) instead of {}{}", where,
                                                      rdma_event_str(got), status, rdma_event_str(want), reason));
  }
}

}  // namespace

std::uint16_t VerbsEngine::cm_listen(const ServerPlan& plan) {
  const std::string& where = plan.bind_address;
  cm_listen_ch_ = rdma_create_event_channel();
  if (!cm_listen_ch_) throw cm_fail("rdma_create_event_channel", "on " + where, errno);
  if (rdma_create_id(cm_listen_ch_, &cm_listen_id_, nullptr, RDMA_PS_TCP) != 0) {
    cm_listen_id_ = nullptr;
    throw cm_fail("rdma_create_id", "on " + where, errno);
  }
  sockaddr_storage ss = numeric_sockaddr(plan.bind_address, 0, "resolve RDMA listen address");
  if (rdma_bind_addr(cm_listen_id_, reinterpret_cast<sockaddr*>(&ss)) != 0) {
    throw cm_fail("rdma_bind_addr", where + " (no RDMA device has this address?)", errno);
  }
  if (rdma_listen(cm_listen_id_, 1024) != 0) throw cm_fail("rdma_listen", "on " + where, errno);
  const std::uint16_t port = ntohs(rdma_get_src_port(cm_listen_id_));
  accept_thread_ = std::thread([this] { cm_accept_loop(); });
  return port;
}

void VerbsEngine::cm_accept_loop() {
  while (!accept_stop_) {
    pollfd pfd{cm_listen_ch_->fd, POLLIN, 0};
    if (::poll(&pfd, 1, kTickMs) <= 0) continue;
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(cm_listen_ch_, &ev) != 0) continue;
    const rdma_cm_event_type type = ev->event;
    rdma_cm_id* id = ev->id;
    std::uint8_t req[rdma_cm::kRequestSize] = {};
    std::size_t len = 0;
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST && ev->param.conn.private_data) {
      len = std::min<std::size_t>(ev->param.conn.private_data_len, sizeof req);
      std::memcpy(req, ev->param.conn.private_data, len);
    }
    rdma_ack_cm_event(ev);
    // ESTABLISHED and DISCONNECTED need nothing: a QP whose peer vanishes fails its completions.
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) cm_serve_request(id, req, len);
  }
}

// One QP per connection request: check the client's proof, create the QP on the request's id,
// accept with our buffer address, rkey and proof.
// Both ends of an rdma_cm connection: the private data, RDMA READ resources from the device, and
// the same retry counts as the control-channel set-up.
static rdma_conn_param cm_conn_param(const Device& d, const std::uint8_t* data, std::size_t len) {
  rdma_conn_param p{};
  p.private_data = data;
  p.private_data_len = static_cast<std::uint8_t>(len);
  p.responder_resources = static_cast<std::uint8_t>(d.max_rd_atomic);
  p.initiator_depth = static_cast<std::uint8_t>(d.max_rd_atomic);
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  return p;
}

void VerbsEngine::cm_serve_request(rdma_cm_id* id, const std::uint8_t* req, std::size_t len) {
  auto refuse = [&](const std::string& why) {
    char text[rdma_cm::kRejectSize] = {};
    why.copy(text, sizeof text - 1);  // into a zeroed buffer, the terminator left in place
    rdma_reject(id, text, static_cast<std::uint8_t>(std::strlen(text) + 1));
  };
  char peer_addr[INET6_ADDRSTRLEN] = {};
  if (sockaddr* pa = rdma_get_peer_addr(id); pa && pa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(pa)->sin_addr, peer_addr, sizeof peer_addr);
  } else if (pa && pa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(pa)->sin6_addr, peer_addr, sizeof peer_addr);
  }
  const rdma_cm::CheckedRequest checked = rdma_cm::check_request({req, len}, server_plan_.token, ctx_->node_index());
  if (!checked.request) {
    // Reported in the server's result: someone who is not a client of this test tried.
    ctx_->warn(fmt::format("RDMA connection request from {} refused: {}", peer_addr, checked.refusal));
    refuse(checked.refusal);
    rdma_destroy_id(id);
    return;
  }
  const rdma_cm::Request& r = *checked.request;
  const std::uint32_t node = r.node;
  const std::uint32_t conn = r.conn;
  const proto::Token tok = derive_client_token(server_plan_.token, node);
  const auto dir = static_cast<Dir>(r.dir);
  {
    std::lock_guard lk(mu_);
    for (const auto& q : qps_) {
      if (!q->client && q->peer_node == node && q->conn == conn) {
        refuse("this connection is already set up");
        rdma_destroy_id(id);
        return;
      }
    }
  }
  std::unique_ptr<Qp> q;
  try {
    Device& d = cm_device_for(id);
    q = create_qp(d, ctx_->spec(), dir, r.rpc, false, id);
    q->cm_id = id;  // from here on the QP owns the id
    q->peer_node = node;
    q->conn = conn;
    q->remote.rkey = r.rkey;
    q->remote.addr = r.addr;
    q->remote.len = 2 * d.block;
    const rdma_cm::ReplyBytes rep = rdma_cm::encode_reply({q->local.rkey, q->local.addr}, tok, checked.mac);
    rdma_conn_param p = cm_conn_param(d, rep.data(), rep.size());
    if (rdma_accept(id, &p) != 0) throw verbs_fail("rdma_accept", d.label, errno);
    q->peer = fmt::format("node {} ({}) qpn {}", node, peer_addr, q->qp->qp_num);
    add_flow(*q, FlowRole::server, peer_addr);
    std::lock_guard lk(mu_);
    qps_.push_back(std::move(q));
  } catch (const std::exception& e) {
    ctx_->warn(fmt::format("RDMA set-up (rdma_cm) for node {} failed: {}", node, e.what()));
    refuse(e.what());
    if (!q || !q->cm_id) rdma_destroy_id(id);  // else the QP's destructor destroys it
  }
}

void VerbsEngine::cm_connect(const ClientPlan& plan, const proto::Target& t, std::uint32_t c, const std::string& host) {
  const TestSpec& spec = ctx_->spec();
  const std::string where = fmt::format("{}:{}", host, t.port);
  if (!cm_client_ch_) {
    cm_client_ch_ = rdma_create_event_channel();
    if (!cm_client_ch_) throw cm_fail("rdma_create_event_channel", "for " + where, errno);
  }
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(cm_client_ch_, &id, nullptr, RDMA_PS_TCP) != 0) {
    throw cm_fail("rdma_create_id", "for " + where, errno);
  }
  struct IdGuard {
    rdma_cm_id* id;
    ~IdGuard() {
      if (id) rdma_destroy_id(id);
    }
  } guard{id};
  sockaddr_storage dst = numeric_sockaddr(host, t.port, "resolve RDMA server address");
  sockaddr_storage src{};
  const bool bind_src = !plan.source_addrs.empty();
  if (bind_src) src = numeric_sockaddr(plan.source_addrs[c % plan.source_addrs.size()], 0, "resolve source address");
  if (rdma_resolve_addr(id, bind_src ? reinterpret_cast<sockaddr*>(&src) : nullptr, reinterpret_cast<sockaddr*>(&dst),
                        kCmTimeoutMs) != 0) {
    throw cm_fail("rdma_resolve_addr", where, errno);
  }
  (void)cm_wait(cm_client_ch_, id, RDMA_CM_EVENT_ADDR_RESOLVED, "resolving " + where);
  if (rdma_resolve_route(id, kCmTimeoutMs) != 0) throw cm_fail("rdma_resolve_route", where, errno);
  (void)cm_wait(cm_client_ch_, id, RDMA_CM_EVENT_ROUTE_RESOLVED, "route to " + where);
  Device& d = cm_device_for(id);
  auto q = create_qp(d, spec, dir_for(spec, c), spec.mode() == Mode::rpc, true, id);
  q->cm_id = id;
  guard.id = nullptr;  // the QP owns the id now
  q->peer_node = t.node_index;
  q->conn = c;
  const rdma_cm::RequestBytes req =
      rdma_cm::encode_request(rdma_cm::make_request(static_cast<std::uint8_t>(q->dir), q->rpc, ctx_->node_index(), c,
                                                    q->local.rkey, q->local.addr, t.node_index),
                              plan.token);
  // 4.096 us * 2^14 = 67 ms per try, as without rdma_cm: a dead peer is noticed within ~0.5 s.
  std::uint8_t ack_timeout = 14;
  (void)rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout, sizeof ack_timeout);
  rdma_conn_param p = cm_conn_param(d, req.data(), req.size());
  if (rdma_connect(id, &p) != 0) throw cm_fail("rdma_connect", where, errno);
  const CmResult r = cm_wait(cm_client_ch_, id, RDMA_CM_EVENT_ESTABLISHED, "connect to " + where);
  std::string why;
  const auto reply = rdma_cm::check_reply(r.data, plan.token, rdma_cm::request_mac(req), why);
  if (!reply) throw Error(ExitCode::infrastructure, fmt::format("rdma_cm connect to {}: {}", where, why));
  q->remote.rkey = reply->rkey;
  q->remote.addr = reply->addr;
  q->remote.len = 2 * d.block;
  q->remote.qpn = r.qp_num;
  q->peer = fmt::format("node {} ({}) qpn {}", t.node_index, host, r.qp_num);
  add_flow(*q, FlowRole::client, host);
  std::lock_guard lk(mu_);
  qps_.push_back(std::move(q));
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
      std::ifstream in(fmt::format("/sys/class/infiniband/{}/ports/{}/gid_attrs/ndevs/{}", q->dev->name, q->dev->port,
                                   q->dev->gid_index));
      std::string ndev;
      if (in && std::getline(in, ndev)) q->flow->device = ndev;
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
        } catch (const PeerProofError& e) {
          // Nothing was posted to this peer; the whole test on this node stops with the reason
          // (the result is then incomplete, and the coordinator exits 3 naming it). The QP goes
          // to the error state so the unproven peer cannot reach this node's buffer either.
          ibv_qp_attr a{};
          a.qp_state = IBV_QPS_ERR;
          (void)ibv_modify_qp(q->qp, &a, IBV_QP_STATE);
          q->flow->fail(e.what());
          ctx_->abort(e.what());
          return;
        } catch (const std::exception& e) {
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
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

// ---- hot loops ----------------------------------------------------------------------------

void VerbsEngine::fail(Qp& q, const char* what, int err) noexcept {
  try {
    q.flow->fail(fmt::format("{}: {} on {} (peer {})", what, errno_text(err), q.dev->label, q.peer));
  } catch (...) {
  }
}

void VerbsEngine::fail_wc(Qp& q, const ibv_wc& wc) noexcept {
  try {
    q.flow->fail(fmt::format("{} completion on {}: {} (wc status {}, vendor error {:#x}; peer {})",
                             opcode_name(wc.opcode), q.dev->label, ibv_wc_status_str(wc.status),
                             static_cast<int>(wc.status), wc.vendor_err, q.peer));
  } catch (...) {
  }
}

// Up to n completions; with --rdma-events sleeps on the channel (at most one tick) when idle.
int VerbsEngine::poll(Qp& q, ibv_wc* wc, int n) noexcept {
  int k = ibv_poll_cq(q.cq, n, wc);
  if (k != 0 || !q.ch) return k;
  pollfd pfd{q.ch->fd, POLLIN, 0};
  if (::poll(&pfd, 1, kTickMs) <= 0) return 0;
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  if (ibv_get_cq_event(q.ch, &ev_cq, &ev_ctx) == 0) {
    ibv_ack_cq_events(ev_cq, 1);
    ibv_req_notify_cq(q.cq, 0);
  }
  return ibv_poll_cq(q.cq, n, wc);
}

// ---- the peer proof ---------------------------------------------------------------------------

bool is_recv(const ibv_wc& wc);

int VerbsEngine::post_proof(Qp& q, std::size_t slot, const qp_proof::Message& m) noexcept {
  std::uint8_t* at = q.proof_buf + kProofSlot * slot;
  std::memcpy(at, m.data(), m.size());
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(at), static_cast<std::uint32_t>(m.size()), q.proof_mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kProofWrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(q.qp, &wr, &bad);
}

// Completions are taken one at a time and only until the proof message: the data that a proven
// peer sends right after its last proof message stays in the CQ for the data loop. Our own proof
// SENDs complete here or later (the data loops skip kProofWrId).
std::span<const std::uint8_t> VerbsEngine::next_proof(Qp& q, std::uint32_t& received, std::int64_t deadline) {
  const std::string lead = fmt::format("RDMA peer {} did not prove the test token", q.peer);
  const std::string tail = fmt::format("(queue pair {} on {}; nothing was posted to it)", q.local.qpn, q.dev->label);
  ibv_wc wc{};
  for (;;) {
    if (stop_ || ctx_->aborted())
      throw PeerProofError(q.peer, fmt::format("{}: the test stopped first {}", lead, tail));
    const int n = poll(q, &wc, 1);
    if (n < 0) throw PeerProofError(q.peer, fmt::format("{}: ibv_poll_cq failed {}", lead, tail));
    if (n == 0) {
      if (mono_now_ns() >= deadline) {
        throw PeerProofError(q.peer,
                             fmt::format("{}: no proof within {} s {}", lead, kProofTimeoutNs / 1'000'000'000, tail));
      }
      if (!q.ch) {
        timespec nap{0, 50'000};  // an idle peer is waited for without spinning a core
        nanosleep(&nap, nullptr);
      }
      continue;
    }
    if (wc.status != IBV_WC_SUCCESS) {
      throw PeerProofError(q.peer, fmt::format("{}: {} completion: {} (wc status {}) {}", lead, opcode_name(wc.opcode),
                                               ibv_wc_status_str(wc.status), static_cast<int>(wc.status), tail));
    }
    if (!is_recv(wc)) continue;  // our own proof SEND
    if (wc.opcode != IBV_WC_RECV) {
      throw PeerProofError(
          q.peer, fmt::format("{}: it sent {} where a proof SEND belongs {}", lead, opcode_name(wc.opcode), tail));
    }
    const std::uint8_t* at = q.proof_buf + kProofSlot * (2 + received);
    ++received;
    return {at, std::min<std::size_t>(wc.byte_len, kProofSlot)};
  }
}

// Client: hello (its nonce) -> the server's proof, checked -> its own proof. Server: the hello ->
// its proof -> the client's proof, checked. Each end posts load only after this returns.
void VerbsEngine::prove_peer(Qp& q) {
  const std::int64_t deadline = std::min(mono_now_ns() + kProofTimeoutNs, ctx_->hard_deadline() - 1'000'000'000);
  auto refuse = [&](const qp_proof::Checked& c) {
    throw PeerProofError(q.peer,
                         fmt::format("RDMA peer {} did not prove the test token: {} (queue pair {} on {}; nothing was "
                                     "posted to it)",
                                     q.peer, c.text, q.local.qpn, q.dev->label));
  };
  auto post = [&](std::size_t slot, const qp_proof::Message& m) {
    if (int e = post_proof(q, slot, m); e != 0) {
      throw PeerProofError(q.peer, fmt::format("RDMA peer {}: posting the proof of the test token failed: {} on {}",
                                               q.peer, errno_text(e), q.dev->label));
    }
  };
  std::uint32_t received = 0;
  const auth::Nonce mine = auth::make_nonce();
  if (q.client) {
    post(0, qp_proof::encode_client_hello(mine));
    auth::Nonce theirs{};
    const auto c =
        qp_proof::check_server_proof(next_proof(q, received, deadline), q.proof_token, q.binding, mine, theirs);
    if (!c.ok()) refuse(c);
    post(1, qp_proof::encode_client_proof(q.proof_token, q.binding, mine, theirs));
  } else {
    auth::Nonce theirs{};
    const auto h = qp_proof::check_client_hello(next_proof(q, received, deadline), theirs);
    if (!h.ok()) refuse(h);
    post(0, qp_proof::encode_server_proof(q.proof_token, q.binding, theirs, mine));
    const auto c =
        qp_proof::check_client_proof(next_proof(q, received, deadline), q.proof_token, q.binding, theirs, mine);
    if (!c.ok()) refuse(c);
  }
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
    sge = {reinterpret_cast<std::uintptr_t>(d.buf + d.block), len, d.mr->lkey};
    wr.opcode = IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = q.remote.addr;
    wr.wr.rdma.rkey = q.remote.rkey;
    return;
  }
  sge = {reinterpret_cast<std::uintptr_t>(d.buf), len, d.mr->lkey};
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
  return ibv_post_send(q.qp, &wr, &bad);
}

int VerbsEngine::post_notice(Qp& q, std::uint32_t imm, bool signaled, std::uint64_t wr_id) noexcept {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(imm);
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(q.qp, &wr, &bad);
}

int VerbsEngine::repost_recv(Qp& q) noexcept {
  const Device& d = *q.dev;
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(d.buf + d.block), static_cast<std::uint32_t>(d.block), d.mr->lkey};
  ibv_recv_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(q.qp, &wr, &bad);
}

bool VerbsEngine::keep_draining(std::int64_t& last_activity, int n) const noexcept {
  const std::int64_t now = mono_now_ns();
  if (last_activity == 0 || n > 0) last_activity = now;
  return now - last_activity < 500'000'000;
}

bool is_recv(const ibv_wc& wc) {
  return (wc.opcode & IBV_WC_RECV) != 0;
}

// Stream writes tell the target how many blocks landed in the immediate of the signalled
// WRITE_WITH_IMM only (the others are plain RDMA WRITEs): the target takes one receive and one
// completion per --cq-mod blocks, as the sender does. The top bit marks the count, so an
// immediate without it (rpc, an older sender) still means "byte_len bytes".
constexpr std::uint32_t kImmBlocks = 0x80000000u;
constexpr int kPollBatch = 32;

// Bytes a target's receive completion stands for.
std::uint64_t received_bytes(const ibv_wc& wc, std::uint64_t block) {
  if ((wc.wc_flags & IBV_WC_WITH_IMM) != 0) {
    const std::uint32_t imm = ntohl(wc.imm_data);
    if ((imm & kImmBlocks) != 0) return std::uint64_t{imm & ~kImmBlocks} * block;
  }
  return wc.byte_len;
}

// The posting side of a stream: keeps qdepth blocks in flight, a completion every --cq-mod posts.
// Each refill goes down as one chained post list (one doorbell, one system call on Soft-RoCE),
// not one ibv_post_send per block.
void VerbsEngine::stream_active(Qp& q) {
  ctx_->enter_data_thread("rdma-tx", q.flow->id);
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
      if (int e = ibv_post_send(q.qp, wrs.data(), &bad); e != 0) {
        return fail(q, nread ? "ibv_post_send(RDMA READ)" : "ibv_post_send", e);
      }
      posted += k;
      last_signaled = sig_upto;
    }
    const int n = poll(q, wc, kPollBatch);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) return fail_wc(q, wc[i]);
      if (is_recv(wc[i]) || wc[i].wr_id == 0 || wc[i].wr_id >= kProofWrId) continue;  // notices, the proof
      const std::uint64_t upto = wc[i].wr_id;
      if (upto <= completed) continue;
      const std::uint64_t blocks = upto - completed;
      completed = upto;
      if (nread) {
        q.flow->counters.add_rx(blocks * len);
        // Tell the client its block was taken (unsignalled: the next READ's completion retires it).
        if (int e = post_notice(q, static_cast<std::uint32_t>(len), false); e != 0)
          return fail(q, "ibv_post_send(notice)", e);
      } else {
        q.flow->counters.add_tx(blocks * len);
      }
      q.flow->counters.add_msg();
    }
    if (n < 0) return fail(q, "ibv_poll_cq", EIO);
  }
  // Blocks posted after the last signalled one are retired by one more signalled (zero-byte)
  // work request: RC completes in order, so its completion covers them; its immediate tells the
  // target how many blocks it has not been told of yet.
  if (!nread && posted > last_signaled && !ctx.aborted()) {
    const std::uint32_t imm = imm_writes ? kImmBlocks | static_cast<std::uint32_t>(posted - last_signaled) : 0;
    if (post_notice(q, imm, true, posted) == 0) last_signaled = posted;
  }
  // Drain what is still in flight (bounded), so the peer's count matches ours.
  const std::int64_t until = std::min(ctx.hard_deadline() - 1'000'000'000, mono_now_ns() + 2'000'000'000);
  while (completed < last_signaled && mono_now_ns() < until && !ctx.aborted()) {
    const int n = poll(q, wc, kPollBatch);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) return fail_wc(q, wc[i]);
      if (is_recv(wc[i]) || wc[i].wr_id == 0 || wc[i].wr_id >= kProofWrId || wc[i].wr_id <= completed) continue;
      const std::uint64_t blocks = wc[i].wr_id - completed;
      completed = wc[i].wr_id;
      if (nread) {
        q.flow->counters.add_rx(blocks * len);
        post_notice(q, static_cast<std::uint32_t>(len), true);
      } else {
        q.flow->counters.add_tx(blocks * len);
      }
    }
  }
}

// The target of a stream: counts what arrives (WRITE_WITH_IMM/SEND) or what was taken (notices).
void VerbsEngine::stream_passive(Qp& q) {
  ctx_->enter_data_thread("rdma-rx", q.flow->id);
  RunContext& ctx = *ctx_;
  ctx.wait_for_start();
  const std::uint64_t block = q.dev->block;
  ibv_wc wc[kPollBatch];
  const std::int64_t until = ctx.hard_deadline() - 1'000'000'000;
  // The passive side keeps counting after the stop until the active side's drain is over.
  std::int64_t last = 0;
  // The target only counts, so poll() sleeps on its completion channel when the CQ is empty
  // (create_qp gives every passive QP one): with 2 x qdepth + 2 receives posted and an immediate
  // only every --cq-mod writes, the wakeup latency cannot starve the sender of receives.
  // Spinning here took CPU from the sender and the provider (Soft-RoCE does its work in the
  // kernel on the same CPUs): the 50 us naps used before still cost this thread 43 % of a vCPU,
  // and fabperf / ib_write_bw (64K, q128/Q100, 3 alternating rounds, idle host) went from 0.89 to
  // 1.05 with the channel (docs/rdma.md).
  while (!stop_ && !ctx.aborted()) {
    const int n = poll(q, wc, kPollBatch);
    if (n < 0) return fail(q, "ibv_poll_cq", EIO);
    if (n == 0) {
      // The clock is read only when there is nothing to do (a system call in some guests).
      if (mono_now_ns() >= until) break;
      if (ctx.stopping() && !keep_draining(last, 0)) break;
      continue;
    }
    if (ctx.stopping()) keep_draining(last, n);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) return fail_wc(q, wc[i]);
      if (!is_recv(wc[i])) continue;
      if (q.dir == Dir::nread) {
        q.flow->counters.add_tx(ntohl(wc[i].imm_data));
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
  ctx_->enter_data_thread("rdma-rpc", q.flow->id);
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
  ctx_->enter_data_thread("rdma-srv", q.flow->id);
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
        } else if (q.dir == Dir::pull_back) {
          e = post_data(q, Dir::pull_back, true, 1);
        } else {
          e = post_data(q, Dir::nread, true, 1);
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

std::unique_ptr<Engine> make_verbs_engine() {
  return std::make_unique<VerbsEngine>();
}

}  // namespace fabperf
