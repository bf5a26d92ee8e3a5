// The TCP data connections' challenge-response codec (include/fabperf/engine/data_hello.hpp): strict
// decoding of every message, and what each proof binds. The same exchange over sockets through
// the real binary: Security.DataHello* in tests/integration/test_security.cpp.
#include <fabperf/engine/data_hello.hpp>
#include <fabperf/engine/engine.hpp>

#include <gtest/gtest.h>

#include <string>

#include "common/unit_helpers.hpp"

using namespace fabperf;
using namespace fabperf::testutil;
namespace dh = fabperf::data_hello;

namespace {

dh::Hello sample() {
  dh::Hello h;
  h.op = dh::Op::rpc;
  h.client_node = 3;
  h.server_node = 1;
  h.conn_index = 9;
  h.client_nonce = nonce_of(1);
  return h;
}

std::string wire_error_of(auto&& f) {
  try {
    f();
  } catch (const dh::WireError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(DataHello, EveryMessageRoundTrips) {
  const auto h = sample();
  const auto hb = dh::encode_hello(h);
  EXPECT_EQ(hb.size(), 52u);
  EXPECT_EQ(hb[0], 'F');
  EXPECT_EQ(hb[3], 'D');
  const auto back = dh::decode_hello(hb);
  EXPECT_EQ(back.op, dh::Op::rpc);
  EXPECT_EQ(back.client_node, 3u);
  EXPECT_EQ(back.server_node, 1u);
  EXPECT_EQ(back.conn_index, 9u);
  EXPECT_EQ(back.client_nonce, h.client_nonce);

  const dh::Challenge c{dh::Status::ok, nonce_of(2), auth::Proof{1, 2, 3}};
  const auto cb = dh::encode_challenge(c);
  EXPECT_EQ(cb.size(), 72u);
  const auto cback = dh::decode_challenge(cb);
  EXPECT_EQ(cback.status, dh::Status::ok);
  EXPECT_EQ(cback.server_nonce, c.server_nonce);
  EXPECT_EQ(cback.server_proof, (auth::Proof{1, 2, 3}));

  const auth::Proof p{9, 8, 7};
  EXPECT_EQ(dh::decode_proof(dh::encode_proof(p)), p);
  for (std::uint32_t s = 0; s < dh::kStatusCount; ++s) {
    EXPECT_EQ(dh::decode_verdict(dh::encode_verdict(static_cast<dh::Status>(s))), static_cast<dh::Status>(s));
  }
}

TEST(DataHello, DecodersAreStrictAboutSizeMagicVersionOpAndStatus) {
  auto hb = dh::encode_hello(sample());
  const std::vector<std::uint8_t> longer(hb.begin(), hb.end());
  auto grown = longer;
  grown.push_back(0);
  EXPECT_EQ(wire_error_of([&] { dh::decode_hello(std::span(longer).first(51)); }), "data hello: 51 bytes, expected 52");
  EXPECT_EQ(wire_error_of([&] { dh::decode_hello(grown); }), "data hello: 53 bytes, expected 52");
  EXPECT_EQ(wire_error_of([&] { dh::decode_hello({}); }), "data hello: 0 bytes, expected 52");
  auto bad = hb;
  bad[0] = 'X';
  EXPECT_NE(wire_error_of([&] { dh::decode_hello(bad); }).find("magic"), std::string::npos);
  bad = hb;
  bad[5] = 3;  // version 3: the previous data hello
  EXPECT_EQ(wire_error_of([&] { dh::decode_hello(bad); }),
            "data hello: version 3, this agent speaks version 4 (agents of different fabperf versions?)");
  for (const int op : {0, 5, 255}) {
    bad = hb;
    bad[7] = static_cast<std::uint8_t>(op);
    EXPECT_EQ(wire_error_of([&] { dh::decode_hello(bad); }), "data hello: unknown operation " + std::to_string(op));
  }
  // A refusal's status is what a server answers a malformed hello with.
  try {
    dh::decode_hello(bad);
    ADD_FAILURE();
  } catch (const dh::WireError& e) {
    EXPECT_EQ(e.status(), dh::Status::bad_hello);
  }

  auto cb = dh::encode_challenge({dh::Status::too_many, {}, {}});
  EXPECT_EQ(dh::decode_challenge(cb).status, dh::Status::too_many);
  cb[7] = static_cast<std::uint8_t>(dh::kStatusCount);
  EXPECT_EQ(wire_error_of([&] { dh::decode_challenge(cb); }), "data challenge: unknown status 7");
  cb = dh::encode_challenge({dh::Status::too_many, {}, {}});
  cb[40] = 1;  // a refusal may not carry a nonce or proof
  EXPECT_EQ(wire_error_of([&] { dh::decode_challenge(cb); }),
            "data challenge: a refusal that carries a nonce or proof");
  // A refusal encoded with a nonce drops it.
  EXPECT_NO_THROW(dh::decode_challenge(dh::encode_challenge({dh::Status::duplicate, nonce_of(3), auth::Proof{1}})));

  auto pb = dh::encode_proof({});
  pb[1] = 0;
  EXPECT_NE(wire_error_of([&] { dh::decode_proof(pb); }).find("data proof: magic"), std::string::npos);
  EXPECT_EQ(wire_error_of([&] { dh::decode_proof(std::span(pb).first(35)); }), "data proof: 35 bytes, expected 36");
  auto vb = dh::encode_verdict(dh::Status::ok);
  vb[4] = 1;
  EXPECT_EQ(wire_error_of([&] { dh::decode_verdict(vb); }), "data verdict: unknown status 16777216");
}

// Each proof covers the direction, both nonces, the test id and every field of the hello: change
// any one and it no longer verifies. The server's proof never passes as the client's.
TEST(DataHello, ProofsBindBothEndsBothNoncesTheTestAndTheConnection) {
  const auto key = derive_client_token(token_of(1), 3);
  const auto h = sample();
  const auto ns = nonce_of(2);
  const auto sp = dh::server_proof(key, "t1", h, ns);
  const auto cp = dh::client_proof(key, "t1", h, ns);
  EXPECT_NE(sp, cp);
  EXPECT_EQ(sp, dh::server_proof(key, "t1", h, ns));  // deterministic
  EXPECT_NE(sp, dh::server_proof(derive_client_token(token_of(2), 3), "t1", h, ns)) << "another test's key";
  EXPECT_NE(sp, dh::server_proof(derive_client_token(token_of(1), 4), "t1", h, ns)) << "another client's key";
  EXPECT_NE(sp, dh::server_proof(key, "t2", h, ns)) << "test id";
  EXPECT_NE(sp, dh::server_proof(key, "t1", h, nonce_of(3))) << "server nonce";
  auto v = h;
  v.client_nonce = nonce_of(4);
  EXPECT_NE(sp, dh::server_proof(key, "t1", v, ns)) << "client nonce";
  v = h;
  v.client_node = 4;
  EXPECT_NE(sp, dh::server_proof(key, "t1", v, ns)) << "client node";
  v = h;
  v.server_node = 2;
  EXPECT_NE(sp, dh::server_proof(key, "t1", v, ns)) << "server node";
  v = h;
  v.conn_index = 10;
  EXPECT_NE(sp, dh::server_proof(key, "t1", v, ns)) << "connection index";
  v = h;
  v.op = dh::Op::probe;
  EXPECT_NE(cp, dh::client_proof(key, "t1", v, ns)) << "operation";
  // The test id is length-prefixed: moving a byte between it and the fields changes the input.
  const auto b1 = dh::binding("ab", h, ns);
  const auto b2 = dh::binding("a", h, ns);
  EXPECT_EQ(b1.size(), b2.size() + 1);
  EXPECT_EQ(b1.size(), 32u + 32 + 4 + 2 + 16);
}

// The HMAC is OpenSSL's HMAC-SHA256 over label | binding (checked against a direct computation).
TEST(DataHello, ProofIsHmacSha256OverTheLabelAndTheBinding) {
  const auto key = token_of(7);
  const auto h = sample();
  const auto ns = nonce_of(9);
  const auto b = dh::binding("test-1", h, ns);
  const std::string label("fabperf-data-server-proof-v4\0", 29);
  const auto want =
      auth::hmac_sha256(key, {std::span(reinterpret_cast<const std::uint8_t*>(label.data()), label.size()), b});
  EXPECT_EQ(dh::server_proof(key, "test-1", h, ns), want);
}
