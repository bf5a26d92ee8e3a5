// The proof of the test token that both ends of an RDMA queue pair set up through the
// coordinator (the default, not --rdma-cm) exchange over the QP itself before any load is posted
// (docs/rdma.md "Peer proof", docs/security.md finding 3). Pure byte handling, no verbs: the
// engine sends and receives these messages, the unit tests and the fuzz target check every
// refusal without an RDMA device. The wire format lives only here.
//
// Three passes (the mutual challenge-response of ISO/IEC 9798-4, with HMAC-SHA256), each a
// 68-byte SEND:
//   1. client -> server  hello:        magic "FQ" | version | kind 1 | client nonce (32) | zeros (32)
//   2. server -> client  server proof: magic | version | kind 2 | server nonce (32) | mac_s (32)
//   3. client -> server  client proof: magic | version | kind 3 | zeros (32)        | mac_c (32)
// mac_s = HMAC(client token, "fabperf-rdma-qp-srv\0" | binding | client nonce | server nonce)
// mac_c = HMAC(client token, "fabperf-rdma-qp-cli\0" | binding | client nonce | server nonce)
// The client token is the per-test token derived for this client (derive_client_token), the key
// of the TCP data hello and of the --rdma-cm private data; it never crosses the wire. The binding
// is what each end believes about the queue pair: server node, client node, connection index,
// both QP numbers and both GIDs (52 bytes). A peer that does not hold the test token cannot make
// either MAC; a proof relayed from another queue pair names other QPs and fails; both fresh
// nonces make an old proof useless. The writer posts RDMA WRITEs (and the reader READs) only
// after the peer's MAC verified.
#pragma once

#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace fabperf::qp_proof {

inline constexpr std::size_t kMessageSize = 68;
inline constexpr std::size_t kBindingSize = 52;

enum class Kind : std::uint8_t { client_hello = 1, server_proof = 2, client_proof = 3 };

// What one end knows about the queue pair, from its own QP and the endpoint the coordinator
// forwarded. Both ends must fill it identically for the MACs to agree.
struct Binding {
  std::uint32_t server_node{0};
  std::uint32_t client_node{0};
  std::uint32_t conn{0};
  std::uint32_t server_qpn{0};
  std::uint32_t client_qpn{0};
  std::array<std::uint8_t, 16> server_gid{};
  std::array<std::uint8_t, 16> client_gid{};
};
std::array<std::uint8_t, kBindingSize> encode_binding(const Binding& b);

using Message = std::array<std::uint8_t, kMessageSize>;

// Why a message is refused; `text` says it in words for the error that names the peer.
enum class Refusal : std::uint8_t {
  none = 0,
  size,         // not kMessageSize bytes
  not_fabperf,  // wrong magic or version
  wrong_kind,   // a message of another pass
  malformed,    // a field this pass leaves empty is not all zeros
  bad_mac,      // the MAC does not prove the test token for this queue pair and these nonces
};
struct Checked {
  Refusal refusal{Refusal::none};
  std::string text;
  [[nodiscard]] bool ok() const { return refusal == Refusal::none; }
};

Message encode_client_hello(const auth::Nonce& client_nonce);
Message encode_server_proof(const proto::Token& client_token, const Binding& b, const auth::Nonce& client_nonce,
                            const auth::Nonce& server_nonce);
Message encode_client_proof(const proto::Token& client_token, const Binding& b, const auth::Nonce& client_nonce,
                            const auth::Nonce& server_nonce);

// Server side, pass 1: the client's nonce.
Checked check_client_hello(std::span<const std::uint8_t> bytes, auth::Nonce& client_nonce);
// Client side, pass 2: verifies mac_s, and gives the server's nonce.
Checked check_server_proof(std::span<const std::uint8_t> bytes, const proto::Token& client_token, const Binding& b,
                           const auth::Nonce& client_nonce, auth::Nonce& server_nonce);
// Server side, pass 3: verifies mac_c.
Checked check_client_proof(std::span<const std::uint8_t> bytes, const proto::Token& client_token, const Binding& b,
                           const auth::Nonce& client_nonce, const auth::Nonce& server_nonce);

}  // namespace fabperf::qp_proof
