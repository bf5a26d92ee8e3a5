// Which rpc testers one thread per connection may run (tcp::pinned_testers): only testers that never
// leave their connection, and never a connection whose testers mix writes and reads.
#include "engine/tcp_internal.hpp"

#include <gtest/gtest.h>

using namespace fabperf;
using Testers = std::vector<std::uint32_t>;

namespace {
TestSpec spec_of(TestKind test, std::uint32_t threads, std::uint32_t parallel) {
  SpecParams p;
  p.test = test;
  p.threads = threads;
  p.parallel = parallel;
  return TestSpec::make(p);
}
}  // namespace

TEST(RpcPinning, OneServerGroupsTestersByLane) {
  const auto p = tcp::pinned_testers(spec_of(TestKind::write, 4, 2), 1);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], (std::vector<Testers>{{0, 2}, {1, 3}}));
}

TEST(RpcPinning, StickyTestsKeepEachTesterWithItsServer) {
  const auto p = tcp::pinned_testers(spec_of(TestKind::swrite, 3, 1), 2);
  EXPECT_EQ(p, (std::vector<std::vector<Testers>>{{{0, 2}}, {{1}}}));
}

TEST(RpcPinning, NoneWhereTestersMoveOrMixOperations) {
  EXPECT_TRUE(tcp::pinned_testers(spec_of(TestKind::write, 4, 1), 2).empty());   // write cycles over servers
  EXPECT_TRUE(tcp::pinned_testers(spec_of(TestKind::rw, 4, 1), 1).empty());      // one connection, both ways
  EXPECT_TRUE(tcp::pinned_testers(spec_of(TestKind::swrite, 4, 1), 0).empty());  // no server: not a client
  // rw over two lanes: the even testers write on lane 0, the odd ones read on lane 1.
  EXPECT_EQ(tcp::pinned_testers(spec_of(TestKind::rw, 4, 2), 1)[0], (std::vector<Testers>{{0, 2}, {1, 3}}));
}
