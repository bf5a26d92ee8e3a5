// One fuzz input through everything a stranger's bytes can reach before authentication and
// everything an authenticated peer's frames reach: the frame decoder, every message parser,
// the pre-auth size cap, the key text parser, and the TLS 1.3 PSK handshake of a keyed agent
// and of a keyed coordinator (the input as the peer's first flight, through fabperf's own PSK
// callbacks), the peer proof an RDMA queue pair's other end sends (rdma_qp_proof.hpp: the
// input as each of the three passes), and a RESULT's way from the frame to the rendered report. Only the documented
// errors (ProtocolError, UsageError) may come out; anything else (another exception, a crash, a sanitizer report) is a
// bug.
#pragma once

#include "proto/tls_psk.hpp"

#include <fabperf/core/error.hpp>
#include <fabperf/engine/rdma_qp_proof.hpp>
#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>
#include <fabperf/report/report.hpp>

#include <nlohmann/json.hpp>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace fabperf::fuzz {

// The input as the first bytes a peer sends to one end of a keyed control connection: the
// agent's side (a ClientHello with PSK identities and binders) or the coordinator's (after its
// own ClientHello, the agent's ServerHello and encrypted flight). No sockets: memory BIOs.
inline void tls_handshake_one(const std::uint8_t* data, std::size_t size, bool server) {
  static const auto key = auth::parse_key(std::string(64, 'a'), "fuzz key");
  static const tls::CtxPtr server_ctx = tls::make_psk_ctx(tls::derive_control_psk(key), true);
  static const tls::CtxPtr client_ctx = tls::make_psk_ctx(tls::derive_control_psk(key), false);
  SSL* ssl = SSL_new(server ? server_ctx.get() : client_ctx.get());
  if (ssl == nullptr) return;
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);  // ssl owns both
  if (server) {
    SSL_set_accept_state(ssl);
  } else {
    SSL_set_connect_state(ssl);
    (void)SSL_do_handshake(ssl);  // writes the ClientHello, then wants the server's answer
  }
  BIO_write(in, data, static_cast<int>(std::min<std::size_t>(size, 1u << 16)));
  const int r = SSL_do_handshake(ssl);
  if (r != 1) {
    (void)tls::classify_client_failure(ERR_peek_error());
    (void)tls::peer_offered_other_key(ssl);
  } else {
    // A completed handshake from fuzz bytes would mean the PSK is known to the input: a bug.
    __builtin_trap();
  }
  ERR_clear_error();
  SSL_free(ssl);
}

// The input as what the peer of a queue pair SENT into a proof slot (at most one 128-byte slot):
// a refusal is a value, never an exception; an accepted proof from fuzz bytes would mean the
// MAC is forgeable without the token.
inline void qp_proof_one(std::span<const std::uint8_t> in) {
  static const proto::Token token{};
  static const qp_proof::Binding binding{0, 1, 0, 0x11, 0x22, {}, {}};
  const auth::Nonce nc{};
  auth::Nonce ns{};
  (void)qp_proof::check_client_hello(in, ns);
  const auto s = qp_proof::check_server_proof(in, token, binding, nc, ns);
  const auto c = qp_proof::check_client_proof(in, token, binding, nc, ns);
  if (s.ok() || c.ok()) {
    // Only the seeds made with this all-zero token and binding may pass.
    const auto want_s = qp_proof::encode_server_proof(token, binding, nc, ns);
    const auto want_c = qp_proof::encode_client_proof(token, binding, nc, ns);
    const bool seed = (s.ok() && std::equal(in.begin(), in.end(), want_s.begin(), want_s.end())) ||
                      (c.ok() && std::equal(in.begin(), in.end(), want_c.begin(), want_c.end()));
    if (!seed) __builtin_trap();
  }
}

// A RESULT frame that parses goes on to the report, as the coordinator takes it: computed beside
// a server that reported nothing of its own, then rendered as text, JSON and nsdperf's line. The
// coordinator once crashed on a report with no pairs; nothing a peer sends may do that again.
inline void result_to_report_one(std::span<const std::uint8_t> in) {
  if (in.size() < proto::kHeaderSize) return;
  const proto::Header h = proto::decode_header(in.first<proto::kHeaderSize>());
  if (h.type != proto::MsgType::result || in.size() - proto::kHeaderSize != h.length) return;
  RunRecord run;
  NodeRecord client, server;
  client.index = 0;
  client.name = "client:6668";
  client.is_client = true;
  client.result = parse_agent_result(proto::parse_body(h.type, in.subspan(proto::kHeaderSize)));
  server.index = 1;
  server.name = "server:6668";
  server.is_server = true;
  server.status = NodeStatus::lost;
  run.nodes = {client, server};
  const Report r = compute_report(run);
  (void)render_text(r, true);
  (void)render_json(r).dump();
  (void)render_summary_line(r);
}

inline void fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  if (size <= 128) qp_proof_one(in);
  try {
    proto::validate_frame(in);
    result_to_report_one(in);
  } catch (const ProtocolError&) {
  }
  if (size >= proto::kHeaderSize) {
    try {
      (void)proto::decode_header(in.first<proto::kHeaderSize>(), proto::kMaxPreAuthBody);
    } catch (const ProtocolError&) {
    }
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)auth::parse_key(text, "fuzz input");
  } catch (const UsageError&) {
  }
  // The agent's first-byte test picks TLS for a handshake record; both TLS ends see the input.
  if (size > 0 && data[0] == tls::kHandshakeRecord) tls_handshake_one(data, size, true);
  tls_handshake_one(data, size, false);
}

}  // namespace fabperf::fuzz
