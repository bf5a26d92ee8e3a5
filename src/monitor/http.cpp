// The /metrics listener: Boost.Beast over Asio coroutines on a thread of its own. Every request
// is bounded (8 KiB of headers, no body, 10 s to arrive), connections are capped, and every
// answer is one of handle_http's (metrics.cpp). At the cap a new connection takes the place of the
// one idle the longest: clients holding keep-alive connections open cannot lock the scraper out.
// One source address holds at most kMaxPerSource connections (its own idlest give way), so one
// noisy host cannot push every other client out either.
#include "net/asio.hpp"

#include <fabperf/core/error.hpp>
#include <fabperf/monitor/monitor.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <list>
#include <optional>
#include <thread>

namespace fabperf::monitor {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
constexpr std::size_t kMaxConnections = 32;
constexpr std::size_t kMaxPerSource = 8;
constexpr std::size_t kMaxRequestHeaderBytes = std::size_t{8} * 1024;
constexpr auto kRequestDeadline = std::chrono::seconds(10);

}  // namespace

struct MetricsServer::Impl {
  // One open connection; `idle_since` is set while it waits for a request (nothing of it yet).
  struct Conn {
    beast::tcp_stream* stream{nullptr};
    std::optional<std::chrono::steady_clock::time_point> idle_since;
    std::string source;  // the peer's address
  };

  asio::io_context io{1};
  Tcp::acceptor acceptor{io};
  std::function<std::string()> render;
  std::list<Conn> conns;  // touched only on io's one thread
  std::thread thread;

  asio::awaitable<void> session(Tcp::socket sock, std::string source) {
    beast::tcp_stream stream(std::move(sock));
    conns.push_back({&stream, std::nullopt, std::move(source)});
    const auto me = std::prev(conns.end());
    beast::flat_buffer buf(kMaxRequestHeaderBytes);
    for (;;) {
      http::request_parser<http::empty_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(kMaxRequestHeaderBytes));
      stream.expires_after(kRequestDeadline);
      error_code ec;
      // Waiting for a request, or for the rest of one: evictable, the longest waiting first (a
      // scraper's request arrives whole in one segment; a slow or silent client is what waits).
      me->idle_since = std::chrono::steady_clock::now();
      co_await http::async_read_header(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
      me->idle_since.reset();
      if (!ec) co_await http::async_read(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
      // Gone, timed out or evicted: nothing to answer. Other errors are a bad request.
      if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::connection_reset ||
          ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor)
        break;
      HttpReply rep;
      unsigned version = 11;
      bool keep_alive = false;
      if (ec) {
        rep = {400, kPlainText, fmt::format("bad request: {}\n", ec.message()), ""};
      } else {
        const auto& req = parser.get();
        version = req.version();
        keep_alive = req.keep_alive();
        try {
          rep = handle_http(std::string_view(req.method_string().data(), req.method_string().size()),
                            std::string_view(req.target().data(), req.target().size()), render);
        } catch (const std::exception& e) {
          rep = {500, kPlainText, fmt::format("internal error: {}\n", e.what()), ""};
        }
      }
      http::response<http::string_body> res{static_cast<http::status>(rep.status), version};
      res.set(http::field::server, "fabperf-monitor");
      res.set(http::field::content_type, rep.content_type);
      if (!rep.allow.empty()) res.set(http::field::allow, rep.allow);
      res.keep_alive(keep_alive);
      res.body() = std::move(rep.body);
      res.prepare_payload();
      stream.expires_after(kRequestDeadline);
      error_code wec;
      co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, wec));
      if (wec || !keep_alive || ec) break;
    }
    error_code ignored;
    stream.socket().shutdown(Tcp::socket::shutdown_send, ignored);
    conns.erase(me);
  }

  // At a cap: the connection idle the longest (of `source`, when given) gives way; false when
  // every one is mid-request.
  bool evict_idlest(const std::string* source = nullptr) {
    auto oldest = conns.end();
    for (auto it = conns.begin(); it != conns.end(); ++it) {
      if (source != nullptr && it->source != *source) continue;
      if (it->idle_since && (oldest == conns.end() || *it->idle_since < *oldest->idle_since)) oldest = it;
    }
    if (oldest == conns.end()) return false;
    error_code ec;
    oldest->stream->socket().close(ec);  // its pending read ends with operation_aborted
    oldest->idle_since.reset();
    return true;
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      error_code ec;
      Tcp::socket sock = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec == asio::error::operation_aborted) co_return;
      if (ec) {
        // Out of descriptors and the like: wait a little rather than spin.
        asio::steady_timer t(io, std::chrono::milliseconds(100));
        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      const auto remote = sock.remote_endpoint(ec);
      std::string source = ec ? "?" : numeric_address(remote.address());
      const auto from_source = std::ranges::count(conns, source, &Conn::source);
      // Every connection at a cap is mid-request: each has 10 s at most to finish.
      if ((static_cast<std::size_t>(from_source) >= kMaxPerSource && !evict_idlest(&source)) ||
          (conns.size() >= kMaxConnections && !evict_idlest())) {
        sock.close(ec);
        continue;
      }
      asio::co_spawn(io, session(std::move(sock), std::move(source)), asio::detached);
    }
  }
};

MetricsServer::MetricsServer(const std::string& host, std::uint16_t port, std::function<std::string()> render)
    : impl_(std::make_unique<Impl>()) {
  impl_->render = std::move(render);
  error_code ec;
  const auto addr = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) throw UsageError(fmt::format("metrics listen address '{}': not a numeric IP address", host));
  try {
    impl_->acceptor = Tcp::acceptor(impl_->io, Tcp::endpoint(addr, port));  // SO_REUSEADDR, bound, listening
  } catch (const boost::system::system_error& e) {
    throw SystemError("listen for /metrics on", fmt::format("{}:{}", host, port), e.code().message());
  }
  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([this] {
    try {
      impl_->io.run();
    } catch (const std::exception& e) {
      spdlog::error("metrics listener stopped: {}", e.what());
    }
  });
}

MetricsServer::~MetricsServer() {
  asio::post(impl_->io, [this] {
    error_code ec;
    impl_->acceptor.close(ec);
    impl_->io.stop();
  });
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint16_t MetricsServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

}  // namespace fabperf::monitor
