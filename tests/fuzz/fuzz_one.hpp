// One fuzz input through everything a stranger's bytes can reach before authentication and
// everything an authenticated peer's frames reach: the frame decoder, every message parser,
// the pre-auth size cap, and the key/nonce/proof text parsers. Only the documented errors
// (ProtocolError, UsageError) may come out; anything else (another exception, a crash, a
// sanitizer report) is a bug.
#pragma once

#include <fabperf/auth.hpp>
#include <fabperf/error.hpp>
#include <fabperf/proto.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace fabperf::fuzz {

inline void fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  try {
    proto::validate_frame(in);
  } catch (const ProtocolError&) {
  }
  if (size >= proto::kHeaderSize) {
    try {
      (void)proto::decode_header(in.first<proto::kHeaderSize>(), proto::kMaxPreAuthBody);
    } catch (const ProtocolError&) {
    }
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)auth::parse_key(text, "fuzz input");
  } catch (const UsageError&) {
  }
  try {
    (void)auth::nonce_from_hex(text, "fuzz");
  } catch (const ProtocolError&) {
  }
  try {
    (void)auth::proof_from_hex(text, "fuzz");
  } catch (const ProtocolError&) {
  }
}

}  // namespace fabperf::fuzz
