// The /metrics listener: Boost.Beast over Asio coroutines on a thread of its own. Every request
// is bounded (8 KiB of headers, no body, 10 s to arrive), connections are capped, and every
// answer is one of handle_http's (metrics.cpp).
#include "proto/asio.hpp"

#include <fabperf/error.hpp>
#include <fabperf/monitor.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <atomic>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

namespace fabperf::monitor {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
constexpr int kMaxConnections = 32;
constexpr auto kRequestDeadline = std::chrono::seconds(10);

}  // namespace

struct MetricsServer::Impl {
  asio::io_context io{1};
  Tcp::acceptor acceptor{io};
  std::function<std::string()> render;
  std::atomic<int> connections{0};
  std::thread thread;

  asio::awaitable<void> session(Tcp::socket sock) {
    beast::tcp_stream stream(std::move(sock));
    beast::flat_buffer buf(kMaxRequestHeaderBytes);
    for (;;) {
      http::request_parser<http::empty_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(kMaxRequestHeaderBytes));
      stream.expires_after(kRequestDeadline);
      error_code ec;
      co_await http::async_read(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::connection_reset) break;
      HttpReply rep;
      unsigned version = 11;
      bool keep_alive = false;
      if (ec) {
        rep.status = 400;
        rep.content_type = "text/plain; charset=utf-8";
        rep.body = fmt::format("bad request: {}\n", ec.message());
      } else {
        const auto& req = parser.get();
        version = req.version();
        keep_alive = req.keep_alive();
        try {
          rep = handle_http(std::string_view(req.method_string().data(), req.method_string().size()),
                            std::string_view(req.target().data(), req.target().size()), render);
        } catch (const std::exception& e) {
          rep.status = 500;
          rep.content_type = "text/plain; charset=utf-8";
          rep.body = fmt::format("internal error: {}\n", e.what());
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
    --connections;
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
      if (connections.load() >= kMaxConnections) {
        sock.close(ec);  // a flood of idle connections cannot starve the scraper for long: each lives 10 s at most
        continue;
      }
      ++connections;
      asio::co_spawn(io, session(std::move(sock)), asio::detached);
    }
  }
};

MetricsServer::MetricsServer(const std::string& host, std::uint16_t port, std::function<std::string()> render)
    : impl_(std::make_unique<Impl>()) {
  impl_->render = std::move(render);
  error_code ec;
  const auto addr = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) throw UsageError(fmt::format("metrics listen address '{}': not a numeric IP address", host));
  const Tcp::endpoint ep(addr, port);
  impl_->acceptor.open(ep.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(Tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(ep, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw SystemError("listen for /metrics on", fmt::format("{}:{}", host, port), ec.message());
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
