// A forged RDMA endpoint for the VM lab (tests/vm/rdma_pair_guest.sh): a process that owns a
// real RC queue pair on this guest's Soft-RoCE device, but not the test token. It acts as the
// coordinator towards one agent (authenticated with the key file) and makes it the client of a
// write test whose only server endpoint is this process's queue pair (QP number, GID, buffer
// address and rkey, as the default set-up forwards them). Then it answers the client's proof
// hello over the queue pair:
//   forged   with a server proof signed with a token that is not this test's: the client must
//            post nothing. This process's registered buffer keeps the bytes it was filled with,
//            no WRITE_WITH_IMM arrives, and the agent's result names the proof failure.
//   genuine  (the control: the cases differ only in the proof) signed with this test's token:
//            the client's own proof verifies here and its RDMA WRITEs land in the buffer, so
//            the checks above would see a write.
// Not part of fabperf: it exists so the proof runs against a real queue pair on a real
// (emulated) wire.
//
//   fabperf_qp_forge KEY_FILE AGENT_ADDR:PORT RDMA_DEVICE LOCAL_ADDR
// LOCAL_ADDR is this guest's address on the wire; its RoCE v2 GID on RDMA_DEVICE is used.
// Exit status: 0 when both cases went as expected, 1 when one did not, 2 on a usage error, 3 when
// the agent or the RDMA stack could not be used at all.
#include "vm/forge_control.hpp"

#include <fabperf/core/clock.hpp>
#include <fabperf/core/spec.hpp>
#include <fabperf/engine/engine.hpp>
#include <fabperf/engine/rdma_qp_proof.hpp>
#include <fabperf/proto/agent_result.hpp>
#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>

#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace fabperf;
using namespace fabperf::forge;

namespace {

constexpr std::size_t kBlock = 64 * 1024;
constexpr std::uint8_t kFill = 0x5a;
constexpr std::size_t kSlot = 128;
constexpr int kRecvs = 1024;  // WRITE_WITH_IMM consumes one each (every 16th block in the control)

std::string errtext(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// One RC queue pair with a registered 2 x 64 KiB buffer (what a fabperf server registers) and an
// inbox of receive slots, on the port whose RoCE v2 GID holds LOCAL_ADDR.
class ForgedQp {
 public:
  ForgedQp(const std::string& dev, const std::string& local_addr);
  ~ForgedQp();
  ForgedQp(const ForgedQp&) = delete;
  ForgedQp& operator=(const ForgedQp&) = delete;

  proto::RdmaEndpoint endpoint() const;
  void connect(const proto::RdmaEndpoint& peer);
  void send(const qp_proof::Message& m);
  // The next receive completion within `ms`: its opcode and the bytes it brought.
  struct Recv {
    ibv_wc_opcode opcode{IBV_WC_RECV};
    std::vector<std::uint8_t> bytes;
  };
  Recv next_recv(int ms);
  // Receive completions left in the CQ: (SENDs, WRITE_WITH_IMMs).
  std::pair<int, int> drain();
  [[nodiscard]] bool untouched() const {
    return std::all_of(buf_, buf_ + 2 * kBlock, [](std::uint8_t b) { return b == kFill; });
  }
  std::uint32_t qpn() const { return qp_->qp_num; }
  const ibv_gid& gid() const { return gid_; }

 private:
  ibv_context* ctx_{nullptr};
  ibv_pd* pd_{nullptr};
  ibv_cq* cq_{nullptr};
  ibv_qp* qp_{nullptr};
  ibv_mr* mr_{nullptr};
  ibv_mr* inbox_mr_{nullptr};
  std::uint8_t* buf_{nullptr};
  std::uint8_t* inbox_{nullptr};
  int gid_index_{-1};
  ibv_gid gid_{};
  ibv_mtu mtu_{IBV_MTU_1024};
  std::uint32_t psn_{0x1234};
};

ForgedQp::ForgedQp(const std::string& dev, const std::string& local_addr) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; list && i < n; ++i) {
    if (dev == ibv_get_device_name(list[i])) ctx_ = ibv_open_device(list[i]);
  }
  if (list) ibv_free_device_list(list);
  if (!ctx_) die("no RDMA device " + dev);
  ibv_port_attr pa{};
  if (ibv_query_port(ctx_, 1, &pa) != 0) die(errtext("ibv_query_port"));
  mtu_ = pa.active_mtu;
  in_addr a{};
  if (inet_pton(AF_INET, local_addr.c_str(), &a) != 1) die("'" + local_addr + "' is not an IPv4 address");
  ibv_gid want{};
  want.raw[10] = want.raw[11] = 0xff;
  std::memcpy(want.raw + 12, &a, 4);
  for (int g = 0; g < pa.gid_tbl_len && gid_index_ < 0; ++g) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx_, 1, static_cast<std::uint32_t>(g), &e, 0) != 0) continue;
    if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && std::memcmp(e.gid.raw, want.raw, 16) == 0) gid_index_ = g;
  }
  if (gid_index_ < 0) die(dev + " has no RoCE v2 GID for " + local_addr);
  gid_ = want;
  pd_ = ibv_alloc_pd(ctx_);
  if (!pd_) die(errtext("ibv_alloc_pd"));
  if (posix_memalign(reinterpret_cast<void**>(&buf_), 4096, 2 * kBlock) != 0 ||
      posix_memalign(reinterpret_cast<void**>(&inbox_), 4096, kSlot * 2) != 0) {
    die("out of memory");
  }
  std::memset(buf_, kFill, 2 * kBlock);
  std::memset(inbox_, 0, kSlot * 2);
  // What a fabperf server exposes: remote write and read on the whole buffer.
  mr_ = ibv_reg_mr(pd_, buf_, 2 * kBlock, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  inbox_mr_ = ibv_reg_mr(pd_, inbox_, kSlot * 2, static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  if (!mr_ || !inbox_mr_) die(errtext("ibv_reg_mr"));
  cq_ = ibv_create_cq(ctx_, 2 * kRecvs + 16, nullptr, nullptr, 0);
  if (!cq_) die(errtext("ibv_create_cq"));
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq_;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 8;
  ia.cap.max_recv_wr = kRecvs;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  qp_ = ibv_create_qp(pd_, &ia);
  if (!qp_) die(errtext("ibv_create_qp"));
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (ibv_modify_qp(qp_, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
    die("INIT failed");
  // Every receive lands in slot 0 (a WRITE_WITH_IMM brings no bytes into it): what arrived is
  // read right after each completion.
  for (int i = 0; i < kRecvs; ++i) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(inbox_), static_cast<std::uint32_t>(kSlot), inbox_mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = static_cast<std::uint64_t>(i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(qp_, &wr, &bad) != 0) die("ibv_post_recv failed");
  }
}

ForgedQp::~ForgedQp() {
  if (qp_) ibv_destroy_qp(qp_);
  if (cq_) ibv_destroy_cq(cq_);
  if (mr_) ibv_dereg_mr(mr_);
  if (inbox_mr_) ibv_dereg_mr(inbox_mr_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
  std::free(buf_);
  std::free(inbox_);
}

proto::RdmaEndpoint ForgedQp::endpoint() const {
  proto::RdmaEndpoint e{0,          1,        0, qp_->qp_num, psn_, 0, {}, reinterpret_cast<std::uintptr_t>(buf_),
                        2 * kBlock, mr_->rkey};
  std::memcpy(e.gid.data(), gid_.raw, 16);
  return e;
}

void ForgedQp::connect(const proto::RdmaEndpoint& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = mtu_;
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = 1;
  a.ah_attr.is_global = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid.data(), 16);
  a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index_);
  a.ah_attr.grh.hop_limit = 64;
  if (ibv_modify_qp(qp_, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
    die("RTR failed");
  }
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = 14;
  r.retry_cnt = 7;
  r.rnr_retry = 7;
  r.sq_psn = psn_;
  r.max_rd_atomic = 1;
  if (ibv_modify_qp(qp_, &r,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    die("RTS failed");
  }
}

void ForgedQp::send(const qp_proof::Message& m) {
  std::memcpy(inbox_ + kSlot, m.data(), m.size());
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(inbox_ + kSlot), static_cast<std::uint32_t>(m.size()), inbox_mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 1u << 20;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(qp_, &wr, &bad) != 0) die("ibv_post_send failed");
}

ForgedQp::Recv ForgedQp::next_recv(int ms) {
  const std::int64_t until = mono_now_ns() + std::int64_t{ms} * 1'000'000;
  ibv_wc wc{};
  while (mono_now_ns() < until) {
    const int n = ibv_poll_cq(cq_, 1, &wc);
    if (n == 0) {
      usleep(200);
      continue;
    }
    if (n < 0) die("ibv_poll_cq failed");
    if (wc.status != IBV_WC_SUCCESS) die(std::string("completion error: ") + ibv_wc_status_str(wc.status));
    if (!(wc.opcode & IBV_WC_RECV)) continue;  // our own SEND
    Recv r;
    r.opcode = wc.opcode;
    r.bytes.assign(inbox_, inbox_ + std::min<std::size_t>(wc.byte_len, kSlot));
    return r;
  }
  die("nothing arrived on the forged queue pair within " + std::to_string(ms / 1000) + " s");
}

std::pair<int, int> ForgedQp::drain() {
  int sends = 0, imms = 0;
  ibv_wc wc[32];
  int n = 0;
  while ((n = ibv_poll_cq(cq_, 32, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS || !(wc[i].opcode & IBV_WC_RECV)) continue;
      if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM)
        ++imms;
      else
        ++sends;
    }
  }
  return {sends, imms};
}

// One test against the agent, the forged QP as its only server. Returns true when it went as the
// case expects; prints one PASS/FAIL line.
bool run_case(const char* name, bool genuine, const auth::Key& key, const std::string& addr, std::uint16_t port,
              const std::string& dev, const std::string& local) {
  ForgedQp fq(dev, local);
  const auto ctl = control_connect(addr, port, key, "qp_forge");
  // The agent's clock, for START (all instants are on the agent's monotonic clock).
  send_frame(*ctl, proto::MsgType::ping, proto::to_json(proto::Ping{1}));
  auto [pt, pbody] = read_frame(*ctl);
  if (pt != proto::MsgType::pong) die("PING: " + pbody.dump());
  const std::int64_t here = mono_now_ns();
  const std::int64_t agent_at_pong = proto::parse_pong(pbody).t_tx;
  auto agent_now = [&] { return agent_at_pong + (mono_now_ns() - here); };

  proto::SetupClient m;
  m.test_id = std::string("qp-forge-") + name;
  m.token = proto::random_token();
  SpecParams sp;
  sp.transport = Transport::rdma;
  sp.mode = Mode::stream;
  sp.test = TestKind::write;
  sp.buffsize = kBlock;
  sp.time = std::chrono::seconds(2);
  sp.cq_mod = 16;
  m.spec = TestSpec::make(sp);
  m.node_index = 1;
  m.targets = {proto::Target{0, local, 0, {}, {fq.endpoint()}}};
  send_frame(*ctl, proto::MsgType::setup_client, proto::to_json(m));
  auto [st, sbody] = read_frame(*ctl);
  if (st != proto::MsgType::setup_client_ok) die("SETUP_CLIENT: " + sbody.dump());
  const auto ok = proto::parse_setup_client_ok(sbody);
  if (ok.rdma.size() != 1) die("SETUP_CLIENT_OK: " + std::to_string(ok.rdma.size()) + " queue pairs, expected 1");
  const proto::RdmaEndpoint client = ok.rdma[0];
  fq.connect(client);
  const std::int64_t start = agent_now() + 500'000'000;
  const auto& spec = m.spec;
  send_frame(*ctl, proto::MsgType::start,
             proto::to_json(proto::Start{start, start + spec.warmup().count(),
                                         start + spec.time().count() - spec.cooldown().count(),
                                         start + spec.time().count(), 1'000'000'000}));

  // The client's hello: a fabperf client sends it before anything else.
  const auto hello = fq.next_recv(kStepMs);
  auth::Nonce nc{};
  if (hello.opcode != IBV_WC_RECV || !qp_proof::check_client_hello(hello.bytes, nc).ok()) {
    std::printf("FAIL %s: the client's first message is not a proof hello (%zu bytes)\n", name, hello.bytes.size());
    return false;
  }
  qp_proof::Binding b{0, 1, 0, fq.qpn(), client.qpn, {}, {}};
  std::memcpy(b.server_gid.data(), fq.gid().raw, 16);
  std::memcpy(b.client_gid.data(), client.gid.data(), 16);
  const auth::Nonce ns = auth::make_nonce();
  const proto::Token signer = derive_client_token(genuine ? m.token : proto::random_token(), 1);
  fq.send(qp_proof::encode_server_proof(signer, b, nc, ns));
  std::string client_proof = "none";
  if (genuine) {
    const auto cp = fq.next_recv(kStepMs);
    const auto c = qp_proof::check_client_proof(cp.bytes, derive_client_token(m.token, 1), b, nc, ns);
    client_proof = c.ok() ? "verified" : c.text;
  }

  // The agent's result (it stops early on a failed proof, else after the 2 s test).
  AgentResult res;
  for (;;) {
    auto [t, body] = read_frame(*ctl);
    if (t == proto::MsgType::result) {
      res = parse_agent_result(body);
      break;
    }
    if (t == proto::MsgType::error) die("agent error: " + body.dump());
  }
  const auto [sends, imms] = fq.drain();
  std::uint64_t tx = 0;
  std::string flow_error;
  for (const auto& f : res.flows) {
    tx += f.tx_bytes_total;
    if (!f.error.empty()) flow_error = f.error;
  }
  const bool untouched = fq.untouched();
  bool pass = false;
  if (genuine) {
    pass = !untouched && imms > 0 && !res.aborted && tx > 0 && client_proof == "verified";
    std::printf("%s %s: client's proof %s; buffer %s, %d WRITE_WITH_IMM received, client sent %llu B, result %s\n",
                pass ? "PASS" : "FAIL", name, client_proof.c_str(), untouched ? "untouched" : "written", imms,
                static_cast<unsigned long long>(tx),
                res.aborted ? ("aborted: " + res.abort_reason).c_str() : "complete");
  } else {
    pass = untouched && imms == 0 && sends == 0 && tx == 0 && res.aborted &&
           res.abort_reason.find("did not prove the test token") != std::string::npos;
    std::printf(
        "%s %s: buffer %s, %d WRITE_WITH_IMM and %d more SENDs after the hello, client sent %llu B; the client "
        "reported: %s\n",
        pass ? "PASS" : "FAIL", name, untouched ? "untouched" : "WRITTEN", imms, sends,
        static_cast<unsigned long long>(tx), res.aborted ? res.abort_reason.c_str() : "(no abort)");
  }
  return pass;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: fabperf_qp_forge KEY_FILE AGENT_ADDR:PORT RDMA_DEVICE LOCAL_ADDR\n");
    return 2;
  }
  const std::string target = argv[2];
  const auto colon = target.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "fabperf_qp_forge: '%s': expected ADDR:PORT\n", argv[2]);
    return 2;
  }
  const std::string addr = target.substr(0, colon);
  const auto port = static_cast<std::uint16_t>(std::stoi(target.substr(colon + 1)));
  int fails = 0;
  try {
    const auth::Key key = auth::load_key_file(argv[1]);
    if (!run_case("forged", false, key, addr, port, argv[3], argv[4])) ++fails;
    // The agent releases the aborted test off its I/O thread: give it a moment before the next.
    for (int attempt = 0;; ++attempt) {
      try {
        if (!run_case("genuine", true, key, addr, port, argv[3], argv[4])) ++fails;
        break;
      } catch (const std::exception& e) {
        if (attempt >= 5 || std::string(e.what()).find("busy") == std::string::npos) throw;
        usleep(500'000);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fabperf_qp_forge: %s\n", e.what());
    return 3;
  }
  return fails == 0 ? 0 : 1;
}
