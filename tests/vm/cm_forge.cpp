// A hostile rdma_cm client for the VM lab (tests/vm/rdma_pair_guest.sh). It acts as the
// coordinator towards one agent (authenticated with the key file), has it open an --rdma-cm
// server for a test that never starts, and then connects to that listener four times:
//   foreign   56 bytes without fabperf's magic       -> refused, "not a fabperf ... version"
//   bad-proof a well-formed request signed with a token that is not this test's -> "bad proof"
//   genuine   the same request signed as client node 1 of this test -> accepted, and the server's
//             answer proves the test token (the control: the forgeries differ only in the proof)
//   replay    the genuine request again              -> refused, "this connection is already set up"
// Then it drops the control connection (the agent abandons the test). Not part of fabperf: it
// exists so the refusal paths run against a real rdma_cm listener on a real (emulated) wire.
//
//   fabperf_cm_forge KEY_FILE AGENT_ADDR:PORT
// Exit status: 0 when every case went as expected, 1 when one did not, 2 on a usage error,
// 3 when the agent or the RDMA stack could not be used at all.
#include "vm/forge_control.hpp"

#include <fabperf/core/spec.hpp>
#include <fabperf/engine/engine.hpp>
#include <fabperf/engine/rdma_cm_wire.hpp>
#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace fabperf;
using namespace fabperf::forge;

namespace {

// ---- rdma_cm ---------------------------------------------------------------------------------
rdma_cm_event* next_event(rdma_event_channel* ch) {
  pollfd p{ch->fd, POLLIN, 0};
  if (::poll(&p, 1, kStepMs) <= 0) return nullptr;
  rdma_cm_event* ev = nullptr;
  return rdma_get_cm_event(ch, &ev) == 0 ? ev : nullptr;
}

struct Outcome {
  bool answered{false};
  bool rejected{false};
  std::string text;                  // the REJ's reason (with the CM status), or the event's name
  std::vector<std::uint8_t> answer;  // the REP's private data when accepted
};

// One connection attempt carrying `data` as its private data. An accepted connection stays up
// until the Attempt is destroyed (the replay case runs while the genuine connection lives).
class Attempt {
 public:
  Attempt(const std::string& addr, std::uint16_t port, const std::uint8_t* data, std::size_t len);
  ~Attempt();
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;
  Outcome outcome;

 private:
  rdma_event_channel* ch{nullptr};
  rdma_cm_id* id{nullptr};
  ibv_pd* pd{nullptr};
  ibv_cq* cq{nullptr};
};

Attempt::Attempt(const std::string& addr, std::uint16_t port, const std::uint8_t* data, std::size_t len) {
  ch = rdma_create_event_channel();
  if (!ch) die("rdma_create_event_channel: " + std::string(std::strerror(errno)));
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) die("rdma_create_id: " + std::string(std::strerror(errno)));
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(port);
  inet_pton(AF_INET, addr.c_str(), &dst.sin_addr);
  auto step = [&](rdma_cm_event_type want, const char* what) {
    rdma_cm_event* ev = next_event(ch);
    if (!ev) die(std::string(what) + ": no event");
    const auto got = ev->event;
    rdma_ack_cm_event(ev);
    if (got != want) die(std::string(what) + ": " + rdma_event_str(got));
  };
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), kStepMs) != 0) die("rdma_resolve_addr");
  step(RDMA_CM_EVENT_ADDR_RESOLVED, "rdma_resolve_addr");
  if (rdma_resolve_route(id, kStepMs) != 0) die("rdma_resolve_route");
  step(RDMA_CM_EVENT_ROUTE_RESOLVED, "rdma_resolve_route");
  pd = ibv_alloc_pd(id->verbs);
  cq = pd ? ibv_create_cq(id->verbs, 4, nullptr, nullptr, 0) : nullptr;
  if (!cq) die("ibv_alloc_pd/ibv_create_cq: " + std::string(std::strerror(errno)));
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, pd, &ia) != 0) die("rdma_create_qp: " + std::string(std::strerror(errno)));
  rdma_conn_param p{};
  p.private_data = data;
  p.private_data_len = static_cast<std::uint8_t>(len);
  p.responder_resources = p.initiator_depth = 1;
  p.retry_count = p.rnr_retry_count = 7;
  if (rdma_connect(id, &p) != 0) die("rdma_connect: " + std::string(std::strerror(errno)));
  Outcome& o = outcome;
  if (rdma_cm_event* ev = next_event(ch)) {
    o.answered = true;
    const auto* pd_bytes = static_cast<const std::uint8_t*>(ev->param.conn.private_data);
    const std::size_t n = pd_bytes ? ev->param.conn.private_data_len : 0;
    if (ev->event == RDMA_CM_EVENT_REJECTED) {
      o.rejected = true;
      // Status 28 is a reject by the listening application (IB_CM_REJ_CONSUMER_DEFINED), the
      // only kind whose text comes from fabperf.
      if (ev->status == 28) {
        o.text.assign(reinterpret_cast<const char*>(pd_bytes), strnlen(reinterpret_cast<const char*>(pd_bytes), n));
      } else {
        o.text = "(CM reject status " + std::to_string(ev->status) + ", not from fabperf)";
      }
    } else {
      o.text = rdma_event_str(ev->event);
      if (ev->event == RDMA_CM_EVENT_ESTABLISHED) o.answer.assign(pd_bytes, pd_bytes + n);
    }
    rdma_ack_cm_event(ev);
  }
}

Attempt::~Attempt() {
  if (outcome.answered && !outcome.rejected) {
    rdma_disconnect(id);
    if (rdma_cm_event* ev = next_event(ch)) rdma_ack_cm_event(ev);
  }
  if (id && id->qp) rdma_destroy_qp(id);
  if (id) rdma_destroy_id(id);
  if (cq) ibv_destroy_cq(cq);
  if (pd) ibv_dealloc_pd(pd);
  if (ch) rdma_destroy_event_channel(ch);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fabperf_cm_forge KEY_FILE AGENT_ADDR:PORT\n");
    return 2;
  }
  const std::string target = argv[2];
  const auto colon = target.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "fabperf_cm_forge: '%s': expected ADDR:PORT\n", argv[2]);
    return 2;
  }
  const std::string addr = target.substr(0, colon);
  int fails = 0;
  try {
    const auth::Key key = auth::load_key_file(argv[1]);
    const auto ctl =
        control_connect(addr, static_cast<std::uint16_t>(std::stoi(target.substr(colon + 1))), key, "cm_forge");
    proto::SetupServer m;
    m.test_id = "cm-forge";
    m.token = proto::random_token();
    SpecParams sp;
    sp.transport = Transport::rdma;
    sp.rdma_cm = true;
    sp.mode = Mode::stream;
    sp.buffsize = 64 * 1024;
    sp.time = std::chrono::seconds(30);
    m.spec = TestSpec::make(sp);
    m.node_index = 0;
    m.expect_connections = 1;
    send_frame(*ctl, proto::MsgType::setup_server, proto::to_json(m));
    auto [t, body] = read_frame(*ctl);
    if (t != proto::MsgType::setup_server_ok) die("SETUP_SERVER: " + body.dump());
    const std::uint16_t port = proto::parse_setup_server_ok(body).data_port;
    keep_alive(*ctl);  // no more reads: the attempts below may outlast the agent's 4 s of patience
    std::printf("rdma_cm listener %s:%u (a test that never starts)\n", addr.c_str(), port);

    auto check = [&](const char* name, const Outcome& o, const std::string& want) {
      const bool ok = want.empty() ? (o.answered && !o.rejected) : (o.rejected && o.text == want);
      std::printf("%s %s: %s%s\n", ok ? "PASS" : "FAIL", name, o.rejected ? "rejected: " : "",
                  o.answered ? o.text.c_str() : "no answer");
      if (!ok) ++fails;
    };
    std::uint8_t foreign[rdma_cm::kRequestSize];
    std::mt19937 rng(std::random_device{}());
    for (auto& b : foreign) b = static_cast<std::uint8_t>(rng());
    foreign[0] = 'X';
    check("foreign", Attempt(addr, port, foreign, sizeof foreign).outcome,
          "not a fabperf RDMA connection request of this version");

    const auto req = rdma_cm::make_request(rdma_cm::kDirPush, false, 1, 0, 0x1000u, 0x10000ull, m.node_index);
    const auto forged = rdma_cm::encode_request(req, proto::random_token());
    check("bad-proof", Attempt(addr, port, forged.data(), forged.size()).outcome, "bad proof");

    const proto::Token client = derive_client_token(m.token, 1);
    auto elsewhere = req;  // genuinely signed, for another server of the test
    elsewhere.server = m.node_index + 1;
    const auto relayed = rdma_cm::encode_request(elsewhere, client);
    check("other-server", Attempt(addr, port, relayed.data(), relayed.size()).outcome,
          fmt::format("request meant for node {}, this is node {}", m.node_index + 1, m.node_index));
    const auto genuine = rdma_cm::encode_request(req, client);
    const Attempt live(addr, port, genuine.data(), genuine.size());
    const Outcome& g = live.outcome;
    check("genuine", g, "");
    std::string why;
    if (g.answered && !g.rejected && !rdma_cm::check_reply(g.answer, client, rdma_cm::request_mac(genuine), why)) {
      std::printf("FAIL genuine: the server's answer: %s\n", why.c_str());
      ++fails;
    }
    check("replay", Attempt(addr, port, genuine.data(), genuine.size()).outcome, "this connection is already set up");
    // ctl closes here: the agent abandons the test.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fabperf_cm_forge: %s\n", e.what());
    return 3;
  }
  return fails == 0 ? 0 : 1;
}
