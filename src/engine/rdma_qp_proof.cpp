#include <fabperf/core/bytes.hpp>
#include <fabperf/engine/rdma_qp_proof.hpp>

#include <algorithm>
#include <iterator>

namespace fabperf::qp_proof {
namespace {

constexpr std::uint16_t kMagic = 0x4651;  // "FQ"
constexpr std::uint8_t kVersion = 1;
constexpr std::size_t kHeader = 4;
constexpr std::size_t kNonceAt = kHeader;
constexpr std::size_t kMacAt = kNonceAt + auth::kNonceBytes;
static_assert(kMacAt + auth::kProofBytes == kMessageSize);
// Domain separation: the two passes' MACs differ, and neither can pass as a data hello's or an
// rdma_cm request's.
constexpr std::uint8_t kServerLabel[] = "fabperf-rdma-qp-srv";  // with its terminating NUL
constexpr std::uint8_t kClientLabel[] = "fabperf-rdma-qp-cli";

auth::Proof mac(std::span<const std::uint8_t> label, const proto::Token& client_token, const Binding& b,
                const auth::Nonce& client_nonce, const auth::Nonce& server_nonce) {
  const auto binding = encode_binding(b);
  return auth::hmac_sha256(client_token, {label, binding, client_nonce, server_nonce});
}

// A message of kind k; the field a pass leaves empty is zeros ({}).
Message message(Kind k, const auth::Nonce& nonce, const auth::Proof& proof) {
  return pack_be<kMessageSize>(kMagic, kVersion, k, nonce, proof);
}

const char* kind_name(std::uint8_t k) {
  constexpr const char* kNames[] = {"an unknown kind", "a client hello", "a server proof", "a client proof"};
  return kNames[k < std::size(kNames) ? k : 0];
}

// Size, magic, version and kind; the MAC is checked by the caller.
Checked check_shape(std::span<const std::uint8_t> bytes, Kind want) {
  if (bytes.size() != kMessageSize) {
    return {Refusal::size, "a " + std::to_string(bytes.size()) + "-byte message where the " +
                               std::to_string(kMessageSize) + "-byte proof of the test token belongs"};
  }
  if (get_be<std::uint16_t>(bytes.data()) != kMagic || bytes[2] != kVersion)
    return {Refusal::not_fabperf, "not a fabperf queue pair proof of this version"};
  if (bytes[3] != static_cast<std::uint8_t>(want)) {
    return {Refusal::wrong_kind,
            std::string(kind_name(bytes[3])) + " where " + kind_name(static_cast<std::uint8_t>(want)) + " belongs"};
  }
  return {};
}

// The field a pass leaves empty (the hello's MAC, the client proof's nonce) must be zeros: no
// byte of a message is outside what is checked.
Checked check_empty(std::span<const std::uint8_t> bytes, std::size_t at, std::size_t n, const char* what) {
  if (std::any_of(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.begin() + static_cast<std::ptrdiff_t>(at + n),
                  [](std::uint8_t b) { return b != 0; })) {
    return {Refusal::malformed, std::string("its ") + what + " field is not empty"};
  }
  return {};
}

Checked check_mac(std::span<const std::uint8_t> bytes, const auth::Proof& want) {
  auth::Proof got{};
  std::copy_n(bytes.begin() + kMacAt, got.size(), got.begin());
  if (!auth::proofs_equal(want, got))
    return {Refusal::bad_mac, "its proof does not prove this test's token for this queue pair"};
  return {};
}

}  // namespace

std::array<std::uint8_t, kBindingSize> encode_binding(const Binding& b) {
  return pack_be<kBindingSize>(b.server_node, b.client_node, b.conn, b.server_qpn, b.client_qpn, b.server_gid,
                               b.client_gid);
}

Message encode_client_hello(const auth::Nonce& client_nonce) {
  return message(Kind::client_hello, client_nonce, {});
}

Message encode_server_proof(const proto::Token& client_token, const Binding& b, const auth::Nonce& client_nonce,
                            const auth::Nonce& server_nonce) {
  return message(Kind::server_proof, server_nonce, mac(kServerLabel, client_token, b, client_nonce, server_nonce));
}

Message encode_client_proof(const proto::Token& client_token, const Binding& b, const auth::Nonce& client_nonce,
                            const auth::Nonce& server_nonce) {
  return message(Kind::client_proof, {}, mac(kClientLabel, client_token, b, client_nonce, server_nonce));
}

Checked check_client_hello(std::span<const std::uint8_t> bytes, auth::Nonce& client_nonce) {
  Checked c = check_shape(bytes, Kind::client_hello);
  if (c.ok()) c = check_empty(bytes, kMacAt, auth::kProofBytes, "hello's MAC");
  if (c.ok()) std::copy_n(bytes.begin() + kNonceAt, client_nonce.size(), client_nonce.begin());
  return c;
}

Checked check_server_proof(std::span<const std::uint8_t> bytes, const proto::Token& client_token, const Binding& b,
                           const auth::Nonce& client_nonce, auth::Nonce& server_nonce) {
  Checked c = check_shape(bytes, Kind::server_proof);
  if (!c.ok()) return c;
  auth::Nonce ns{};
  std::copy_n(bytes.begin() + kNonceAt, ns.size(), ns.begin());
  c = check_mac(bytes, mac(kServerLabel, client_token, b, client_nonce, ns));
  if (c.ok()) server_nonce = ns;
  return c;
}

Checked check_client_proof(std::span<const std::uint8_t> bytes, const proto::Token& client_token, const Binding& b,
                           const auth::Nonce& client_nonce, const auth::Nonce& server_nonce) {
  Checked c = check_shape(bytes, Kind::client_proof);
  if (c.ok()) c = check_empty(bytes, kNonceAt, auth::kNonceBytes, "client proof's nonce");
  if (c.ok()) c = check_mac(bytes, mac(kClientLabel, client_token, b, client_nonce, server_nonce));
  return c;
}

}  // namespace fabperf::qp_proof
