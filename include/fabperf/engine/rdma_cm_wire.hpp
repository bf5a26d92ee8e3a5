// The private data of fabperf's --rdma-cm connections (docs/rdma.md "rdma_cm"): what a client's
// connect request and the server's answer carry, signed with the per-test token. Pure byte
// handling, no verbs: the engine uses it on both ends, and tests check every refusal without an
// RDMA device. The wire format lives only here.
//
// Request (56 bytes, the most a connect request carries over RDMA_PS_TCP):
//   magic "FC" | version | dir<<1|rpc | client node | conn index | rkey | addr | server node |
//   nonce (12) | MAC (16)
//   the MAC: HMAC-SHA256 of the client's derived token over the first 40 bytes, truncated to 128
//   bits (the room left). The server node binds a request to the one server it was made for; the
//   client's random nonce makes every request, and so the reply that signs over it, unique.
// Reply (48 of the 196 an accept may carry):
//   magic "FA" | version | status | rkey | addr | HMAC (32) of the client's token over the
//   request's MAC and the reply's first 16 bytes (so a reply answers this one request).
// A refusal (REJ) carries a reason text, at most kRejectSize bytes with its terminating NUL.
#pragma once

#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace fabperf::rdma_cm {

inline constexpr std::size_t kRequestSize = 56;
inline constexpr std::size_t kReplySize = 48;
inline constexpr std::size_t kRejectSize = 140;
inline constexpr std::size_t kRequestNonceBytes = 12;
inline constexpr std::size_t kRequestMacBytes = 16;

// Direction codes on the wire (the engine's push, pull_back and nread).
inline constexpr std::uint8_t kDirPush = 1;
inline constexpr std::uint8_t kDirPullBack = 2;
inline constexpr std::uint8_t kDirNread = 3;

struct Request {
  std::uint8_t dir{kDirPush};
  bool rpc{false};
  std::uint32_t node{0};  // the client's node index in this test
  std::uint32_t conn{0};  // connection index within the client-server pair
  std::uint32_t rkey{0};
  std::uint64_t addr{0};
  std::uint32_t server{0};  // the server's node index: the only server that accepts it
  std::array<std::uint8_t, kRequestNonceBytes> nonce{};
};

struct Reply {
  std::uint32_t rkey{0};
  std::uint64_t addr{0};
};

using RequestBytes = std::array<std::uint8_t, kRequestSize>;
using ReplyBytes = std::array<std::uint8_t, kReplySize>;

// Client side: the request signed with the client's token (derive_client_token).
RequestBytes encode_request(const Request& r, const proto::Token& client_token);
// A request for `server` with a fresh random nonce.
Request make_request(std::uint8_t dir, bool rpc, std::uint32_t node, std::uint32_t conn, std::uint32_t rkey,
                     std::uint64_t addr, std::uint32_t server);

// Server side: a request that passed every check, with its HMAC (the reply signs over it), or
// the reason it is refused ("bad proof", ...), which goes back in the REJ.
struct CheckedRequest {
  std::optional<Request> request;
  auth::Proof mac{};
  std::string refusal;
};
CheckedRequest check_request(std::span<const std::uint8_t> bytes, const proto::Token& test_token,
                             std::uint32_t server_node);

ReplyBytes encode_reply(const Reply& r, const proto::Token& client_token, const auth::Proof& request_mac);

// Client side: the server's answer, or nullopt with `why` naming what is wrong with it.
std::optional<Reply> check_reply(std::span<const std::uint8_t> bytes, const proto::Token& client_token,
                                 const auth::Proof& request_mac, std::string& why);

// The MAC a request carries (bytes 40..55, zero-padded); the reply is checked against it.
auth::Proof request_mac(const RequestBytes& req);

}  // namespace fabperf::rdma_cm
