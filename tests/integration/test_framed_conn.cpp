// FramedConn's read deadlines on a starved host: a frame that arrived in time is read, whatever
// the order in which a late io thread meets the expired timer and the readable socket.
#include "proto/conn.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

namespace fabperf {
namespace {

using namespace std::chrono_literals;

TEST(FramedConn, AFrameThatArrivedBeforeTheDeadlineIsReadWhenTheProcessWakesLate) {
  asio::io_context io;
  Tcp::acceptor acceptor(io, Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  Tcp::socket peer(io);
  peer.connect(acceptor.local_endpoint());
  auto conn = std::make_shared<proto::FramedConn>(acceptor.accept(), "peer");
  for (int round = 0; round < 20; ++round) {
    std::optional<proto::Frame> got;
    std::string error;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          try {
            got = co_await conn->read(100ms, 100ms);
          } catch (const std::exception& e) {
            error = e.what();
          }
        },
        asio::detached);
    io.poll();  // the read waits, its idle deadline armed
    const auto frame = proto::encode_frame(proto::MsgType::heartbeat, nlohmann::json::object());
    asio::write(peer, asio::buffer(frame));
    // The io thread does not run for 3 deadlines (an overloaded host): the frame is in the
    // kernel's buffer and the timer expired by the time it does.
    std::this_thread::sleep_for(300ms);
    io.restart();
    io.run_for(1s);
    ASSERT_TRUE(got.has_value()) << "round " << round << ": " << error;
    EXPECT_EQ(got->type, proto::MsgType::heartbeat);
  }
  // Silence is still a timeout.
  std::string error;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        try {
          (void)co_await conn->read(100ms, 100ms);
        } catch (const std::exception& e) {
          error = e.what();
        }
      },
      asio::detached);
  io.restart();
  io.run_for(1s);
  EXPECT_NE(error.find("no message within 0.1 s"), std::string::npos) << error;
}

}  // namespace
}  // namespace fabperf
