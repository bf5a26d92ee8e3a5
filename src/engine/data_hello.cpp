// The data connections' challenge-response codec (include/fabperf/engine/data_hello.hpp).
#include <fabperf/core/bytes.hpp>
#include <fabperf/engine/data_hello.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace fabperf::data_hello {
namespace {

constexpr std::uint8_t kServerLabel[] = "fabperf-data-server-proof-v4";  // with its terminating NUL
constexpr std::uint8_t kClientLabel[] = "fabperf-data-client-proof-v4";
static_assert(kHelloSize == 4 + 2 + 2 + 4 + 4 + 4 + auth::kNonceBytes);
static_assert(kChallengeSize == 4 + 4 + auth::kNonceBytes + auth::kProofBytes);
static_assert(kProofSize == 4 + auth::kProofBytes);

// Size and magic, the two checks every message starts with.
void check_frame(std::span<const std::uint8_t> b, std::size_t size, const char* what) {
  if (b.size() != size) {
    throw WireError(Status::bad_hello, fmt::format("data {}: {} bytes, expected {}", what, b.size(), size));
  }
  if (get_be32(b.data()) != kMagic) {
    throw WireError(Status::bad_hello,
                    fmt::format("data {}: magic {:#010x}, expected {:#010x} (not a fabperf data connection)", what,
                                get_be32(b.data()), kMagic));
  }
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
  HelloBytes b{};
  put_be32(b.data(), kMagic);
  put_be16(b.data() + 4, kVersion);
  put_be16(b.data() + 6, static_cast<std::uint16_t>(h.op));
  put_be32(b.data() + 8, h.client_node);
  put_be32(b.data() + 12, h.server_node);
  put_be32(b.data() + 16, h.conn_index);
  std::memcpy(b.data() + 20, h.client_nonce.data(), h.client_nonce.size());
  return b;
}

ChallengeBytes encode_challenge(const Challenge& c) {
  ChallengeBytes b{};
  put_be32(b.data(), kMagic);
  put_be32(b.data() + 4, static_cast<std::uint32_t>(c.status));
  // A refusal proves nothing and carries nothing (decode_challenge insists).
  if (c.status == Status::ok) {
    std::memcpy(b.data() + 8, c.server_nonce.data(), c.server_nonce.size());
    std::memcpy(b.data() + 8 + auth::kNonceBytes, c.server_proof.data(), c.server_proof.size());
  }
  return b;
}

ProofBytes encode_proof(const auth::Proof& client_proof) {
  ProofBytes b{};
  put_be32(b.data(), kMagic);
  std::memcpy(b.data() + 4, client_proof.data(), client_proof.size());
  return b;
}

VerdictBytes encode_verdict(Status s) {
  VerdictBytes b{};
  put_be32(b.data(), kMagic);
  put_be32(b.data() + 4, static_cast<std::uint32_t>(s));
  return b;
}

Hello decode_hello(std::span<const std::uint8_t> b) {
  check_frame(b, kHelloSize, "hello");
  const std::uint16_t version = get_be16(b.data() + 4);
  if (version != kVersion) {
    throw WireError(Status::bad_hello,
                    fmt::format("data hello: version {}, this agent speaks version {} (agents of different fabperf "
                                "versions?)",
                                version, kVersion));
  }
  const std::uint16_t op = get_be16(b.data() + 6);
  if (op < static_cast<std::uint16_t>(Op::write) || op > static_cast<std::uint16_t>(Op::probe)) {
    throw WireError(Status::bad_hello, fmt::format("data hello: unknown operation {}", op));
  }
  Hello h;
  h.op = static_cast<Op>(op);
  h.client_node = get_be32(b.data() + 8);
  h.server_node = get_be32(b.data() + 12);
  h.conn_index = get_be32(b.data() + 16);
  std::memcpy(h.client_nonce.data(), b.data() + 20, h.client_nonce.size());
  return h;
}

Challenge decode_challenge(std::span<const std::uint8_t> b) {
  check_frame(b, kChallengeSize, "challenge");
  Challenge c;
  c.status = checked_status(get_be32(b.data() + 4), "challenge");
  std::memcpy(c.server_nonce.data(), b.data() + 8, c.server_nonce.size());
  std::memcpy(c.server_proof.data(), b.data() + 8 + auth::kNonceBytes, c.server_proof.size());
  if (c.status != Status::ok && std::any_of(b.begin() + 8, b.end(), [](std::uint8_t x) { return x != 0; })) {
    throw WireError(Status::bad_hello, "data challenge: a refusal that carries a nonce or proof");
  }
  return c;
}

auth::Proof decode_proof(std::span<const std::uint8_t> b) {
  check_frame(b, kProofSize, "proof");
  auth::Proof p{};
  std::memcpy(p.data(), b.data() + 4, p.size());
  return p;
}

Status decode_verdict(std::span<const std::uint8_t> b) {
  check_frame(b, kVerdictSize, "verdict");
  return checked_status(get_be32(b.data() + 4), "verdict");
}

std::vector<std::uint8_t> binding(std::string_view test_id, const Hello& h, const auth::Nonce& server_nonce) {
  std::vector<std::uint8_t> b;
  b.reserve(2 * auth::kNonceBytes + 4 + test_id.size() + 16);
  b.insert(b.end(), h.client_nonce.begin(), h.client_nonce.end());
  b.insert(b.end(), server_nonce.begin(), server_nonce.end());
  std::uint8_t n[4];
  auto add32 = [&](std::uint32_t v) {
    put_be32(n, v);
    b.insert(b.end(), n, n + 4);
  };
  // Length-prefixed, so no two (test id, fields) pairs give the same bytes.
  add32(static_cast<std::uint32_t>(test_id.size()));
  b.insert(b.end(), test_id.begin(), test_id.end());
  for (const std::uint32_t v : {h.client_node, h.server_node, h.conn_index, static_cast<std::uint32_t>(h.op)}) add32(v);
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
