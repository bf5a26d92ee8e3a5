// The --rdma-cm private data (include/fabperf/engine/rdma_cm_wire.hpp): every refusal, without a device.
// The same requests against a real rdma_cm listener: tests/vm/cm_forge.cpp in the VM lab.
#include <fabperf/engine/engine.hpp>
#include <fabperf/engine/rdma_cm_wire.hpp>

#include <gtest/gtest.h>

#include "common/unit_helpers.hpp"

using namespace fabperf;
using namespace fabperf::testutil;

namespace {

const proto::Token kCmTest = token_of(1);
constexpr std::uint32_t kServer = 2;

rdma_cm::Request sample(std::uint32_t node = 3) {
  return {rdma_cm::kDirNread, true, node, 7, 0xabcdef01u, 0x00007f1234560000ull, kServer, {1, 2, 3}};
}

}  // namespace

TEST(RdmaCmWire, RequestRoundTripsWithTheClientsDerivedToken) {
  const auto bytes = rdma_cm::encode_request(sample(), derive_client_token(kCmTest, 3));
  EXPECT_EQ(bytes.size(), 56u);  // the most a connect request carries over RDMA_PS_TCP
  const auto c = rdma_cm::check_request(bytes, kCmTest, kServer);
  ASSERT_TRUE(c.request.has_value()) << c.refusal;
  EXPECT_EQ(c.request->dir, rdma_cm::kDirNread);
  EXPECT_TRUE(c.request->rpc);
  EXPECT_EQ(c.request->node, 3u);
  EXPECT_EQ(c.request->conn, 7u);
  EXPECT_EQ(c.request->rkey, 0xabcdef01u);
  EXPECT_EQ(c.request->addr, 0x00007f1234560000ull);
  EXPECT_EQ(c.request->server, kServer);
  EXPECT_EQ(c.request->nonce, sample().nonce);
  EXPECT_EQ(c.mac, rdma_cm::request_mac(bytes));
}

TEST(RdmaCmWire, ARequestIsForOneServerAndEveryRequestIsUnique) {
  const proto::Token client = derive_client_token(kCmTest, 3);
  // Properly signed for server 2, presented to server 5 (relayed or replayed there).
  EXPECT_EQ(rdma_cm::check_request(rdma_cm::encode_request(sample(), client), kCmTest, 5).refusal,
            "request meant for node 2, this is node 5");
  // Two requests for the same connection differ by their nonces, and so do their MACs: a reply
  // to one does not answer the other.
  const auto a = rdma_cm::make_request(rdma_cm::kDirPush, false, 3, 0, 1, 2, kServer);
  const auto b = rdma_cm::make_request(rdma_cm::kDirPush, false, 3, 0, 1, 2, kServer);
  EXPECT_NE(a.nonce, b.nonce);
  const auto ma = rdma_cm::request_mac(rdma_cm::encode_request(a, client));
  const auto mb = rdma_cm::request_mac(rdma_cm::encode_request(b, client));
  EXPECT_NE(ma, mb);
  std::string why;
  EXPECT_FALSE(rdma_cm::check_reply(rdma_cm::encode_reply({1, 2}, client, ma), client, mb, why));
  // The nonce is signed.
  auto t = rdma_cm::encode_request(a, client);
  t[30] ^= 1;
  EXPECT_EQ(rdma_cm::check_request(t, kCmTest, kServer).refusal, "bad proof");
}

TEST(RdmaCmWire, RequestsThatAreNotFromAClientOfThisTestAreRefused) {
  const auto good = rdma_cm::encode_request(sample(), derive_client_token(kCmTest, 3));
  // Signed with another test's token.
  EXPECT_EQ(
      rdma_cm::check_request(rdma_cm::encode_request(sample(), derive_client_token(token_of(9), 3)), kCmTest, kServer)
          .refusal,
      "bad proof");
  // Signed with the test token itself instead of the client's derived one.
  EXPECT_EQ(rdma_cm::check_request(rdma_cm::encode_request(sample(), kCmTest), kCmTest, kServer).refusal, "bad proof");
  // A client claiming another client's node.
  EXPECT_EQ(
      rdma_cm::check_request(rdma_cm::encode_request(sample(4), derive_client_token(kCmTest, 3)), kCmTest, kServer)
          .refusal,
      "bad proof");
  // Any signed byte changed after signing (here: the rkey, then the direction).
  auto t = good;
  t[12] ^= 1;
  EXPECT_EQ(rdma_cm::check_request(t, kCmTest, kServer).refusal, "bad proof");
  t = good;
  t[3] ^= 2;
  EXPECT_EQ(rdma_cm::check_request(t, kCmTest, kServer).refusal, "bad proof");
  t = good;
  t[55] ^= 0x80;
  EXPECT_EQ(rdma_cm::check_request(t, kCmTest, kServer).refusal, "bad proof");
  EXPECT_FALSE(rdma_cm::check_request(t, kCmTest, kServer).request.has_value());
}

TEST(RdmaCmWire, ForeignOrShortRequestsAreRefusedBeforeAnyProofIsComputed) {
  const auto good = rdma_cm::encode_request(sample(), derive_client_token(kCmTest, 3));
  const std::string foreign = "not a fabperf RDMA connection request of this version";
  auto t = good;
  t[0] = 'X';
  EXPECT_EQ(rdma_cm::check_request(t, kCmTest, kServer).refusal, foreign);
  t = good;
  t[2] = 3;  // a later version
  EXPECT_EQ(rdma_cm::check_request(t, kCmTest, kServer).refusal, foreign);
  EXPECT_EQ(rdma_cm::check_request(std::span<const std::uint8_t>(good.data(), 55), kCmTest, kServer).refusal, foreign);
  EXPECT_EQ(rdma_cm::check_request({}, kCmTest, kServer).refusal, foreign);
}

TEST(RdmaCmWire, AProperlySignedUnknownDirectionIsRefused) {
  auto r = sample();
  r.dir = 5;
  EXPECT_EQ(
      rdma_cm::check_request(rdma_cm::encode_request(r, derive_client_token(kCmTest, 3)), kCmTest, kServer).refusal,
      "unknown direction");
  r.dir = 0;
  EXPECT_EQ(
      rdma_cm::check_request(rdma_cm::encode_request(r, derive_client_token(kCmTest, 3)), kCmTest, kServer).refusal,
      "unknown direction");
}

TEST(RdmaCmWire, ReplyAnswersExactlyOneRequest) {
  const proto::Token client = derive_client_token(kCmTest, 3);
  const auto req = rdma_cm::encode_request(sample(), client);
  const auto mac = rdma_cm::request_mac(req);
  const auto rep = rdma_cm::encode_reply({0x1234u, 0x55aa00ull}, client, mac);
  std::string why;
  const auto r = rdma_cm::check_reply(rep, client, mac, why);
  ASSERT_TRUE(r.has_value()) << why;
  EXPECT_EQ(r->rkey, 0x1234u);
  EXPECT_EQ(r->addr, 0x55aa00ull);

  // The same reply for another request (another connection index) does not pass.
  auto other = sample();
  other.conn = 8;
  EXPECT_FALSE(rdma_cm::check_reply(rep, client, rdma_cm::request_mac(rdma_cm::encode_request(other, client)), why));
  EXPECT_EQ(why, "the server's answer does not prove the test token");
  // Nor from a server without the token, nor with a changed rkey.
  EXPECT_FALSE(rdma_cm::check_reply(rdma_cm::encode_reply({0x1234u, 0x55aa00ull}, token_of(9), mac), client, mac, why));
  auto t = rep;
  t[5] ^= 1;
  EXPECT_FALSE(rdma_cm::check_reply(t, client, mac, why));
  EXPECT_EQ(why, "the server's answer does not prove the test token");
  // A request's bytes are not a reply.
  EXPECT_FALSE(rdma_cm::check_reply(req, client, mac, why));
  EXPECT_EQ(why, "the answer is not from a fabperf agent of this version");
  EXPECT_FALSE(rdma_cm::check_reply(std::span<const std::uint8_t>(rep.data(), 47), client, mac, why));
}
