#include "plan/hooks.hpp"

#include <fabperf/error.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <csignal>

namespace fabperf::plan {

HookRun run_hook(const std::string& command, double timeout_s) {
  HookRun h;
  const auto t0 = std::chrono::steady_clock::now();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    h.error = "pipe: " + errno_text(errno);
    return h;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    h.error = "fork: " + errno_text(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return h;
  }
  if (pid == 0) {
    // Own process group, so a timeout stops everything the hook started.
    ::setpgid(0, 0);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    // The coordinator ignores or catches signals the hook should see with default actions.
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(fds[1]);
  const auto deadline =
      t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
  char buf[4096];
  bool open = true;
  while (open) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      h.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      open = false;
      break;
    }
    h.output.append(buf, static_cast<std::size_t>(n));
    if (h.output.size() > 2 * kOutputTail) h.output.erase(0, h.output.size() - kOutputTail);
  }
  ::close(fds[0]);
  int status = 0;
  // The output closed: the shell is ending (or a background child kept the pipe and went away).
  // Wait for the shell within what is left of the timeout.
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() >= deadline && !h.timed_out) {
      h.timed_out = true;
      ::kill(-pid, SIGKILL);
    }
    ::usleep(10000);
  }
  if (h.output.size() > kOutputTail) h.output.erase(0, h.output.size() - kOutputTail);
  h.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  h.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return h;
}

}  // namespace fabperf::plan
