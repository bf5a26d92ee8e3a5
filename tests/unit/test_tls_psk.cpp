// The control plane's TLS 1.3 external PSK (src/proto/tls_psk.hpp): the documented derivation,
// and complete handshakes between the two ends in memory (no sockets).
#include "proto/tls_psk.hpp"

#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

using namespace fabperf;

namespace {

auth::Key key_of(char c) {
  return auth::parse_key(std::string(64, c), "test key");
}

// Moves whatever one side wrote to the other side's input.
void pump(SSL* from, SSL* to) {
  BIO* out = SSL_get_wbio(from);
  BIO* in = SSL_get_rbio(to);
  char buf[4096];
  for (;;) {
    const int n = BIO_read(out, buf, sizeof buf);
    if (n <= 0) break;
    BIO_write(in, buf, n);
  }
}

struct Pair {
  tls::CtxPtr cctx, sctx;
  SSL* client{nullptr};
  SSL* server{nullptr};
  int client_rc{0}, server_rc{0};
  unsigned long client_error{0};
  Pair(const auth::Key& client_key, const auth::Key& server_key)
      : cctx(tls::make_psk_ctx(tls::derive_control_psk(client_key), false)),
        sctx(tls::make_psk_ctx(tls::derive_control_psk(server_key), true)) {
    client = SSL_new(cctx.get());
    server = SSL_new(sctx.get());
    SSL_set_bio(client, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
    SSL_set_bio(server, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
    SSL_set_connect_state(client);
    SSL_set_accept_state(server);
    for (int i = 0; i < 6 && (client_rc != 1 || server_rc != 1); ++i) {
      client_rc = SSL_do_handshake(client);
      if (client_rc != 1 && client_error == 0) client_error = ERR_peek_error();
      pump(client, server);
      server_rc = SSL_do_handshake(server);
      pump(server, client);
    }
    ERR_clear_error();
  }
  ~Pair() {
    SSL_free(client);
    SSL_free(server);
  }
};

}  // namespace

TEST(TlsPsk, DerivationIsHkdfSha256WithTheDocumentedLabels) {
  const auto k = key_of('a');
  const auto psk = tls::derive_control_psk(k);
  // The same derivation spelled out: HKDF-SHA256, no salt, the labels of tls_psk.hpp.
  std::array<std::uint8_t, 32> want{};
  tls::hkdf_sha256(k.bytes(), "fabperf tls13 control psk v1", want);
  EXPECT_EQ(psk->key, want);
  std::array<std::uint8_t, 8> id{};
  tls::hkdf_sha256(k.bytes(), "fabperf key id v1", id);
  EXPECT_EQ(psk->identity, "fabperf-key-" + to_hex(id));
  // Deterministic, key-specific, and the identity reveals nothing of the PSK.
  EXPECT_EQ(tls::derive_control_psk(k)->identity, psk->identity);
  EXPECT_NE(tls::derive_control_psk(key_of('b'))->identity, psk->identity);
  EXPECT_NE(tls::derive_control_psk(key_of('b'))->key, psk->key);
  EXPECT_EQ(psk->identity.find(to_hex(std::span<const std::uint8_t>(psk->key.data(), 8))), std::string::npos);
}

TEST(TlsPsk, Rfc5869TestCase3) {
  // RFC 5869 A.3: SHA-256, IKM = 22 x 0x0b, no salt, no info, L = 42.
  const std::vector<std::uint8_t> ikm(22, 0x0b);
  std::array<std::uint8_t, 42> okm{};
  tls::hkdf_sha256(ikm, "", okm);
  EXPECT_EQ(to_hex(okm), "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8");
}

TEST(TlsPsk, SameKeyCompletesTls13WithTheFixedSuite) {
  Pair p(key_of('a'), key_of('a'));
  ASSERT_EQ(p.client_rc, 1);
  ASSERT_EQ(p.server_rc, 1);
  EXPECT_STREQ(SSL_get_version(p.client), "TLSv1.3");
  EXPECT_STREQ(SSL_CIPHER_get_name(SSL_get_current_cipher(p.client)), "TLS_AES_128_GCM_SHA256");
  EXPECT_EQ(SSL_session_reused(p.server), 1);  // the PSK was used (no certificate exists)
  EXPECT_FALSE(tls::peer_offered_other_key(p.server));
  // Application data flows, and one flipped bit in a record is refused.
  ASSERT_EQ(SSL_write(p.client, "hello", 5), 5);
  BIO* wire = SSL_get_wbio(p.client);
  char rec[256];
  const int n = BIO_read(wire, rec, sizeof rec);
  ASSERT_GT(n, 5);
  rec[n - 1] ^= 1;
  BIO_write(SSL_get_rbio(p.server), rec, n);
  char got[16];
  EXPECT_LE(SSL_read(p.server, got, sizeof got), 0);
  EXPECT_EQ(ERR_GET_REASON(ERR_peek_error()), SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC);
  ERR_clear_error();
}

TEST(TlsPsk, OtherKeyFailsAndIsNamedKeyMismatch) {
  Pair p(key_of('a'), key_of('b'));
  EXPECT_NE(p.client_rc, 1);
  EXPECT_NE(p.server_rc, 1);
  EXPECT_TRUE(tls::peer_offered_other_key(p.server));
  EXPECT_EQ(tls::classify_client_failure(p.client_error), tls::HandshakeFailure::key_mismatch)
      << tls::error_text(p.client_error);
}

TEST(TlsPsk, PlainFrameAnswerIsNamedNotTls) {
  const tls::CtxPtr ctx = tls::make_psk_ctx(tls::derive_control_psk(key_of('a')), false);
  SSL* c = SSL_new(ctx.get());
  SSL_set_bio(c, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
  SSL_set_connect_state(c);
  (void)SSL_do_handshake(c);
  // What a key-less agent answers: a plain fabperf ERROR frame.
  const auto frame = proto::encode_frame(proto::MsgType::error, {{"code", "no_key"}, {"message", "no key"}});
  BIO_write(SSL_get_rbio(c), frame.data(), static_cast<int>(frame.size()));
  EXPECT_NE(SSL_do_handshake(c), 1);
  const unsigned long e = ERR_peek_error();
  EXPECT_EQ(tls::classify_client_failure(e), tls::HandshakeFailure::not_tls) << tls::error_text(e);
  ERR_clear_error();
  SSL_free(c);
}
