// The peer proof over an RDMA queue pair (include/fabperf/engine/rdma_qp_proof.hpp): the three passes
// agree between two honest ends, and every refusal, without a device. The same exchange against
// a forged endpoint on a real (emulated) wire: tests/vm/qp_forge.cpp in the VM lab.
#include <fabperf/engine/engine.hpp>
#include <fabperf/engine/rdma_qp_proof.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "common/unit_helpers.hpp"

using namespace fabperf;
using namespace fabperf::testutil;

namespace {

const proto::Token kQpTest = token_of(1);
const proto::Token kClient = derive_client_token(kQpTest, 2);

qp_proof::Binding binding() {
  qp_proof::Binding b{0, 2, 1, 0x11, 0x22, {}, {}};
  b.server_gid[10] = b.server_gid[11] = 0xff;
  b.server_gid[12] = 198;
  b.server_gid[15] = 2;
  b.client_gid[10] = b.client_gid[11] = 0xff;
  b.client_gid[12] = 198;
  b.client_gid[15] = 1;
  return b;
}

}  // namespace

TEST(RdmaQpProof, ThreePassesAgreeBetweenHonestEnds) {
  const auth::Nonce nc = nonce_of(1), ns = nonce_of(2);
  const auto hello = qp_proof::encode_client_hello(nc);
  EXPECT_EQ(hello.size(), 68u);
  auth::Nonce got_nc{};
  ASSERT_TRUE(qp_proof::check_client_hello(hello, got_nc).ok());
  EXPECT_EQ(got_nc, nc);
  // The server signs with the token it derives for client node 2; the client holds that token.
  const auto sp = qp_proof::encode_server_proof(derive_client_token(kQpTest, 2), binding(), got_nc, ns);
  auth::Nonce got_ns{};
  const auto c1 = qp_proof::check_server_proof(sp, kClient, binding(), nc, got_ns);
  ASSERT_TRUE(c1.ok()) << c1.text;
  EXPECT_EQ(got_ns, ns);
  const auto cp = qp_proof::encode_client_proof(kClient, binding(), nc, got_ns);
  const auto c2 = qp_proof::check_client_proof(cp, kClient, binding(), nc, ns);
  EXPECT_TRUE(c2.ok()) << c2.text;
}

TEST(RdmaQpProof, AProofWithAnotherTestsTokenIsRefused) {
  const auth::Nonce nc = nonce_of(1), ns = nonce_of(2);
  auth::Nonce got{};
  const auto forged = qp_proof::encode_server_proof(derive_client_token(token_of(9), 2), binding(), nc, ns);
  const auto c = qp_proof::check_server_proof(forged, kClient, binding(), nc, got);
  EXPECT_EQ(c.refusal, qp_proof::Refusal::bad_mac);
  EXPECT_EQ(c.text, "its proof does not prove this test's token for this queue pair");
  EXPECT_EQ(got, auth::Nonce{});  // nothing of a refused message is taken
  // Another client's token of the same test proves nothing for this client either.
  const auto other = qp_proof::encode_client_proof(derive_client_token(kQpTest, 3), binding(), nc, ns);
  EXPECT_EQ(qp_proof::check_client_proof(other, kClient, binding(), nc, ns).refusal, qp_proof::Refusal::bad_mac);
}

TEST(RdmaQpProof, EveryBoundFieldAndBothNoncesMatter) {
  const auth::Nonce nc = nonce_of(1), ns = nonce_of(2);
  const auto good = qp_proof::encode_client_proof(kClient, binding(), nc, ns);
  ASSERT_TRUE(qp_proof::check_client_proof(good, kClient, binding(), nc, ns).ok());
  // A proof made for another queue pair (relayed from it) or with old nonces (replayed) fails.
  std::vector<qp_proof::Binding> others(9, binding());
  others[0].server_node = 1;
  others[1].client_node = 3;
  others[2].conn = 0;
  others[3].server_qpn = 0x12;
  others[4].client_qpn = 0x23;
  others[5].server_gid[15] = 3;
  others[6].client_gid[15] = 3;
  std::swap(others[7].server_qpn, others[7].client_qpn);
  std::swap(others[8].server_gid, others[8].client_gid);
  for (std::size_t i = 0; i < others.size(); ++i) {
    EXPECT_EQ(qp_proof::check_client_proof(good, kClient, others[i], nc, ns).refusal, qp_proof::Refusal::bad_mac) << i;
  }
  EXPECT_EQ(qp_proof::check_client_proof(good, kClient, binding(), nonce_of(3), ns).refusal,
            qp_proof::Refusal::bad_mac);
  EXPECT_EQ(qp_proof::check_client_proof(good, kClient, binding(), nc, nonce_of(3)).refusal,
            qp_proof::Refusal::bad_mac);
  // Every single flipped bit of the message is caught.
  for (std::size_t i = 0; i < good.size(); ++i) {
    auto bad = good;
    bad[i] ^= 0x01;
    EXPECT_FALSE(qp_proof::check_client_proof(bad, kClient, binding(), nc, ns).ok()) << "byte " << i;
  }
}

TEST(RdmaQpProof, OnePassCannotStandInForAnother) {
  const auth::Nonce nc = nonce_of(1), ns = nonce_of(2);
  // The server's proof and the client's proof carry different labels: reflecting the server's
  // own proof back to it proves nothing.
  const auto sp = qp_proof::encode_server_proof(kClient, binding(), nc, ns);
  auto as_client = sp;
  as_client[3] = static_cast<std::uint8_t>(qp_proof::Kind::client_proof);
  EXPECT_EQ(qp_proof::check_client_proof(as_client, kClient, binding(), nc, ns).refusal, qp_proof::Refusal::malformed);
  std::fill(as_client.begin() + 4, as_client.begin() + 36, std::uint8_t{0});
  EXPECT_EQ(qp_proof::check_client_proof(as_client, kClient, binding(), nc, ns).refusal, qp_proof::Refusal::bad_mac);
  const auto c = qp_proof::check_client_proof(sp, kClient, binding(), nc, ns);
  EXPECT_EQ(c.refusal, qp_proof::Refusal::wrong_kind);
  EXPECT_EQ(c.text, "a server proof where a client proof belongs");
  auth::Nonce got{};
  EXPECT_EQ(qp_proof::check_client_hello(sp, got).refusal, qp_proof::Refusal::wrong_kind);
}

TEST(RdmaQpProof, SizeMagicAndVersionAreCheckedFirst) {
  const auth::Nonce nc = nonce_of(1);
  auth::Nonce got{};
  const auto hello = qp_proof::encode_client_hello(nc);
  const auto shorter = qp_proof::check_client_hello(std::span(hello).first(67), got);
  EXPECT_EQ(shorter.refusal, qp_proof::Refusal::size);
  EXPECT_EQ(shorter.text, "a 67-byte message where the 68-byte proof of the test token belongs");
  std::vector<std::uint8_t> longer(hello.begin(), hello.end());
  longer.push_back(0);
  EXPECT_EQ(qp_proof::check_client_hello(longer, got).refusal, qp_proof::Refusal::size);
  EXPECT_EQ(qp_proof::check_client_hello({}, got).refusal, qp_proof::Refusal::size);
  auto magic = hello;
  magic[0] = 'X';
  EXPECT_EQ(qp_proof::check_client_hello(magic, got).text, "not a fabperf queue pair proof of this version");
  auto version = hello;
  version[2] = 2;
  EXPECT_EQ(qp_proof::check_client_hello(version, got).refusal, qp_proof::Refusal::not_fabperf);
  auto kind = hello;
  kind[3] = 9;
  EXPECT_EQ(qp_proof::check_client_hello(kind, got).text, "an unknown kind where a client hello belongs");
  EXPECT_EQ(got, auth::Nonce{});
  // The fields a pass leaves empty are checked too.
  auto hello_mac = hello;
  hello_mac[67] = 1;
  const auto h = qp_proof::check_client_hello(hello_mac, got);
  EXPECT_EQ(h.refusal, qp_proof::Refusal::malformed);
  EXPECT_EQ(h.text, "its hello's MAC field is not empty");
  EXPECT_EQ(got, auth::Nonce{});
}

TEST(RdmaQpProof, BindingLayoutIsFixed) {
  const auto b = qp_proof::encode_binding(binding());
  ASSERT_EQ(b.size(), 52u);
  EXPECT_EQ(b[7], 2);      // client node
  EXPECT_EQ(b[11], 1);     // connection
  EXPECT_EQ(b[15], 0x11);  // server QPN
  EXPECT_EQ(b[19], 0x22);  // client QPN
  EXPECT_EQ(b[32], 198);   // server GID, ::ffff:198.x.x.2
  EXPECT_EQ(b[35], 2);
  EXPECT_EQ(b[51], 1);  // client GID
}
