// An in-memory control connection pair on one io_context, for the coordinator's state machine
// tests: what one end sends the other reads, in order, after a trip through JSON text (as on the
// wire); a read waits under its idle deadline and, when it passes, closes and throws TimeoutError
// like FramedConn; close() on either end ends both (reads drain what was sent, then fail).
#pragma once

#include "proto/conn.hpp"

#include <fmt/format.h>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include <fabperf/core/error.hpp>

namespace fabperf::fakes {

class MemoryConn final : public proto::ControlConn {
 public:
  static std::pair<std::shared_ptr<MemoryConn>, std::shared_ptr<MemoryConn>> pair(const asio::any_io_executor& ex,
                                                                                  const std::string& a_name,
                                                                                  const std::string& b_name) {
    auto ab = std::make_shared<Inbox>(ex);
    auto ba = std::make_shared<Inbox>(ex);
    return {std::make_shared<MemoryConn>(ba, ab, b_name), std::make_shared<MemoryConn>(ab, ba, a_name)};
  }

  struct Inbox {
    explicit Inbox(const asio::any_io_executor& ex) : wake(ex) {}
    std::deque<proto::Frame> frames;
    bool closed{false};
    asio::steady_timer wake;
  };
  // in: what this end reads; out: the other end's inbox. peer: who is at the other end.
  MemoryConn(std::shared_ptr<Inbox> in, std::shared_ptr<Inbox> out, std::string peer)
      : in_(std::move(in)), out_(std::move(out)), peer_(std::move(peer)) {}

  asio::awaitable<proto::Frame> read(std::chrono::milliseconds idle, std::chrono::milliseconds,
                                     std::uint32_t) override {
    const auto deadline = std::chrono::steady_clock::now() + idle;
    for (;;) {
      if (!in_->frames.empty()) {
        proto::Frame f = std::move(in_->frames.front());
        in_->frames.pop_front();
        co_return f;
      }
      if (!open_ || in_->closed) throw SystemError("read from", peer_, "connection closed by the peer");
      if (std::chrono::steady_clock::now() >= deadline) {
        close();
        throw TimeoutError("read from", peer_,
                           fmt::format("no message within {:.1f} s", static_cast<double>(idle.count()) / 1e3));
      }
      in_->wake.expires_at(deadline);
      error_code ec;
      co_await in_->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }
  void send(proto::MsgType type, const nlohmann::json& body) override {
    if (!open_ || out_->closed) return;
    out_->frames.push_back(proto::Frame{type, nlohmann::json::parse(body.dump())});
    out_->wake.cancel();
  }
  asio::awaitable<void> flush() override { co_return; }
  void close() noexcept override {
    open_ = false;
    in_->closed = out_->closed = true;
    in_->wake.cancel();
    out_->wake.cancel();
  }
  [[nodiscard]] bool is_open() const override { return open_ && !out_->closed; }
  [[nodiscard]] const std::string& peer() const override { return peer_; }

 private:
  std::shared_ptr<Inbox> in_, out_;
  std::string peer_;
  bool open_{true};
};

}  // namespace fabperf::fakes
