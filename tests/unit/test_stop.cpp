// The process's stop requests (fabperf/core/stop.hpp) and StopWatch: requests made before a watcher
// exists are not its business; each one after it is delivered once, in order, on its io_context.
#include <fabperf/core/stop.hpp>

#include <gtest/gtest.h>

#include <csignal>
#include <vector>

#include "net/stop_watch.hpp"

namespace fabperf {
namespace {

TEST(Stop, RequestsCountAndRememberTheSignal) {
  const auto before = stop::requests();
  stop::request(SIGTERM);
  EXPECT_EQ(stop::requests(), before + 1);
  EXPECT_EQ(stop::last_signal(), SIGTERM);
}

TEST(Stop, APhaseCountsOnlyTheRequestsSinceItsMark) {
  stop::request(SIGINT);  // ended an earlier phase
  stop::mark();
  EXPECT_FALSE(stop::stopped());
  stop::request(SIGTERM);
  EXPECT_TRUE(stop::stopped());
  stop::mark();
  EXPECT_FALSE(stop::stopped());
}

TEST(Stop, WatchSeesOnlyLaterRequestsEachOnce) {
  stop::request(SIGINT);  // before the watcher: not delivered
  asio::io_context io;
  std::vector<int> seen;
  StopWatch watch(io, [&](int sig) {
    seen.push_back(sig);
    if (seen.size() == 2) watch.cancel();
  });
  asio::steady_timer later(io);
  later.expires_after(std::chrono::milliseconds(10));
  later.async_wait([](error_code) {
    stop::request(SIGINT);
    stop::request(SIGTERM);
  });
  io.run();  // returns once the watch is cancelled: it holds no work after that
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], SIGTERM);
}

// A thousand idle agents on one host each polling 20 times a second took both of its cores.
TEST(Stop, AnIdleWatchWakesForNothing) {
  asio::io_context io;
  StopWatch watch(io, [](int) {});
  EXPECT_EQ(io.run_for(std::chrono::milliseconds(300)), 0u);
}

TEST(Stop, NotifiersAreLimitedAndReused) {
  std::vector<int> held;
  for (int i = 0; i < 64; ++i) held.push_back(stop::acquire_notifier());
  EXPECT_THROW((void)stop::acquire_notifier(), std::runtime_error);
  stop::release_notifier(held.back());
  const int again = stop::acquire_notifier();
  EXPECT_EQ(again, held.back());
  for (const int fd : held) stop::release_notifier(fd);
}

TEST(Stop, HandlersCountRealSignals) {
  stop::install_stop_handlers();
  const auto before = stop::requests();
  ASSERT_EQ(::raise(SIGINT), 0);
  EXPECT_EQ(stop::requests(), before + 1);
  EXPECT_EQ(stop::last_signal(), SIGINT);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

}  // namespace
}  // namespace fabperf
