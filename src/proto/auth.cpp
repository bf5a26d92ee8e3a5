#include <fabperf/core/bytes.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/fd.hpp>
#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <memory>

namespace fabperf::auth {

Key::Key(std::vector<std::uint8_t> bytes) : bytes_(std::move(bytes)) {}

Key::~Key() {
  if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

Key parse_key(std::string_view text, std::string_view source) {
  const auto first = text.find_first_not_of(" \t\r\n");
  const auto last = text.find_last_not_of(" \t\r\n");
  const std::string_view hex =
      first == std::string_view::npos ? std::string_view{} : text.substr(first, last - first + 1);
  if (hex.empty()) throw UsageError(fmt::format("key file {}: empty (create one with 'fabperf keygen FILE')", source));
  if (hex.size() % 2 != 0 || hex.size() < 2 * kMinKeyBytes || hex.size() > 2 * kMaxKeyBytes) {
    throw UsageError(fmt::format("key file {}: a key is {}..{} hex digits (create one with 'fabperf keygen FILE')",
                                 source, 2 * kMinKeyBytes, 2 * kMaxKeyBytes));
  }
  std::vector<std::uint8_t> bytes(hex.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    // Two hex digits of either case: from_chars takes no sign, prefix or space.
    const char* end = hex.data() + 2 * i + 2;
    if (const auto [p, ec] = std::from_chars(end - 2, end, bytes[i], 16); ec != std::errc() || p != end) {
      OPENSSL_cleanse(bytes.data(), bytes.size());
      throw UsageError(fmt::format("key file {}: not a hex key (create one with 'fabperf keygen FILE')", source));
    }
  }
  return Key(std::move(bytes));
}

std::optional<std::string> key_file_mode_problem(mode_t mode, uid_t owner, uid_t me) {
  if (!S_ISREG(mode)) return std::string("not a regular file");
  if ((mode & 077) != 0) {
    return fmt::format("group or others can access it (mode {:04o}); run 'chmod 600' on it", mode & 07777);
  }
  if (owner != me && owner != 0) return fmt::format("owned by uid {}, not by this user (uid {}) or root", owner, me);
  return std::nullopt;
}

Key load_key_file(const std::string& path) {
  auto failed = [&](int e) { return UsageError(fmt::format("key file {}: {}", path, errno_text(e))); };
  const UniqueFd owned(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  const int fd = owned.get();
  if (fd < 0) throw failed(errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw failed(errno);
  if (auto why = key_file_mode_problem(st.st_mode, st.st_uid, ::geteuid())) {
    throw UsageError(fmt::format("key file {}: refusing to use it: {}", path, *why));
  }
  // A key file is tiny; anything large is not a key file. Wiped however this ends.
  char buf[1024];
  const std::unique_ptr<char, void (*)(char*)> wipe(buf, [](char* b) { OPENSSL_cleanse(b, sizeof buf); });
  std::size_t n = 0;
  for (;;) {
    const ssize_t k = ::read(fd, buf + n, sizeof buf - n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) throw failed(errno);
    if (k == 0) break;
    n += static_cast<std::size_t>(k);
    if (n == sizeof buf) throw UsageError(fmt::format("key file {}: too large to be a key file", path));
  }
  return parse_key(std::string_view(buf, n), path);
}

void write_key_file(const std::string& path, bool force) {
  std::array<std::uint8_t, kKeygenBytes> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) {
    throw SystemError("generate key for", path, "OpenSSL random generator failed");
  }
  std::string text = to_hex(raw) + "\n";
  OPENSSL_cleanse(raw.data(), raw.size());
  const std::unique_ptr<std::string, void (*)(std::string*)> wipe(&text, [](std::string* t) {
    OPENSSL_cleanse(t->data(), t->size());  // however this ends
  });
  if (force) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISREG(st.st_mode)) throw UsageError(fmt::format("keygen {}: exists and is not a regular file", path));
      if (::unlink(path.c_str()) != 0) throw SystemError("replace key file", path, errno);
    }
  }
  // `fabperf keygen /etc/fabperf/key` on a fresh host: the folder is made, private to its owner.
  if (const auto dir = std::filesystem::path(path).parent_path(); !dir.empty() && !std::filesystem::exists(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || ::chmod(dir.c_str(), 0700) != 0) {
      throw UsageError(fmt::format("keygen {}: cannot create folder {}: {}", path, dir.string(),
                                   ec ? ec.message() : errno_text(errno)));
    }
  }
  // O_EXCL: never write through a pre-existing file or symlink; 0600 from the start.
  UniqueFd owned(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  const int fd = owned.get();
  if (fd < 0) {
    const int e = errno;
    if (e == EEXIST) throw UsageError(fmt::format("keygen {}: file exists (use --force to replace it)", path));
    throw UsageError(fmt::format("keygen {}: {}", path, errno_text(e)));
  }
  // The umask may only have removed bits; make sure of exactly 0600.
  (void)::fchmod(fd, 0600);
  if (const int e = write_all(fd, text); e != 0) {
    owned.reset();
    ::unlink(path.c_str());
    throw SystemError("write key file", path, e);
  }
  if (::fsync(fd) != 0 || ::close(owned.release()) != 0) throw SystemError("write key file", path, errno);
}

std::string key_file_from_env() {
  const char* v = std::getenv("FABPERF_KEY_FILE");
  return v ? std::string(v) : std::string();
}

Nonce make_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    throw SystemError("RAND_bytes", "authentication nonce", "OpenSSL random generator failed");
  }
  return n;
}

namespace {
// HMAC-SHA256 set up once; each call works on a copy. OpenSSL 3's one-shot HMAC() fetches the
// algorithm from its provider on every call, which was most of a data handshake's CPU (a server
// takes two per connection, thousands in a big test).
const EVP_MAC_CTX* hmac_prototype() {
  static EVP_MAC_CTX* const proto = [] {
    EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    EVP_MAC_CTX* ctx = mac != nullptr ? EVP_MAC_CTX_new(mac) : nullptr;
    EVP_MAC_free(mac);  // the context holds its own reference
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
    if (ctx != nullptr && EVP_MAC_CTX_set_params(ctx, params) != 1) {
      EVP_MAC_CTX_free(ctx);
      ctx = nullptr;
    }
    return ctx;
  }();
  return proto;
}
}  // namespace

Proof hmac_sha256(std::span<const std::uint8_t> key, std::initializer_list<std::span<const std::uint8_t>> parts) {
  const EVP_MAC_CTX* proto = hmac_prototype();
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx(proto != nullptr ? EVP_MAC_CTX_dup(proto) : nullptr,
                                                                &EVP_MAC_CTX_free);
  static const std::uint8_t kEmpty = 0;  // an empty key still needs a pointer (null keeps the old key)
  bool ok = ctx != nullptr && EVP_MAC_init(ctx.get(), key.empty() ? &kEmpty : key.data(), key.size(), nullptr) == 1;
  for (const auto& p : parts) ok = ok && EVP_MAC_update(ctx.get(), p.data(), p.size()) == 1;
  Proof out{};
  std::size_t len = 0;
  if (!ok || EVP_MAC_final(ctx.get(), out.data(), &len, out.size()) != 1 || len != out.size()) {
    throw SystemError("HMAC", "HMAC-SHA256", "OpenSSL failed");
  }
  return out;
}

bool proofs_equal(const Proof& expected, const Proof& received) {
  return CRYPTO_memcmp(expected.data(), received.data(), expected.size()) == 0;
}

}  // namespace fabperf::auth
