// TcpFlow's receive side at a window's edge: what arrived and is not counted yet, read from the
// kernel on a real loopback connection.
#include "engine/tcp_engine.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>
#include <vector>

using namespace fabperf;

namespace {

// A connected loopback pair: {sender, receiver}.
std::pair<int, int> tcp_pair() {
  const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(ls, 1), 0);
  EXPECT_EQ(::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int tx = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(::connect(tx, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const int rx = ::accept(ls, nullptr, nullptr);
  ::close(ls);
  return {tx, rx};
}

// Sends n bytes from fd and waits (1 s at most) until the peer's receive queue holds `queued`.
void send_and_wait(int tx, int rx, std::size_t n, int queued) {
  const std::vector<char> buf(n, 'x');
  ASSERT_EQ(::send(tx, buf.data(), n, 0), static_cast<ssize_t>(n));
  int q = 0;
  for (int i = 0; i < 1000 && (::ioctl(rx, FIONREAD, &q) != 0 || q < queued); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(q, queued);
}

}  // namespace

TEST(TcpFlow, AStreamCountsAReadInProgressAsArrived) {
  const auto [tx, rx] = tcp_pair();
  TcpFlow f(rx, FlowRole::server, FlowOp::write, 0, "receiver", "sender");
  send_and_wait(tx, rx, 100'000, 100'000);
  EXPECT_EQ(f.edge(0).queued, 100'000u);
  // The reader copied 40,000 bytes out of the socket and was preempted before it counted them:
  // they arrived, so they are still owed to the window (the socket's queue alone says 60,000).
  std::vector<char> got(40'000);
  ASSERT_EQ(::recv(rx, got.data(), got.size(), MSG_WAITALL), 40'000);
  EXPECT_EQ(f.edge(0).queued, 100'000u);
  EXPECT_EQ(f.edge(40'000).queued, 60'000u);
  ::close(tx);
}

TEST(TcpFlow, AnRpcConnectionCountsTheHeadersItReadAsRead) {
  // rpc connections also carry headers, which the reader counts apart from the payload.
  const auto [tx, rx] = tcp_pair();
  TcpFlow f(rx, FlowRole::server, FlowOp::rpc, 0, "receiver", "sender");
  send_and_wait(tx, rx, 100'000, 100'000);
  std::vector<char> got(40'000);
  ASSERT_EQ(::recv(rx, got.data(), 16, MSG_WAITALL), 16);
  f.counters.framing_rx += 16;
  EXPECT_EQ(f.edge(0).queued, 100'000u - 16u);
  // A block's read in progress, not counted yet: still arrived (the queue alone says 59,984).
  ASSERT_EQ(::recv(rx, got.data(), got.size(), MSG_WAITALL), 40'000);
  EXPECT_EQ(f.edge(0).queued, 100'000u - 16u);
  EXPECT_EQ(f.edge(40'000).queued, 60'000u - 16u);
  ::close(tx);
}

TEST(TcpFlow, TheSenderKnowsWhatThePeerAcknowledgedLessItsFraming) {
  const auto [tx, rx] = tcp_pair();
  TcpFlow f(tx, FlowRole::client, FlowOp::rpc, 0, "sender", "receiver");
  const std::optional<std::uint64_t> before = f.edge(0).delivered;  // the SYN is acknowledged too
  ASSERT_TRUE(before);
  f.counters.framing_tx += 16;
  send_and_wait(tx, rx, 100'000, 100'000);
  // The peer's kernel holds every byte; its acknowledgement may trail by a moment.
  std::uint64_t delivered = 0;
  for (int i = 0; i < 1000 && (delivered = f.edge(0).delivered.value_or(0) - *before) != 100'000u - 16u; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(delivered, 100'000u - 16u);
  ::close(rx);
}
