// Helpers several unit test files share, defined once: CI builds the unit tests as a unity build
// (8 files a batch), where a second copy in another file's anonymous namespace would not compile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>

namespace fabperf::testutil {

inline bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}
// Whether any of the lines contains `needle`.
inline bool has(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& s : lines) {
    if (contains(s, needle)) return true;
  }
  return false;
}
// Distinct, reproducible tokens and nonces for the protocol's proofs.
inline proto::Token token_of(std::uint8_t seed) {
  proto::Token t{};
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint8_t>(seed + i);
  return t;
}
inline auth::Nonce nonce_of(std::uint8_t seed) {
  auth::Nonce n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(seed * 7 + i);
  return n;
}

}  // namespace fabperf::testutil
