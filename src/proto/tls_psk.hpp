// TLS 1.3 with an external pre-shared key for the control connections (docs/security.md).
// Pure OpenSSL (no Asio), so unit tests, the fuzzer and hand-driven test peers share it.
//
// The only derivation fabperf does itself (everything else is OpenSSL's TLS 1.3):
//   psk      = HKDF-SHA256(ikm = key file bytes, no salt, info = "fabperf tls13 control psk v1", 32 bytes)
//   key id   = HKDF-SHA256(ikm = key file bytes, no salt, info = "fabperf key id v1", 8 bytes)
//   identity = "fabperf-key-" + hex(key id)
// The handshake is TLS 1.3 only, cipher suite TLS_AES_128_GCM_SHA256, PSK with (EC)DHE key
// exchange (psk_dhe_ke: the session keys depend on fresh shares from both ends), no
// certificates, no session tickets and no resumption. A peer without the key cannot finish the
// handshake, and every record after it is authenticated: a relay can forward bytes, never read,
// change, drop-and-replace or inject them without the session failing.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <openssl/ssl.h>

#include <fabperf/proto/auth.hpp>

namespace fabperf::tls {

inline constexpr std::size_t kPskBytes = 32;
inline constexpr std::size_t kKeyIdBytes = 8;
// TLS records start with content type 22 (handshake); fabperf frames with 'F' (kMagic). An agent
// tells the two apart from the first byte a peer sends.
inline constexpr std::uint8_t kHandshakeRecord = 0x16;

struct Psk {
  std::array<std::uint8_t, kPskBytes> key{};
  std::string identity;
  ~Psk();
};

// HKDF-SHA256 (RFC 5869) through OpenSSL; throws SystemError when OpenSSL fails.
void hkdf_sha256(std::span<const std::uint8_t> ikm, std::string_view info, std::span<std::uint8_t> out);
// The control PSK and its identity, derived from a key file's key (see above).
std::shared_ptr<const Psk> derive_control_psk(const auth::Key& key);

struct CtxDeleter {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using CtxPtr = std::unique_ptr<SSL_CTX, CtxDeleter>;

// A client or server context for TLS 1.3 external PSK only; it keeps psk alive. Throws
// SystemError when OpenSSL refuses a setting.
CtxPtr make_psk_ctx(std::shared_ptr<const Psk> psk, bool server);

// After a handshake, on either end: true only when the session was keyed from our external PSK
// and no certificate came with it. Anything else (a peer that ignored the PSK offer and sent a
// certificate) is not a peer holding the key; FramedConn::start_tls refuses the connection.
bool psk_was_used(const SSL* ssl);

// Server side: true when the peer offered a PSK identity other than ours (a different key).
bool peer_offered_other_key(const SSL* ssl);

// Why a client's TLS handshake failed, for the user: "key mismatch ..." when the server refused
// our PSK, "not_tls" when the peer did not answer in TLS (a key-less agent answers with a plain
// fabperf ERROR frame), "certificate" when it answered with a certificate instead of the key (an
// impostor, or a TLS service that is not a fabperf agent), or OpenSSL's reason text.
enum class HandshakeFailure { key_mismatch, not_tls, certificate, other };
HandshakeFailure classify_client_failure(unsigned long openssl_error);

// The text of an OpenSSL error code (its reason string), for messages.
std::string error_text(unsigned long openssl_error);

}  // namespace fabperf::tls
