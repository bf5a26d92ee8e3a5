// A throw-away sysfs/procfs-looking tree under a per-test temp root, for the parsers that take
// a root directory (links, bonds, RDMA devices). Each test gets its own, removed after it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <string>

namespace fabperf::test {

class FakeTree : public ::testing::Test {
 protected:
  explicit FakeTree(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / (prefix_ + std::to_string(::getpid()) + "-" +
                                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  // A file with one line of content (sysfs files end in a newline).
  void put(const std::string& rel, const std::string& content) {
    const auto p = root_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content << "\n";
  }
  void link(const std::string& rel, const std::string& target) {
    const auto p = root_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::filesystem::create_symlink(target, p);
  }
  [[nodiscard]] std::string root() const { return root_.string(); }
  std::filesystem::path root_;

 private:
  std::string prefix_;
};

}  // namespace fabperf::test
