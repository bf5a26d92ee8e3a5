// Shared keys (key files) and the HMAC-SHA256 proofs of the data plane's hello/ack: pure functions
// over OpenSSL, so they can be unit-tested and fuzzed without sockets. The control connections
// of a keyed agent run TLS 1.3 with a PSK derived from the key (src/proto/tls_psk.hpp,
// docs/security.md).
#pragma once

#include <sys/types.h>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fabperf::auth {

inline constexpr std::string_view kCapability = "tls13-psk";
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kProofBytes = 32;  // HMAC-SHA256
inline constexpr std::size_t kMinKeyBytes = 16;
inline constexpr std::size_t kMaxKeyBytes = 64;
inline constexpr std::size_t kKeygenBytes = 32;

using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Proof = std::array<std::uint8_t, kProofBytes>;

// A shared secret; wiped from memory when destroyed.
class Key {
 public:
  Key() = default;
  explicit Key(std::vector<std::uint8_t> bytes);
  ~Key();
  Key(const Key&) = default;
  Key& operator=(const Key&) = default;
  Key(Key&&) noexcept = default;
  Key& operator=(Key&&) noexcept = default;
  [[nodiscard]] std::span<const std::uint8_t> bytes() const { return bytes_; }
  [[nodiscard]] bool empty() const { return bytes_.empty(); }

 private:
  std::vector<std::uint8_t> bytes_;
};

// Key file text: hex digits (kMinKeyBytes..kMaxKeyBytes bytes), surrounding whitespace ignored.
// Throws UsageError naming `source`.
Key parse_key(std::string_view text, std::string_view source);
// Why a key file with this mode/owner must not be used (empty: fine). Pure, for unit tests.
std::optional<std::string> key_file_mode_problem(mode_t mode, uid_t owner, uid_t me);
// Reads and checks a key file: a regular file owned by this user (or root), not accessible by
// group or others, holding a valid key. Throws UsageError with a one-line explanation.
Key load_key_file(const std::string& path);
// Writes a fresh random key (mode 0600). Refuses an existing file unless force. Throws
// UsageError (exists) or SystemError.
void write_key_file(const std::string& path, bool force);
// The key file named by FABPERF_KEY_FILE, or empty.
std::string key_file_from_env();

// Cryptographically random bytes (OpenSSL); throws SystemError when the generator fails.
Nonce make_nonce();
// HMAC-SHA256 over the concatenation of parts.
Proof hmac_sha256(std::span<const std::uint8_t> key, std::initializer_list<std::span<const std::uint8_t>> parts);

// Constant-time comparison.
bool proofs_equal(const Proof& expected, const Proof& received);

}  // namespace fabperf::auth
