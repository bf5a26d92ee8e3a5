#include "proto/tls_psk.hpp"

#include <fabperf/core/error.hpp>
#include <fabperf/proto/proto.hpp>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <memory>

namespace fabperf::tls {
namespace {

constexpr std::string_view kPskInfo = "fabperf tls13 control psk v1";
constexpr std::string_view kKeyIdInfo = "fabperf key id v1";
// TLS_AES_128_GCM_SHA256 (RFC 8446 B.4); its handshake hash is SHA-256, as HKDF's.
constexpr unsigned char kCipherId[2] = {0x13, 0x01};

void free_psk(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<std::shared_ptr<const Psk>*>(ptr);
}

// Where an SSL_CTX keeps its PSK, and an SSL the mark "another key was offered".
int ctx_psk_index() {
  static const int i = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, free_psk);
  return i;
}
int other_key_index() {
  static const int i = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return i;
}

const Psk* psk_of(SSL* ssl) {
  auto* holder = static_cast<std::shared_ptr<const Psk>*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_psk_index()));
  return holder ? holder->get() : nullptr;
}

// A session object carrying the external PSK, as OpenSSL's callbacks want it.
SSL_SESSION* psk_session(SSL* ssl, const Psk& psk) {
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kCipherId);
  if (cipher == nullptr) return nullptr;
  SSL_SESSION* s = SSL_SESSION_new();
  if (s == nullptr) return nullptr;
  if (SSL_SESSION_set1_master_key(s, psk.key.data(), psk.key.size()) != 1 || SSL_SESSION_set_cipher(s, cipher) != 1 ||
      SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(s);
    return nullptr;
  }
  return s;
}

int use_session_cb(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* idlen, SSL_SESSION** sess) {
  *sess = nullptr;
  const Psk* psk = psk_of(ssl);
  if (psk == nullptr) return 0;
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kCipherId);
  // After a HelloRetryRequest OpenSSL asks again with the negotiated hash: only SHA-256 fits.
  if (cipher == nullptr || (md != nullptr && md != SSL_CIPHER_get_handshake_digest(cipher))) return 1;
  *sess = psk_session(ssl, *psk);
  if (*sess == nullptr) return 0;
  *id = reinterpret_cast<const unsigned char*>(psk->identity.data());
  *idlen = psk->identity.size();
  return 1;
}

int find_session_cb(SSL* ssl, const unsigned char* identity, size_t identity_len, SSL_SESSION** sess) {
  *sess = nullptr;
  const Psk* psk = psk_of(ssl);
  if (psk == nullptr) return 0;
  if (identity_len != psk->identity.size() || CRYPTO_memcmp(identity, psk->identity.data(), identity_len) != 0) {
    // Not our key: no session, so the handshake fails (there is no certificate to fall back to).
    SSL_set_ex_data(ssl, other_key_index(), reinterpret_cast<void*>(1));
    return 1;
  }
  *sess = psk_session(ssl, *psk);
  return *sess == nullptr ? 0 : 1;
}

// A keyed connection has no certificates: a peer that presents one is not an agent holding the
// key (a key-less impostor answering a PSK offer with an ordinary certificate), whatever it is.
int reject_any_certificate(int, X509_STORE_CTX*) {
  return 0;
}

[[noreturn]] void fail(const char* what) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  throw SystemError("configure TLS", what, e ? error_text(e) : std::string("OpenSSL failed"));
}

}  // namespace

Psk::~Psk() {
  OPENSSL_cleanse(key.data(), key.size());
}

void hkdf_sha256(std::span<const std::uint8_t> ikm, std::string_view info, std::span<std::uint8_t> out) {
  EVP_PKEY_CTX* pctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  std::size_t len = out.size();
  const bool ok = pctx != nullptr && EVP_PKEY_derive_init(pctx) == 1 &&
                  EVP_PKEY_CTX_set_hkdf_md(pctx, EVP_sha256()) == 1 &&
                  EVP_PKEY_CTX_set1_hkdf_key(pctx, ikm.data(), static_cast<int>(ikm.size())) == 1 &&
                  EVP_PKEY_CTX_add1_hkdf_info(pctx, reinterpret_cast<const unsigned char*>(info.data()),
                                              static_cast<int>(info.size())) == 1 &&
                  EVP_PKEY_derive(pctx, out.data(), &len) == 1 && len == out.size();
  EVP_PKEY_CTX_free(pctx);
  if (!ok) {
    ERR_clear_error();
    throw SystemError("derive", "HKDF-SHA256", "OpenSSL failed");
  }
}

std::shared_ptr<const Psk> derive_control_psk(const auth::Key& key) {
  auto psk = std::make_shared<Psk>();
  hkdf_sha256(key.bytes(), kPskInfo, psk->key);
  std::array<std::uint8_t, kKeyIdBytes> id{};
  hkdf_sha256(key.bytes(), kKeyIdInfo, id);
  psk->identity = "fabperf-key-" + to_hex(id);
  return psk;
}

CtxPtr make_psk_ctx(std::shared_ptr<const Psk> psk, bool server) {
  CtxPtr owner(SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()));
  SSL_CTX* ctx = owner.get();
  if (ctx == nullptr) fail("context");
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1) {
    fail("TLS 1.3 only");
  }
  if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256") != 1) fail("cipher suite TLS_AES_128_GCM_SHA256");
  // No tickets, no resumption, no compression, no renegotiation (not in TLS 1.3 anyway).
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  if (server && SSL_CTX_set_num_tickets(ctx, 0) != 1) fail("no session tickets");
  // No certificates: the PSK authenticates both ends. A client verifies "peer certificates" with
  // a callback that refuses every one, so a server that answers with a certificate fails the
  // handshake; a server asks for none (asking would be a certificate request nobody answers).
  if (server) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    SSL_CTX_set_psk_find_session_callback(ctx, find_session_cb);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, reject_any_certificate);
    SSL_CTX_set_psk_use_session_callback(ctx, use_session_cb);
  }
  auto* holder = new std::shared_ptr<const Psk>(std::move(psk));
  if (SSL_CTX_set_ex_data(ctx, ctx_psk_index(), holder) != 1) {
    delete holder;
    fail("pre-shared key");
  }
  return owner;
}

bool psk_was_used(const SSL* ssl) {
  // TLS 1.3 marks a handshake that accepted a PSK (external or resumed) as reused; resumption is
  // off, so a reused session here is our external key. No certificate may have been sent either.
  const std::unique_ptr<X509, decltype(&X509_free)> cert(SSL_get1_peer_certificate(ssl), &X509_free);
  return SSL_session_reused(ssl) == 1 && cert == nullptr;
}

bool peer_offered_other_key(const SSL* ssl) {
  return SSL_get_ex_data(ssl, other_key_index()) != nullptr;
}

HandshakeFailure classify_client_failure(unsigned long e) {
  if (ERR_GET_LIB(e) != ERR_LIB_SSL) return HandshakeFailure::other;
  switch (ERR_GET_REASON(e)) {
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
    case SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER: return HandshakeFailure::key_mismatch;
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_RECORD_LENGTH_MISMATCH:
    case SSL_R_UNKNOWN_PROTOCOL: return HandshakeFailure::not_tls;
    case SSL_R_CERTIFICATE_VERIFY_FAILED: return HandshakeFailure::certificate;
    default: return HandshakeFailure::other;
  }
}

std::string error_text(unsigned long e) {
  const char* r = ERR_reason_error_string(e);
  if (r != nullptr) return r;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

}  // namespace fabperf::tls
