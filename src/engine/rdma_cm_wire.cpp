#include <fabperf/core/bytes.hpp>
#include <fabperf/engine/engine.hpp>
#include <fabperf/engine/rdma_cm_wire.hpp>

#include <algorithm>
#include <string>

namespace fabperf::rdma_cm {
namespace {

constexpr std::uint16_t kRequestMagic = 0x4643;  // "FC"
constexpr std::uint16_t kReplyMagic = 0x4641;    // "FA"
// 2: the server node and a nonce joined the request; its MAC was truncated to make room.
constexpr std::uint8_t kVersion = 2;
constexpr std::size_t kRequestSigned = 40;
constexpr std::size_t kReplySigned = 16;
static_assert(kRequestSigned + kRequestMacBytes == kRequestSize);
static_assert(kReplySigned + auth::kProofBytes == kReplySize);
// Domain separation: a request's HMAC can never pass as a reply's, or as any other fabperf MAC.
constexpr std::uint8_t kRequestLabel[] = "fabperf-rdma-cm-req";  // with its terminating NUL
constexpr std::uint8_t kReplyLabel[] = "fabperf-rdma-cm-rep";

// The request's MAC, truncated and zero-padded to a Proof (the form the reply signs over).
auth::Proof sign_request(const proto::Token& client_token, const std::uint8_t* req) {
  auto mac = auth::hmac_sha256(client_token, {kRequestLabel, std::span<const std::uint8_t>(req, kRequestSigned)});
  std::fill(mac.begin() + kRequestMacBytes, mac.end(), std::uint8_t{0});
  return mac;
}
auth::Proof sign_reply(const proto::Token& client_token, const auth::Proof& request_mac, const std::uint8_t* rep) {
  return auth::hmac_sha256(client_token, {kReplyLabel, request_mac, std::span<const std::uint8_t>(rep, kReplySigned)});
}

}  // namespace

RequestBytes encode_request(const Request& r, const proto::Token& client_token) {
  auto b = pack_be<kRequestSize>(kRequestMagic, kVersion, static_cast<std::uint8_t>((r.dir << 1) | (r.rpc ? 1 : 0)),
                                 r.node, r.conn, r.rkey, r.addr, r.server, r.nonce);
  const auto mac = sign_request(client_token, b.data());
  std::copy_n(mac.begin(), kRequestMacBytes, b.begin() + kRequestSigned);
  return b;
}

Request make_request(std::uint8_t dir, bool rpc, std::uint32_t node, std::uint32_t conn, std::uint32_t rkey,
                     std::uint64_t addr, std::uint32_t server) {
  Request r{dir, rpc, node, conn, rkey, addr, server, {}};
  const auto n = auth::make_nonce();
  std::copy_n(n.begin(), r.nonce.size(), r.nonce.begin());
  return r;
}

auth::Proof request_mac(const RequestBytes& req) {
  auth::Proof mac{};
  std::copy_n(req.begin() + kRequestSigned, kRequestMacBytes, mac.begin());
  return mac;
}

CheckedRequest check_request(std::span<const std::uint8_t> bytes, const proto::Token& test_token,
                             std::uint32_t server_node) {
  CheckedRequest out;
  auto refuse = [&](std::string why) {
    out.refusal = std::move(why);
    return out;
  };
  const std::uint8_t* p = bytes.data();
  if (bytes.size() < kRequestSize || get_be<std::uint16_t>(p) != kRequestMagic || p[2] != kVersion)
    return refuse("not a fabperf RDMA connection request of this version");
  std::uint8_t dir_rpc = 0;
  Request r;
  ByteReader{bytes.subspan(3)}(dir_rpc)(r.node)(r.conn)(r.rkey)(r.addr)(r.server)(r.nonce)(
      std::span(out.mac.data(), kRequestMacBytes));
  // The proof is checked before any other field is believed: an unauthenticated request learns
  // nothing about what the server would accept.
  if (!auth::proofs_equal(sign_request(derive_client_token(test_token, r.node), p), out.mac))
    return refuse("bad proof");
  if (r.server != server_node) {
    // Signed by a client of this test for another server: relayed or replayed here.
    return refuse("request meant for node " + std::to_string(r.server) + ", this is node " +
                  std::to_string(server_node));
  }
  r.dir = static_cast<std::uint8_t>(dir_rpc >> 1);
  r.rpc = (dir_rpc & 1) != 0;
  if (r.dir != kDirPush && r.dir != kDirPullBack && r.dir != kDirNread) return refuse("unknown direction");
  out.request = r;
  return out;
}

ReplyBytes encode_reply(const Reply& r, const proto::Token& client_token, const auth::Proof& request_mac) {
  auto b = pack_be<kReplySize>(kReplyMagic, kVersion, std::uint8_t{0}, r.rkey, r.addr);
  const auto proof = sign_reply(client_token, request_mac, b.data());
  std::ranges::copy(proof, b.begin() + kReplySigned);
  return b;
}

std::optional<Reply> check_reply(std::span<const std::uint8_t> bytes, const proto::Token& client_token,
                                 const auth::Proof& request_mac, std::string& why) {
  const std::uint8_t* p = bytes.data();
  if (bytes.size() < kReplySize || get_be<std::uint16_t>(p) != kReplyMagic || p[2] != kVersion) {
    why = "the answer is not from a fabperf agent of this version";
    return std::nullopt;
  }
  Reply r;
  auth::Proof got{};
  ByteReader{bytes.subspan(4)}(r.rkey)(r.addr)(got);
  if (!auth::proofs_equal(sign_reply(client_token, request_mac, p), got)) {
    why = "the server's answer does not prove the test token";
    return std::nullopt;
  }
  return r;
}

}  // namespace fabperf::rdma_cm
