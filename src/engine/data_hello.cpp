// The data connections' challenge-response codec (include/fabperf/engine/data_hello.hpp).
#include <fabperf/core/bytes.hpp>
#include <fabperf/engine/data_hello.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace fabperf::data_hello {
namespace {

constexpr std::uint8_t kServerLabel[] = "fabperf-data-server-proof-v4";  // with its terminating NUL
constexpr std::uint8_t kClientLabel[] = "fabperf-data-client-proof-v4";
static_assert(kHelloSize == 4 + 2 + 2 + 4 + 4 + 4 + auth::kNonceBytes);
static_assert(kChallengeSize == 4 + 4 + auth::kNonceBytes + auth::kProofBytes);
static_assert(kProofSize == 4 + auth::kProofBytes);

// Size and magic, the two checks every message starts with: a reader at the field after the magic.
ByteReader opened(std::span<const std::uint8_t> b, std::size_t size, const char* what) {
  if (b.size() != size) {
    throw WireError(Status::bad_hello, fmt::format("data {}: {} bytes, expected {}", what, b.size(), size));
  }
  if (get_be<std::uint32_t>(b.data()) != kMagic) {
    throw WireError(Status::bad_hello,
                    fmt::format("data {}: magic {:#010x}, expected {:#010x} (not a fabperf data connection)", what,
                                get_be<std::uint32_t>(b.data()), kMagic));
  }
  ByteReader r{b};
  r.take(4);
  return r;
}

Status checked_status(std::uint32_t v, const char* what) {
  if (v >= kStatusCount) throw WireError(Status::bad_hello, fmt::format("data {}: unknown status {}", what, v));
  return static_cast<Status>(v);
}

auth::Proof proof(std::span<const std::uint8_t> label, const proto::Token& key, std::string_view test_id,
                  const Hello& h, const auth::Nonce& server_nonce) {
  const auto b = binding(test_id, h, server_nonce);
  return auth::hmac_sha256(key, {label, b});
}

}  // namespace

std::string_view status_text(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::bad_hello: return "hello not understood (not a fabperf data hello of this version)";
    case Status::bad_proof: return "proof rejected (not this test's key)";
    case Status::too_many: return "too many connections";
    case Status::duplicate: return "duplicate connection";
    case Status::wrong_server: return "hello meant for another server";
    case Status::wrong_op: return "operation does not match the test";
  }
  return "unknown status";
}

HelloBytes encode_hello(const Hello& h) {
  return pack_be<kHelloSize>(kMagic, kVersion, h.op, h.client_node, h.server_node, h.conn_index, h.client_nonce);
}

ChallengeBytes encode_challenge(const Challenge& c) {
  // A refusal proves nothing and carries nothing (decode_challenge insists).
  const bool ok = c.status == Status::ok;
  return pack_be<kChallengeSize>(kMagic, c.status, ok ? c.server_nonce : auth::Nonce{},
                                 ok ? c.server_proof : auth::Proof{});
}

ProofBytes encode_proof(const auth::Proof& client_proof) {
  return pack_be<kProofSize>(kMagic, client_proof);
}

VerdictBytes encode_verdict(Status s) {
  return pack_be<kVerdictSize>(kMagic, s);
}

Hello decode_hello(std::span<const std::uint8_t> b) {
  std::uint16_t version = 0;
  Hello h;
  opened(b, kHelloSize, "hello")(version)(h.op)(h.client_node)(h.server_node)(h.conn_index)(h.client_nonce);
  if (version != kVersion) {
    throw WireError(Status::bad_hello,
                    fmt::format("data hello: version {}, this agent speaks version {} (agents of different fabperf "
                                "versions?)",
                                version, kVersion));
  }
  if (const auto op = static_cast<std::uint16_t>(h.op);
      op < static_cast<std::uint16_t>(Op::write) || op > static_cast<std::uint16_t>(Op::probe)) {
    throw WireError(Status::bad_hello, fmt::format("data hello: unknown operation {}", op));
  }
  return h;
}

Challenge decode_challenge(std::span<const std::uint8_t> b) {
  std::uint32_t status = 0;
  Challenge c;
  opened(b, kChallengeSize, "challenge")(status)(c.server_nonce)(c.server_proof);
  c.status = checked_status(status, "challenge");
  if (c.status != Status::ok && std::any_of(b.begin() + 8, b.end(), [](std::uint8_t x) { return x != 0; })) {
    throw WireError(Status::bad_hello, "data challenge: a refusal that carries a nonce or proof");
  }
  return c;
}

auth::Proof decode_proof(std::span<const std::uint8_t> b) {
  auth::Proof p{};
  opened(b, kProofSize, "proof")(p);
  return p;
}

Status decode_verdict(std::span<const std::uint8_t> b) {
  std::uint32_t status = 0;
  opened(b, kVerdictSize, "verdict")(status);
  return checked_status(status, "verdict");
}

std::vector<std::uint8_t> binding(std::string_view test_id, const Hello& h, const auth::Nonce& server_nonce) {
  // Length-prefixed, so no two (test id, fields) pairs give the same bytes.
  const auto fields = pack_be<4 + 16>(static_cast<std::uint32_t>(test_id.size()), h.client_node, h.server_node,
                                      h.conn_index, static_cast<std::uint32_t>(h.op));
  std::vector<std::uint8_t> b(h.client_nonce.begin(), h.client_nonce.end());
  b.insert(b.end(), server_nonce.begin(), server_nonce.end());
  b.insert(b.end(), fields.begin(), fields.begin() + 4);
  b.insert(b.end(), test_id.begin(), test_id.end());
  b.insert(b.end(), fields.begin() + 4, fields.end());
  return b;
}

auth::Proof server_proof(const proto::Token& client_key, std::string_view test_id, const Hello& h,
                         const auth::Nonce& server_nonce) {
  return proof(kServerLabel, client_key, test_id, h, server_nonce);
}

auth::Proof client_proof(const proto::Token& client_key, std::string_view test_id, const Hello& h,
                         const auth::Nonce& server_nonce) {
  return proof(kClientLabel, client_key, test_id, h, server_nonce);
}

}  // namespace fabperf::data_hello
