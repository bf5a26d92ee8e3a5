#include "integration/harness.hpp"

#include <fabperf/core/clock.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <csignal>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace fabperf::test {

const char* fabperf_bin() {
  return FABPERF_BIN;
}

namespace {
std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> v;
  for (auto& a : args) v.push_back(a.data());
  v.push_back(nullptr);
  return v;
}
}  // namespace

AgentProcess::AgentProcess(std::vector<std::string> extra_args, const std::string& stderr_path) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  std::vector<std::string> args = {fabperf_bin(), "agent", "--listen",    "127.0.0.1:0",
                                   "--ready-fd",  "3",     "--log-level", "warn"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  auto argv = argv_of(args);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 3);
  if (!stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  const int rc = posix_spawn(&pid_, fabperf_bin(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  if (rc != 0) {
    ::close(p[0]);
    throw std::runtime_error("posix_spawn agent");
  }
  std::string line;
  const auto deadline = mono_now_ns() + 10'000'000'000LL;
  char c = 0;
  while (mono_now_ns() < deadline) {
    pollfd pfd{p[0], POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    if (::read(p[0], &c, 1) != 1 || c == '\n') break;
    line.push_back(c);
  }
  ::close(p[0]);
  if (line.rfind("LISTENING ", 0) != 0) {
    kill(SIGKILL);
    throw std::runtime_error("agent did not report LISTENING: '" + line + "'");
  }
  endpoint_ = parse_host_port(line.substr(10), "agent");
}

AgentProcess::~AgentProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGTERM);
    if (!wait_exit(std::chrono::seconds(5))) {
      ::kill(pid_, SIGKILL);
      wait_exit(std::chrono::seconds(5));
    }
  }
}

void AgentProcess::kill(int sig) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

bool AgentProcess::wait_exit(std::chrono::milliseconds timeout, int* status) {
  if (reaped_) return true;
  const auto deadline = mono_now_ns() + std::chrono::nanoseconds(timeout).count();
  while (mono_now_ns() < deadline) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      reaped_ = true;
      if (status) *status = st;
      return true;
    }
    ::usleep(10'000);
  }
  return false;
}

std::string temp_path(const std::string& name) {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/fabperf-test-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    return std::string(d ? d : "/tmp");
  }();
  return dir + "/" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    // A last line without its newline is still being written (a live results file): no record yet.
    if (in.eof()) break;
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

const std::string& key_file(int which) {
  static std::string paths[3];
  std::string& p = paths[which];
  if (p.empty()) {
    p = temp_path("key" + std::to_string(which));
    const auto r = run_fabperf({"keygen", p, "--force"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  return p;
}

int spawn_fabperf(const std::vector<std::string>& args_in, const std::string& stdout_path,
                  const std::string& stderr_path) {
  std::vector<std::string> args = {fabperf_bin()};
  args.insert(args.end(), args_in.begin(), args_in.end());
  auto argv = argv_of(args);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, fabperf_bin(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("posix_spawn fabperf");
  return pid;
}

CommandResult run_fabperf(const std::vector<std::string>& args, std::chrono::seconds timeout) {
  static int counter = 0;
  const std::string out = temp_path("out" + std::to_string(++counter));
  const std::string err = temp_path("err" + std::to_string(counter));
  const auto t0 = mono_now_ns();
  const int pid = spawn_fabperf(args, out, err);
  CommandResult r;
  const auto deadline = t0 + std::chrono::nanoseconds(timeout).count();
  int st = 0;
  bool done = false;
  while (mono_now_ns() < deadline) {
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      done = true;
      break;
    }
    ::usleep(10'000);
  }
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
    r.exit_code = -1;
  } else {
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  r.seconds = static_cast<double>(mono_now_ns() - t0) / 1e9;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

}  // namespace fabperf::test
