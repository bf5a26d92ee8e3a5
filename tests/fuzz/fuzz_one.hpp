// One fuzz input through everything a stranger's bytes can reach before authentication and
// everything an authenticated peer's frames reach: the frame decoder, every message parser,
// the pre-auth size cap, the key text parser, and the TLS 1.3 PSK handshake of a keyed agent
// and of a keyed coordinator (the input as the peer's first flight, through fabperf's own PSK
// callbacks). Only the documented errors (ProtocolError, UsageError) may come out; anything else
// (another exception, a crash, a sanitizer report) is a bug.
#pragma once

#include "proto/tls_psk.hpp"

#include <fabperf/auth.hpp>
#include <fabperf/error.hpp>
#include <fabperf/proto.hpp>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

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

inline void fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  try {
    proto::validate_frame(in);
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
