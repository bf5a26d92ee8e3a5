// The TCP data connections' opening: a three-pass mutual challenge-response in the style of
// ISO/IEC 9798-4 (mechanism with a cryptographic check function: HMAC-SHA256), then a verdict.
// Pure byte handling, no sockets: the TCP engine drives it on both ends (src/engine/
// tcp_handshake.cpp), the unit tests check every refusal, and a fuzz target feeds it hostile
// bytes. The wire format lives only here; docs/security.md "Data connections" describes it.
//
//   1. client -> server  HELLO      52 bytes  magic | version | op | client node | server node |
//                                             connection index | client nonce (32)
//   2. server -> client  CHALLENGE  72 bytes  magic | status | server nonce (32) | server proof (32)
//   3. client -> server  PROOF      36 bytes  magic | client proof (32)
//   4. server -> client  VERDICT     8 bytes  magic | status
//
// Both proofs are HMAC-SHA256 under the client's key (derive_client_token of the per-test token
// the coordinator sent both agents inside TLS) over a direction label, both nonces, the test id
// and every field of the HELLO (binding(): the server node, connection index and operation
// included). The client sends its proof, and later load, only after the server's verified; the
// server accepts the connection only after the client's verified. Fresh nonces on both sides make
// every proof good for one connection only: a recorded exchange replayed on another connection
// meets another server nonce. A CHALLENGE with a refusal status carries zero nonce and proof;
// the VERDICT only reports the outcome (the proofs are the authentication).
// All integers are big-endian.
#pragma once

#include <fabperf/core/error.hpp>
#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fabperf::data_hello {

inline constexpr std::uint32_t kMagic = 0x46425044;  // "FBPD"
inline constexpr std::uint16_t kVersion = 4;
inline constexpr std::size_t kHelloSize = 52;
inline constexpr std::size_t kChallengeSize = 72;
inline constexpr std::size_t kProofSize = 36;
inline constexpr std::size_t kVerdictSize = 8;

// What the connection carries; fixed by the client, checked by the server against the test.
enum class Op : std::uint16_t { write = 1, read = 2, rpc = 3, probe = 4 };

// The server's answer in a CHALLENGE or VERDICT. Values 0-4 are those of version 3's ack, so an
// older client reads a refusal of its hello as "hello not understood".
enum class Status : std::uint32_t {
  ok = 0,
  bad_hello = 1,     // not a well-formed hello of this version
  bad_proof = 2,     // the client's proof did not verify
  too_many = 3,      // more connections than the test has
  duplicate = 4,     // this client's connection index is already connected
  wrong_server = 5,  // the hello names another server node
  wrong_op = 6,      // the operation does not match the test
};
inline constexpr std::uint32_t kStatusCount = 7;
// "token rejected", "duplicate connection", ...: the words a refusal is reported with.
std::string_view status_text(Status s);

struct Hello {
  Op op{Op::write};
  std::uint32_t client_node{0};
  std::uint32_t server_node{0};
  std::uint32_t conn_index{0};
  auth::Nonce client_nonce{};
};
struct Challenge {
  Status status{Status::ok};
  auth::Nonce server_nonce{};
  auth::Proof server_proof{};
};

using HelloBytes = std::array<std::uint8_t, kHelloSize>;
using ChallengeBytes = std::array<std::uint8_t, kChallengeSize>;
using ProofBytes = std::array<std::uint8_t, kProofSize>;
using VerdictBytes = std::array<std::uint8_t, kVerdictSize>;

// A message that is not what its place in the exchange requires: wrong size, magic, version,
// operation, status, or a refusal that carries a nonce. `status()` is what a server answers a
// bad HELLO with. The message names the message and the field.
class WireError : public ProtocolError {
 public:
  WireError(Status status, const std::string& message) : ProtocolError(message), status_(status) {}
  [[nodiscard]] Status status() const noexcept { return status_; }

 private:
  Status status_;
};

HelloBytes encode_hello(const Hello& h);
ChallengeBytes encode_challenge(const Challenge& c);
ProofBytes encode_proof(const auth::Proof& client_proof);
VerdictBytes encode_verdict(Status s);

// Strict decoders: exactly the message's size, its magic, and every field in range. Throw WireError.
Hello decode_hello(std::span<const std::uint8_t> bytes);
Challenge decode_challenge(std::span<const std::uint8_t> bytes);
auth::Proof decode_proof(std::span<const std::uint8_t> bytes);
Status decode_verdict(std::span<const std::uint8_t> bytes);

// What both proofs cover, after their direction label: the client nonce, the server nonce, the
// test id (length-prefixed), client node, server node, connection index and operation. Exposed
// for the tests and the documentation; the proofs below are HMACs over label | binding.
std::vector<std::uint8_t> binding(std::string_view test_id, const Hello& h, const auth::Nonce& server_nonce);
// HMAC-SHA256(client key, "fabperf-data-server-proof-v4\0" | binding) and the client's, with
// "fabperf-data-client-proof-v4\0": one direction's proof never passes as the other's.
auth::Proof server_proof(const proto::Token& client_key, std::string_view test_id, const Hello& h,
                         const auth::Nonce& server_nonce);
auth::Proof client_proof(const proto::Token& client_key, std::string_view test_id, const Hello& h,
                         const auth::Nonce& server_nonce);

}  // namespace fabperf::data_hello
