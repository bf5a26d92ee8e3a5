#include <fabperf/clock.hpp>
#include <fabperf/coordinator.hpp>
#include <fabperf/error.hpp>
#include <fabperf/proto.hpp>
#include <fabperf/sysstat.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <csignal>

extern char** environ;

namespace fabperf {
namespace {

// Reads one "LISTENING host:port" line from fd within timeout_ms.
std::string read_ready_line(int fd, int timeout_ms) {
  std::string line;
  const std::int64_t deadline = mono_now_ns() + std::int64_t{timeout_ms} * 1'000'000;
  char c = 0;
  while (line.size() < 256) {
    const int left = static_cast<int>((deadline - mono_now_ns()) / 1'000'000);
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) continue;
    const ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) break;
    if (c == '\n') return line;
    line.push_back(c);
  }
  return line;
}

void stop_pid(int pid) {
  ::kill(pid, SIGTERM);
  for (int i = 0; i < 50; ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    ::usleep(20'000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace

LocalAgents::LocalAgents(int count, const std::string& log_level, const std::string& key_file) {
  const std::string exe = self_exe();
  std::string key_line;
  if (key_file.empty()) {
    const auth::Nonce raw = auth::make_nonce();  // 32 random bytes: a one-time key
    key_ = auth::Key(std::vector<std::uint8_t>(raw.begin(), raw.end()));
    key_line = proto::to_hex(key_.bytes()) + "\n";
  }
  try {
    for (int i = 0; i < count; ++i) {
      int pipefd[2];
      if (::pipe2(pipefd, O_CLOEXEC) != 0) throw SystemError("pipe", "for a local agent", errno);
      int infd[2];
      if (::pipe2(infd, O_CLOEXEC) != 0) {
        ::close(pipefd[0]);
        ::close(pipefd[1]);
        throw SystemError("pipe", "for a local agent", errno);
      }
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      // The child gets the pipe's write end as fd 3 (dup2 clears CLOEXEC on the copy), and the
      // other pipe's read end as its stdin.
      posix_spawn_file_actions_adddup2(&fa, pipefd[1], 3);
      posix_spawn_file_actions_adddup2(&fa, infd[0], 0);
      std::vector<std::string> args = {exe, "agent",       "--listen", "127.0.0.1:0",        "--ready-fd",
                                       "3", "--log-level", log_level,  "--exit-on-stdin-eof"};
      if (!key_file.empty()) {
        args.push_back("--key-file");
        args.push_back(key_file);
      } else {
        args.push_back("--key-stdin");
      }
      std::vector<char*> argv;
      argv.reserve(args.size() + 1);
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      pid_t pid = 0;
      const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
      posix_spawn_file_actions_destroy(&fa);
      ::close(pipefd[1]);
      ::close(infd[0]);
      if (rc != 0) {
        ::close(pipefd[0]);
        ::close(infd[1]);
        throw SystemError("start local agent", exe, rc);
      }
      pids_.push_back(pid);
      stdin_fds_.push_back(infd[1]);
      // A pipe holds far more than one key line: this write never waits.
      if (!key_line.empty() &&
          ::write(infd[1], key_line.data(), key_line.size()) != static_cast<ssize_t>(key_line.size())) {
        throw SystemError("start local agent", fmt::format("pid {}", pid), "could not pass it its key");
      }
      const std::string line = read_ready_line(pipefd[0], 10000);
      ::close(pipefd[0]);
      constexpr std::string_view kPrefix = "LISTENING ";
      if (line.rfind(kPrefix, 0) != 0) {
        throw SystemError("start local agent", fmt::format("pid {}", pid),
                          "it did not report a listening port within 10 s");
      }
      endpoints_.push_back(parse_host_port(line.substr(kPrefix.size()), "local agent address"));
    }
  } catch (...) {
    OPENSSL_cleanse(key_line.data(), key_line.size());
    for (int pid : pids_) stop_pid(pid);
    for (int fd : stdin_fds_) ::close(fd);
    throw;
  }
  OPENSSL_cleanse(key_line.data(), key_line.size());
}

LocalAgents::~LocalAgents() {
  for (int pid : pids_) stop_pid(pid);
  for (int fd : stdin_fds_) ::close(fd);
}

}  // namespace fabperf
