// Replays fuzz corpora through the same entry point as the libFuzzer target, in the normal
// build (no clang needed): `fabperf_fuzz_replay [--data-hello] DIR...` (the frame target, or the
// data connections' challenge-response with --data-hello). Any exception other than the
// documented protocol/usage errors, or a crash, fails. With --write-seeds DIR (or
// --write-data-hello-seeds DIR) it writes the seed corpus (valid messages plus hostile ones) that
// tests/fuzz/corpus/frame (or corpus/data_hello) holds.
#include "fuzz/fuzz_data_hello_one.hpp"
#include "fuzz/fuzz_one.hpp"

#include <fabperf/proto/agent_result.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

using namespace fabperf;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes raw(proto::MsgType t, const std::string& body, std::uint32_t claimed) {
  const auto h = proto::encode_header(t, claimed);
  std::string all(reinterpret_cast<const char*>(h.data()), h.size());
  all += body;
  return Bytes(all.begin(), all.end());
}
// A keyed coordinator's real first flight (ClientHello with its PSK identity and binder), for
// the key given as hex: the fuzzer starts the agent's TLS side from genuine handshakes.
Bytes tls_client_hello(const std::string& key_hex) {
  const auto key = auth::parse_key(key_hex, "seed key");
  const tls::CtxPtr ctx = tls::make_psk_ctx(tls::derive_control_psk(key), false);
  SSL* ssl = SSL_new(ctx.get());
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  SSL_set_connect_state(ssl);
  (void)SSL_do_handshake(ssl);
  Bytes b(static_cast<std::size_t>(BIO_ctrl_pending(out)));
  BIO_read(out, b.data(), static_cast<int>(b.size()));
  SSL_free(ssl);
  return b;
}

Bytes raw(proto::MsgType t, const std::string& body) {
  return raw(t, body, static_cast<std::uint32_t>(body.size()));
}

std::vector<std::pair<std::string, Bytes>> seeds() {
  using proto::MsgType;
  std::vector<std::pair<std::string, Bytes>> s;
  auto add = [&](std::string name, Bytes b) { s.emplace_back(std::move(name), std::move(b)); };
  SpecParams p;
  p.mode = Mode::stream;
  p.time = std::chrono::seconds(2);
  const TestSpec spec = TestSpec::make(p);
  add("hello",
      proto::encode_frame(MsgType::hello, proto::to_json(proto::Hello{3, 3, "coord", proto::local_capabilities()})));
  add("hello_ok", proto::encode_frame(MsgType::hello_ok, proto::to_json(proto::HelloOk{
                                                             4, "host", "0.1.0", 42, {"tls13-psk"}, "192.0.2.1"})));
  add("tls_client_hello", tls_client_hello(std::string(64, 'a')));
  add("tls_client_hello_other_key", tls_client_hello(std::string(64, 'b')));
  add("ping", proto::encode_frame(MsgType::ping, proto::to_json(proto::Ping{7})));
  add("pong", proto::encode_frame(MsgType::pong, proto::to_json(proto::Pong{7, 100, 200})));
  proto::SetupServer ss;
  ss.test_id = "0123456789abcdef";
  ss.spec = spec;
  ss.expect_connections = 2;
  add("setup_server", proto::encode_frame(MsgType::setup_server, proto::to_json(ss)));
  add("setup_server_ok",
      proto::encode_frame(MsgType::setup_server_ok, proto::to_json(proto::SetupServerOk{4000, {"w"}})));
  proto::SetupClient sc;
  sc.test_id = "0123456789abcdef";
  sc.spec = spec;
  sc.node_index = 1;
  sc.targets = {proto::Target{0, "127.0.0.1", 4000, {}}, proto::Target{2, "::1", 4001, {}}};
  add("setup_client", proto::encode_frame(MsgType::setup_client, proto::to_json(sc)));
  add("setup_client_ok", proto::encode_frame(MsgType::setup_client_ok, proto::to_json(proto::SetupClientOk{2, {}})));
  proto::RdmaEndpoint ep{1, 0, 0, 0x11, 0x22, 0, {}, 0x7f0000001000ULL, 131072, 0x1234};
  ep.gid[10] = ep.gid[11] = 0xff;
  add("rdma_connect",
      proto::encode_frame(MsgType::rdma_connect, proto::to_json(proto::RdmaConnect{"0123456789abcdef", {ep}})));
  add("rdma_connect_ok", proto::encode_frame(MsgType::rdma_connect_ok, proto::to_json(proto::RdmaConnectOk{1})));
  add("nasty_rdma_connect",
      raw(MsgType::rdma_connect, R"({"test_id":"x","endpoints":[{"node":1,"peer":1,"conn":-1,"qpn":0,)"
                                 R"("psn":16777216,"lid":1e9,"gid":"FF","addr":-1,"len":0,"rkey":4294967296}]})"));
  add("start",
      proto::encode_frame(MsgType::start, proto::to_json(proto::Start{1000, 2000, 3000, 4000, 1'000'000'000})));
  add("heartbeat", proto::encode_frame(MsgType::heartbeat, json::object()));
  add("abort", proto::encode_frame(MsgType::abort, proto::to_json(proto::Abort{"user"})));
  add("error", proto::encode_frame(MsgType::error,
                                   proto::to_json(proto::ErrorMsg{proto::ErrorCode::key_required, "key mismatch"})));
  add("bye", proto::encode_frame(MsgType::bye, json::object()));
  add("result", proto::encode_frame(MsgType::result, to_json(AgentResult{})));
  // Hostile.
  Bytes len_max = raw(MsgType::hello, "");
  len_max[8] = len_max[9] = len_max[10] = len_max[11] = 0xff;
  add("nasty_length_ffffffff", len_max);
  add("nasty_length_over_cap", raw(MsgType::ping, "{}", proto::kMaxBody + 1));
  add("nasty_truncated_body", raw(MsgType::hello, "{\"proto_min\":", 200));
  Bytes bad_magic = raw(MsgType::ping, "{\"seq\":1}");
  bad_magic[0] = 'G';
  add("nasty_bad_magic", bad_magic);
  Bytes v1 = raw(MsgType::ping, "{\"seq\":1}");
  v1[5] = 1;
  add("nasty_version_1", v1);
  Bytes t0 = raw(MsgType::ping, "{}");
  t0[7] = 0;
  add("nasty_type_0", t0);
  Bytes t99 = raw(MsgType::ping, "{}");
  t99[7] = 99;
  add("nasty_type_99", t99);
  add("nasty_deep", raw(MsgType::ping, "{\"a\":" + std::string(200, '[') + std::string(200, ']') + "}"));
  add("nasty_not_object", raw(MsgType::ping, "[1,2,3]"));
  add("nasty_hello_types",
      raw(MsgType::hello, R"({"proto_min":"2","proto_max":2.5,"coordinator":7,"caps":{},"nonce":[]})"));
  add("nasty_hello_range",
      raw(MsgType::hello, R"({"proto_min":2,"proto_max":1,"coordinator":"x","caps":[],"nonce":"00"})"));
  add("nasty_pong_negative", raw(MsgType::pong, R"({"seq":1,"t_rx":-5,"t_tx":18446744073709551615})"));
  add("nasty_start_order",
      raw(MsgType::start, R"({"start_at":5,"window_open":4,"window_close":3,"end_at":2,"interval_ns":1})"));
  json big = proto::to_json(sc);
  big["spec"]["threads"] = 1e300;
  big["spec"]["buffsize"] = -1;
  add("nasty_setup_client_spec", proto::encode_frame(MsgType::setup_client, big));
  json many = proto::to_json(sc);
  many["targets"] = json::array();
  for (int i = 0; i < 40; ++i)
    many["targets"].push_back({{"node_index", i}, {"host", std::string(300, 'h')}, {"port", 70000}});
  add("nasty_setup_client_targets", proto::encode_frame(MsgType::setup_client, many));
  add("retired_auth_type", raw(static_cast<MsgType>(15), R"({"nonce":"zz","proof":null,"caps":[1]})"));
  add("nasty_utf8", raw(MsgType::abort, "{\"reason\":\"\xff\xfe\"}"));
  add("nasty_nan", raw(MsgType::ping, R"({"seq":NaN})"));
  // The peer proof of an RDMA queue pair: the three passes as qp_proof_one checks them.
  const qp_proof::Binding qb{0, 1, 0, 0x11, 0x22, {}, {}};
  const auth::Nonce zero{};
  const auto qh = qp_proof::encode_client_hello(zero);
  add("qp_proof_hello", Bytes(qh.begin(), qh.end()));
  const auto qs = qp_proof::encode_server_proof(proto::Token{}, qb, zero, zero);
  add("qp_proof_server", Bytes(qs.begin(), qs.end()));
  const auto qc = qp_proof::encode_client_proof(proto::Token{}, qb, zero, zero);
  add("qp_proof_client", Bytes(qc.begin(), qc.end()));
  auto qbad = qs;
  qbad[40] ^= 0x80;
  add("nasty_qp_proof_flipped", Bytes(qbad.begin(), qbad.end()));
  const std::string key = std::string(64, 'a') + "\n";
  add("key_text", Bytes(key.begin(), key.end()));
  return s;
}

// Whole conversations from one peer (data_hello's fuzz entry reads a HELLO then a PROOF as the
// server, a CHALLENGE then a VERDICT as the client), genuine ones with proofs that verify under
// the fuzz key, and hostile ones.
std::vector<std::pair<std::string, Bytes>> data_hello_seeds() {
  namespace dh = data_hello;
  std::vector<std::pair<std::string, Bytes>> s;
  auto add = [&](std::string name, std::initializer_list<std::span<const std::uint8_t>> parts) {
    Bytes b;
    for (const auto& p : parts) b.insert(b.end(), p.begin(), p.end());
    s.emplace_back(std::move(name), std::move(b));
  };
  const auto key = fuzz::data_hello_key();
  const auto ns = fuzz::data_hello_server_nonce();
  const auto id = fuzz::kDataHelloTestId;
  // Server side: a client's HELLO and its PROOF for the server nonce the fuzz entry uses.
  dh::Hello h = fuzz::data_hello_client_hello();
  h.op = dh::Op::rpc;
  h.client_node = 7;
  h.server_node = 2;
  h.conn_index = 5;
  const auto hello = dh::encode_hello(h);
  const auto proof = dh::encode_proof(dh::client_proof(key, id, h, ns));
  add("server_hello_and_proof", {hello, proof});
  add("server_hello_only", {hello});
  add("server_wrong_proof", {hello, dh::encode_proof(dh::server_proof(key, id, h, ns))});
  // Client side: the CHALLENGE for the fuzz entry's hello, then a VERDICT.
  const auto ch = fuzz::data_hello_client_hello();
  const auto challenge = dh::encode_challenge({dh::Status::ok, ns, dh::server_proof(key, id, ch, ns)});
  add("client_challenge_and_verdict", {challenge, dh::encode_verdict(dh::Status::ok)});
  add("client_challenge_refused_proof", {challenge, dh::encode_verdict(dh::Status::bad_proof)});
  add("client_refusal", {dh::encode_challenge({dh::Status::duplicate, {}, {}})});
  // Hostile.
  auto v3 = hello;
  v3[5] = 3;
  Bytes old80(v3.begin(), v3.end());
  old80.resize(80, 0xaa);  // version 3's 80-byte hello
  s.emplace_back("nasty_version_3_hello", old80);
  auto op = hello;
  op[7] = 0x7f;
  add("nasty_unknown_op", {op});
  auto magic = hello;
  magic[0] = 'G';
  add("nasty_bad_magic", {magic});
  add("nasty_truncated_hello", {std::span<const std::uint8_t>(hello).first(51)});
  auto refusal_nonce = dh::encode_challenge({dh::Status::too_many, {}, {}});
  refusal_nonce[20] = 1;
  add("nasty_refusal_with_nonce", {refusal_nonce});
  auto status = dh::encode_verdict(dh::Status::ok);
  status[4] = 0xff;
  add("nasty_verdict_status", {challenge, status});
  add("nasty_long", {challenge, challenge, hello});
  return s;
}

void write_seeds(const char* dir, const std::vector<std::pair<std::string, Bytes>>& seeds) {
  fs::create_directories(dir);
  for (const auto& [name, bytes] : seeds) {
    std::ofstream out(fs::path(dir) / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-data-hello-seeds") {
    write_seeds(argv[2], data_hello_seeds());
    return 0;
  }
  if (argc == 3 && std::string(argv[1]) == "--write-seeds") {
    fs::create_directories(argv[2]);
    for (const auto& [name, bytes] : seeds()) {
      std::ofstream out(fs::path(argv[2]) / name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
    return 0;
  }
  const bool data_hello = argc >= 2 && std::string(argv[1]) == "--data-hello";
  const int first = data_hello ? 2 : 1;
  if (argc <= first) {
    std::cerr
        << "usage: fabperf_fuzz_replay [--data-hello] DIR... | --write-seeds DIR | --write-data-hello-seeds DIR\n";
    return 2;
  }
  std::size_t n = 0;
  for (int i = first; i < argc; ++i) {
    for (const auto& e : fs::directory_iterator(argv[i])) {
      if (!e.is_regular_file()) continue;
      std::ifstream in(e.path(), std::ios::binary);
      const Bytes b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (data_hello) {
        fabperf::fuzz::fuzz_data_hello_one(b.data(), b.size());
      } else {
        fabperf::fuzz::fuzz_one(b.data(), b.size());
      }
      ++n;
    }
  }
  std::cout << "replayed " << n << " inputs without a crash or an unexpected exception\n";
  return n > 0 ? 0 : 1;
}
