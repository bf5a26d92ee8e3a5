// A framed control connection on Asio: reads one complete frame under two deadlines (idle: until
// the first byte; frame: until the whole frame), and queues writes so several coroutines may send
// without interleaving bytes. A deadline that expires closes the connection: a half-read frame
// leaves the stream unusable, and a peer that stalls must not hold anything.
#pragma once

#include "proto/asio.hpp"

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <fabperf/proto.hpp>

namespace fabperf::proto {

struct Frame {
  MsgType type{MsgType::heartbeat};
  nlohmann::json body;
};

class FramedConn : public std::enable_shared_from_this<FramedConn> {
 public:
  FramedConn(Tcp::socket socket, std::string peer_name);

  // Throws ProtocolError (bad frame, body over max_body), SystemError (closed, reset, deadline
  // passed). Before authentication, callers pass kMaxPreAuthBody.
  asio::awaitable<Frame> read(std::chrono::milliseconds idle, std::chrono::milliseconds frame,
                              std::uint32_t max_body = kMaxBody);
  // Queues a frame; the write has its own deadline and closes the connection when it passes.
  void send(MsgType type, const nlohmann::json& body);
  // Waits until everything queued so far was written (or the connection closed).
  asio::awaitable<void> flush();
  void close() noexcept;

  [[nodiscard]] bool is_open() const { return open_; }
  [[nodiscard]] const std::string& peer() const { return peer_; }
  [[nodiscard]] Tcp::socket& socket() { return socket_; }

  static constexpr std::chrono::milliseconds kWriteDeadline{10000};

 private:
  asio::awaitable<void> writer();
  void arm_read_timer(std::chrono::milliseconds d);

  Tcp::socket socket_;
  std::string peer_;
  asio::steady_timer read_timer_;
  asio::steady_timer write_timer_;
  asio::steady_timer flushed_;
  std::deque<std::vector<std::uint8_t>> queue_;
  bool writing_{false};
  bool open_{true};
  bool read_timed_out_{false};
  std::vector<std::uint8_t> body_buf_;
};

}  // namespace fabperf::proto
