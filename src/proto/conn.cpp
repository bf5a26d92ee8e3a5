#include "proto/conn.hpp"
#include "proto/tls_psk.hpp"

#include <fabperf/core/error.hpp>

#include <fmt/format.h>

namespace fabperf::proto {

std::shared_ptr<asio::ssl::context> make_tls_context(const auth::Key& key, bool server) {
  return std::make_shared<asio::ssl::context>(tls::make_psk_ctx(tls::derive_control_psk(key), server).release());
}

FramedConn::FramedConn(Tcp::socket socket, std::string peer_name, std::shared_ptr<asio::ssl::context> tls)
    : tls_(std::move(tls)),
      socket_(std::move(socket)),
      stream_(tls_ ? std::make_unique<asio::ssl::stream<Tcp::socket&>>(socket_, *tls_) : nullptr),
      peer_(std::move(peer_name)),
      read_timer_(socket_.get_executor()),
      write_timer_(socket_.get_executor()),
      flushed_(socket_.get_executor()) {
  error_code ec;
  socket_.set_option(Tcp::no_delay(true), ec);
}

void FramedConn::close() noexcept {
  if (!open_) return;
  open_ = false;
  error_code ec;
  socket_.shutdown(Tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  read_timer_.cancel();
  write_timer_.cancel();
  flushed_.cancel();
}

void FramedConn::arm_read_timer(std::chrono::milliseconds d) {
  const std::uint64_t gen = ++read_gen_;
  read_timer_.expires_after(d);
  read_timer_.async_wait([weak = weak_from_this(), gen](error_code ec) {
    auto self = weak.lock();
    // Cancelled, or late: an overloaded host runs an expired timer's handler after the read it
    // guarded has completed (both were ready in one pass), and that read is not a timeout.
    if (ec || !self || self->read_gen_ != gen) return;
    self->read_timed_out_ = true;
    error_code ignored;
    self->socket_.cancel(ignored);
  });
}

void FramedConn::disarm_read_timer() {
  ++read_gen_;
  read_timer_.cancel();
}

template <typename Buffers>
asio::awaitable<void> FramedConn::read_exact(const Buffers& b, error_code& ec) {
  if (tls_up_) {
    co_await asio::async_read(*stream_, b, asio::redirect_error(asio::use_awaitable, ec));
  } else {
    co_await asio::async_read(socket_, b, asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<void> FramedConn::start_tls(std::chrono::milliseconds deadline) {
  auto self = shared_from_this();
  if (!tls_) throw SystemError("start TLS with", peer_, "no key on this connection");
  if (!open_) throw SystemError("start TLS with", peer_, "connection closed");
  const bool server = SSL_is_server(stream_->native_handle()) == 1;
  error_code ec;
  read_timed_out_ = false;
  arm_read_timer(deadline);
  co_await stream_->async_handshake(server ? asio::ssl::stream_base::server : asio::ssl::stream_base::client,
                                    asio::redirect_error(asio::use_awaitable, ec));
  disarm_read_timer();
  if (read_timed_out_) {
    close();
    throw TlsHandshakeError(fmt::format("TLS handshake with {}: no answer within {:.1f} s", peer_,
                                        static_cast<double>(deadline.count()) / 1000.0),
                            0);
  }
  if (ec) {
    close();
    const bool ssl_error = ec.category() == asio::error::get_ssl_category();
    const unsigned long code = ssl_error ? static_cast<unsigned long>(static_cast<unsigned int>(ec.value())) : 0;
    const bool closed = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
    throw TlsHandshakeError(
        fmt::format("TLS handshake with {}: {}", peer_, closed ? "connection closed by peer" : ec.message()), code);
  }
  if (!tls::psk_was_used(stream_->native_handle())) {
    close();
    throw TlsHandshakeError(fmt::format("TLS handshake with {}: the session was not keyed from the shared key (the "
                                        "peer does not hold it)",
                                        peer_),
                            0);
  }
  tls_up_ = true;
}

asio::awaitable<Frame> FramedConn::read(std::chrono::milliseconds idle, std::chrono::milliseconds frame,
                                        std::uint32_t max_body) {
  auto self = shared_from_this();  // keep alive across suspension
  if (!open_) throw SystemError("read from", peer_, "connection closed");
  std::array<std::uint8_t, kHeaderSize> hdr{};
  error_code ec;
  read_timed_out_ = false;

  auto check = [&](const char* what, std::chrono::milliseconds d) {
    if (!write_failed_.empty()) {  // the writer closed it: its reason, not the read's echo of it
      throw SystemError("write to", peer_, write_failed_ + ": connection closed");
    }
    if (read_timed_out_) {
      close();
      throw TimeoutError("read from", peer_,
                         fmt::format("no {} within {:.1f} s", what, static_cast<double>(d.count()) / 1000.0));
    }
    if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
      close();
      throw SystemError("read from", peer_, "connection closed by peer");
    }
    if (ec) {
      close();
      throw SystemError("read from", peer_, ec.message());
    }
  };

  // Idle deadline until the first byte, then one deadline for the rest of the frame.
  arm_read_timer(idle);
  co_await read_exact(asio::buffer(hdr.data(), 1), ec);
  disarm_read_timer();
  check("message", idle);
  arm_read_timer(frame);
  co_await read_exact(asio::buffer(hdr.data() + 1, kHeaderSize - 1), ec);
  if (ec || read_timed_out_) {
    disarm_read_timer();
    check("complete frame header", frame);
  }
  Frame f;
  try {  // a bad header or body (the read between them throws SystemError, not this)
    const Header h = decode_header(hdr, max_body);
    body_buf_.resize(h.length);
    co_await read_exact(asio::buffer(body_buf_), ec);
    disarm_read_timer();
    check("complete frame body", frame);
    f.type = h.type;
    f.body = parse_body(h.type, body_buf_);
  } catch (const ProtocolError& e) {
    disarm_read_timer();
    close();
    throw ProtocolError(fmt::format("from {}: {}", peer_, e.what()));
  }
  if (body_buf_.capacity() > (64u << 10)) std::vector<std::uint8_t>().swap(body_buf_);
  co_return f;
}

void FramedConn::send(MsgType type, const nlohmann::json& body) {
  if (!open_) return;
  queue_.push_back(encode_frame(type, body));
  if (!writing_) {
    writing_ = true;
    asio::co_spawn(
        socket_.get_executor(), [self = shared_from_this()] { return self->writer(); }, asio::detached);
  }
}

asio::awaitable<void> FramedConn::writer() {
  auto self = shared_from_this();
  while (open_ && !queue_.empty()) {
    write_timer_.expires_after(kWriteDeadline);
    write_timer_.async_wait([weak = weak_from_this()](error_code ec) {
      if (ec) return;
      if (auto s = weak.lock()) {  // peer stopped reading: give up on it
        s->write_failed_ =
            fmt::format("the peer read nothing for {:.0f} s", static_cast<double>(kWriteDeadline.count()) / 1000.0);
        s->close();
      }
    });
    error_code ec;
    if (tls_up_) {
      co_await asio::async_write(*stream_, asio::buffer(queue_.front()), asio::redirect_error(asio::use_awaitable, ec));
    } else {
      co_await asio::async_write(socket_, asio::buffer(queue_.front()), asio::redirect_error(asio::use_awaitable, ec));
    }
    write_timer_.cancel();
    if (ec) {
      if (open_ && write_failed_.empty()) write_failed_ = ec.message();
      close();
      break;
    }
    queue_.pop_front();
  }
  writing_ = false;
  flushed_.cancel();  // wake flush() waiters
}

asio::awaitable<void> FramedConn::flush() {
  auto self = shared_from_this();
  while (open_ && writing_) {
    flushed_.expires_after(std::chrono::seconds(30));
    error_code ec;
    co_await flushed_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace fabperf::proto
