// A blocking TLS 1.3 PSK client over a connected socket, for hand-driven test peers (the raw
// coordinator of the security tests, the VM lab's forger): the same context set-up as fabperf's
// own (src/proto/tls_psk.hpp), OpenSSL's blocking calls, every wait bounded.
#pragma once

#include "proto/tls_psk.hpp"

#include <fabperf/proto/auth.hpp>

#include <chrono>
#include <cstdint>
#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

namespace fabperf::test {

class TlsPeer {
 public:
  // fd: a connected socket, which stays the caller's (not closed here).
  TlsPeer(int fd, const auth::Key& key, int timeout_ms = 5000) : fd_(fd) {
    ctx_ = tls::make_psk_ctx(tls::derive_control_psk(key), false);
    ssl_ = SSL_new(ctx_.get());
    // Short receive timeouts: a blocking SSL call never waits long, the loops below bound the total.
    timeval tv{0, 200000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    SSL_set_fd(ssl_, fd_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      const int r = SSL_connect(ssl_);
      if (r == 1) {
        ok_ = true;
        break;
      }
      const int e = SSL_get_error(ssl_, r);
      if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) && std::chrono::steady_clock::now() < deadline)
        continue;
      const unsigned long code = ERR_get_error();
      error = code ? tls::error_text(code) : "handshake failed (SSL error " + std::to_string(e) + ")";
      failure = code;
      ERR_clear_error();
      break;
    }
  }
  ~TlsPeer() {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }
  TlsPeer(const TlsPeer&) = delete;
  TlsPeer& operator=(const TlsPeer&) = delete;

  [[nodiscard]] bool ok() const { return ok_; }
  bool send(const void* p, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      const int k = SSL_write(ssl_, static_cast<const std::uint8_t*>(p) + done, static_cast<int>(n - done));
      if (k <= 0) return false;
      done += static_cast<std::size_t>(k);
    }
    return true;
  }
  // Exactly n bytes within timeout_ms; false on close, error or timeout.
  bool recv_exact(std::uint8_t* p, std::size_t n, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::size_t got = 0;
    while (got < n) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      const int k = SSL_read(ssl_, p + got, static_cast<int>(n - got));
      if (k > 0) {
        got += static_cast<std::size_t>(k);
        continue;
      }
      const int e = SSL_get_error(ssl_, k);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) continue;
      ERR_clear_error();
      return false;
    }
    return true;
  }

  std::string error;         // why the handshake failed
  unsigned long failure{0};  // its OpenSSL error code

 private:
  int fd_;
  tls::CtxPtr ctx_;
  SSL* ssl_{nullptr};
  bool ok_{false};
};

}  // namespace fabperf::test
