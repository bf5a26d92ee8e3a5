#include <fabperf/core/child.hpp>
#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <csignal>

namespace fabperf {

void Child::close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

Child::Child(std::string label_, const std::vector<std::string>& argv, Stderr err_mode) : label(std::move(label_)) {
  int pipes[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};  // its stdin, stdout and stderr
  const int n = err_mode == Stderr::pipe ? 3 : 2;
  auto fail = [&](const char* what) {
    const int e = errno;
    for (auto& p : pipes) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
    throw SystemError(what, "for " + label, e);
  };
  for (int i = 0; i < n; ++i) {
    if (::pipe2(pipes[i], O_CLOEXEC) != 0) fail("pipe");
  }
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  args.reserve(copy.size() + 1);
  for (auto& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  const int child_err = err_mode == Stderr::pipe ? pipes[2][1] : err_mode == Stderr::merged ? pipes[1][1] : 2;
  const pid_t parent = ::getpid();
  pid = ::fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    // Async-signal-safe calls only until exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    for (int s : {SIGINT, SIGTERM, SIGPIPE}) ::sigaction(s, &sa, nullptr);
    ::dup2(pipes[0][0], 0);
    ::dup2(pipes[1][1], 1);
    ::dup2(child_err, 2);
    ::execvp(args[0], args.data());
    static const char kMsg[] = "cannot execute the program\n";
    (void)!::write(2, kMsg, sizeof kMsg - 1);
    ::_exit(127);
  }
  // Also here: a signal to the group may come before the child ran setpgid.
  ::setpgid(pid, pid);
  close_fd(pipes[0][0]);
  close_fd(pipes[1][1]);
  close_fd(pipes[2][1]);
  in = pipes[0][1];
  out = pipes[1][0];
  err = pipes[2][0];
  for (int fd : {in, out, err}) {
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
}

Child::Child(Child&& o) noexcept
    : label(std::move(o.label)), pid(o.pid), in(o.in), out(o.out), err(o.err), exited(o.exited), status(o.status) {
  o.pid = o.in = o.out = o.err = -1;
  o.exited = true;
}

Child::~Child() {
  close_in();
  close_out();
  close_err();
  if (pid > 0 && !exited) {
    signal(SIGKILL);
    reap(5000);
  }
}

void Child::signal(int sig) const {
  if (pid > 0) ::kill(-pid, sig);
}

bool Child::reap(int ms) {
  if (exited) return true;
  const std::int64_t deadline = mono_now_ns() + std::int64_t{ms} * 1'000'000;
  for (;;) {
    int st = 0;
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) {
      exited = true;
      status = st;
      return true;
    }
    if (mono_now_ns() >= deadline) return false;
    ::usleep(5'000);
  }
}

void Child::stop(std::chrono::milliseconds grace) {
  Child* self = this;
  stop_all(std::span<Child* const>(&self, 1), grace);
}

void stop_all(std::span<Child* const> children, std::chrono::milliseconds grace, const std::function<void()>& drain,
              const std::function<void(const Child&)>& on_term) {
  const auto wait_all = [&](std::int64_t ms) {
    const std::int64_t deadline = mono_now_ns() + ms * 1'000'000;
    for (;;) {
      if (drain) drain();
      const bool all = std::ranges::count_if(children, [](Child* c) { return c->reap(0); }) == std::ssize(children);
      if (all || mono_now_ns() >= deadline) return all;
      ::usleep(5'000);
    }
  };
  for (Child* c : children) c->close_in();
  if (wait_all(grace.count())) return;
  for (Child* c : children) {
    if (c->exited) continue;
    if (on_term) on_term(*c);
    c->signal(SIGTERM);
  }
  if (wait_all(2000)) return;
  for (Child* c : children) {
    if (!c->exited) c->signal(SIGKILL);
  }
  wait_all(5000);
}

std::string Child::describe_status() const {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return "stopped";
}

int Child::exit_code() const {
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

bool read_some(int fd, std::string& into, std::size_t cap) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      if (into.size() < cap) into.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

}  // namespace fabperf
