// A framed control connection on Asio: reads one complete frame under two deadlines (idle: until
// the first byte; frame: until the whole frame), and queues writes so several coroutines may send
// without interleaving bytes. A deadline that expires closes the connection: a half-read frame
// leaves the stream unusable, and a peer that stalls must not hold anything.
// With a key, the connection runs TLS 1.3 with the key's PSK (proto/tls_psk.hpp) from its first
// byte: start_tls() before any frame; without one, frames go over the plain socket.
#pragma once

#include "net/asio.hpp"

#include <boost/asio/ssl.hpp>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <fabperf/core/error.hpp>
#include <fabperf/proto/proto.hpp>

namespace fabperf::proto {

struct Frame {
  MsgType type{MsgType::heartbeat};
  nlohmann::json body;
};

// A TLS handshake that failed; openssl_error is 0 when the peer just closed or went silent.
class TlsHandshakeError : public Error {
 public:
  TlsHandshakeError(const std::string& message, unsigned long openssl_error)
      : Error(ExitCode::infrastructure, message), openssl_error_(openssl_error) {}
  [[nodiscard]] unsigned long openssl_error() const { return openssl_error_; }

 private:
  unsigned long openssl_error_;
};

// What a session's logic needs of its connection once the peer is authenticated: queue a message
// and know whether the peer is still there. FramedConn is the real one; the agent's state machine
// tests drive it through an in-memory one (tests/unit/test_test_host.cpp).
class MessageSink {
 public:
  virtual ~MessageSink() = default;
  // Queues a message; never blocks, never throws for a closed peer (the message is dropped).
  virtual void send(MsgType type, const nlohmann::json& body) = 0;
  [[nodiscard]] virtual bool is_open() const = 0;
  [[nodiscard]] virtual const std::string& peer() const = 0;
};

// A control connection as the coordinator uses one: messages both ways under deadlines.
// FramedConn is the real one; the coordinator's state machine tests use an in-memory pair
// (tests/common/memory_conn.hpp).
class ControlConn : public MessageSink {
 public:
  // Throws ProtocolError (a bad frame, a body over max_body), TimeoutError (nothing within
  // `idle`, or the frame not whole within `frame`) or SystemError (closed, reset). Before
  // authentication, callers pass kMaxPreAuthBody.
  virtual asio::awaitable<Frame> read(std::chrono::milliseconds idle, std::chrono::milliseconds frame,
                                      std::uint32_t max_body = kMaxBody) = 0;
  // Waits until everything queued so far was written (or the connection closed).
  virtual asio::awaitable<void> flush() = 0;
  virtual void close() noexcept = 0;
};

class FramedConn final : public ControlConn, public std::enable_shared_from_this<FramedConn> {
 public:
  // tls: a context from tls::make_psk_ctx (client or server) for a keyed connection; null for
  // plain frames.
  FramedConn(Tcp::socket socket, std::string peer_name, std::shared_ptr<asio::ssl::context> tls = nullptr);

  // The TLS handshake (client or server side, by the context) within deadline. Throws
  // TlsHandshakeError (the OpenSSL error code kept for the caller to explain) or SystemError.
  asio::awaitable<void> start_tls(std::chrono::milliseconds deadline);

  asio::awaitable<Frame> read(std::chrono::milliseconds idle, std::chrono::milliseconds frame,
                              std::uint32_t max_body = kMaxBody) override;
  // Queues a frame; the write has its own deadline and closes the connection when it passes.
  void send(MsgType type, const nlohmann::json& body) override;
  asio::awaitable<void> flush() override;
  void close() noexcept override;

  [[nodiscard]] bool is_open() const override { return open_; }
  [[nodiscard]] const std::string& peer() const override { return peer_; }
  [[nodiscard]] Tcp::socket& socket() { return socket_; }
  // The TLS session (nullptr without a key).
  [[nodiscard]] SSL* ssl() { return stream_ ? stream_->native_handle() : nullptr; }

  static constexpr std::chrono::milliseconds kWriteDeadline{10000};

 private:
  asio::awaitable<void> writer();
  void arm_read_timer(std::chrono::milliseconds d);
  void disarm_read_timer();
  template <typename Buffers>
  asio::awaitable<void> read_exact(const Buffers& b, error_code& ec);

  std::shared_ptr<asio::ssl::context> tls_;
  Tcp::socket socket_;
  // Only with a key: an SSL_CTX for plain connections cost every keyless agent milliseconds of
  // OpenSSL set-up (a thousand agents on one host: seconds of its CPU).
  std::unique_ptr<asio::ssl::stream<Tcp::socket&>> stream_;
  // Frames go through stream_ once the handshake is done; before it (a keyed agent refusing a
  // plain-text peer with an ERROR frame) they go over the socket as they are.
  bool tls_up_{false};
  std::string peer_;
  asio::steady_timer read_timer_;
  asio::steady_timer write_timer_;
  asio::steady_timer flushed_;
  std::deque<std::vector<std::uint8_t>> queue_;
  bool writing_{false};
  bool open_{true};
  bool read_timed_out_{false};
  std::uint64_t read_gen_{0};  // which arm_read_timer() a timer handler belongs to
  std::string write_failed_;   // why the writer closed the connection (a pending read reports it)
  std::vector<std::uint8_t> body_buf_;
};

// A TLS 1.3 PSK context for the control connections of this key (server: the agent's side).
std::shared_ptr<asio::ssl::context> make_tls_context(const auth::Key& key, bool server);

}  // namespace fabperf::proto
