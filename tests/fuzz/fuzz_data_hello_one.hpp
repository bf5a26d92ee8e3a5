// One fuzz input through the TCP data connections' challenge-response codec
// (include/fabperf/engine/data_hello.hpp), as each end meets a peer's bytes: every decoder on the whole
// input; a server reading a HELLO (the first 52 bytes) and then a PROOF (the rest), checked as
// the engine checks it; a client reading a CHALLENGE (the first 72 bytes) and then a VERDICT.
// Only WireError may come out; anything else (another exception, a crash, a sanitizer report)
// is a bug.
#pragma once

#include <fabperf/engine/data_hello.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace fabperf::fuzz {

// Fixed so that seeds can hold exchanges whose proofs verify (replay_main.cpp writes them).
inline proto::Token data_hello_key() {
  proto::Token k{};
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<std::uint8_t>(0x40 + i);
  return k;
}
inline auth::Nonce data_hello_server_nonce() {
  auth::Nonce n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(0x80 + i);
  return n;
}
inline constexpr const char* kDataHelloTestId = "fuzz-test";
// The hello a fuzzed client side answers challenges for.
inline data_hello::Hello data_hello_client_hello() {
  data_hello::Hello h;
  h.op = data_hello::Op::write;
  h.client_node = 1;
  h.server_node = 0;
  h.conn_index = 0;
  for (std::size_t i = 0; i < h.client_nonce.size(); ++i) h.client_nonce[i] = static_cast<std::uint8_t>(i);
  return h;
}

inline void fuzz_data_hello_one(const std::uint8_t* data, std::size_t size) {
  namespace dh = data_hello;
  const std::span<const std::uint8_t> in(data, size);
  auto quietly = [](auto&& f) {
    try {
      f();
    } catch (const dh::WireError&) {
    }
  };
  quietly([&] { (void)dh::decode_hello(in); });
  quietly([&] { (void)dh::decode_challenge(in); });
  quietly([&] { (void)dh::decode_proof(in); });
  quietly([&] { (void)dh::decode_verdict(in); });
  const auto key = data_hello_key();
  // Server side.
  if (size >= dh::kHelloSize) {
    quietly([&] {
      const auto h = dh::decode_hello(in.first(dh::kHelloSize));
      const auto ns = data_hello_server_nonce();
      (void)dh::encode_challenge({dh::Status::ok, ns, dh::server_proof(key, kDataHelloTestId, h, ns)});
      const auto got = dh::decode_proof(in.subspan(dh::kHelloSize));
      const bool ok = auth::proofs_equal(dh::client_proof(key, kDataHelloTestId, h, ns), got);
      (void)dh::encode_verdict(ok ? dh::Status::ok : dh::Status::bad_proof);
    });
  }
  // Client side.
  if (size >= dh::kChallengeSize) {
    quietly([&] {
      const auto h = data_hello_client_hello();
      const auto c = dh::decode_challenge(in.first(dh::kChallengeSize));
      if (c.status != dh::Status::ok) return;
      if (!auth::proofs_equal(dh::server_proof(key, kDataHelloTestId, h, c.server_nonce), c.server_proof)) return;
      (void)dh::encode_proof(dh::client_proof(key, kDataHelloTestId, h, c.server_nonce));
      (void)dh::status_text(dh::decode_verdict(in.subspan(dh::kChallengeSize)));
    });
  }
}

}  // namespace fabperf::fuzz
