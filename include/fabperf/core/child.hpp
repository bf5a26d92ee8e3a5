// One child process, the one way fabperf starts another program (local agents, ssh and srun
// launchers, plan hooks). fork+exec rather than posix_spawn: the child gets its own process group
// (the terminal's Ctrl-C reaches the coordinator alone, which stops its children in order, and a
// signal to the group reaches everything the child started) and PR_SET_PDEATHSIG (it dies with us,
// even on SIGKILL, which closes a remote side's stdin and stops the agent there).
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace fabperf {

struct Child {
  // Its stderr: a pipe of its own, the stdout pipe, or ours.
  enum class Stderr { pipe, merged, inherited };

  // Starts argv (PATH searched) with stdin and stdout on pipes whose other ends we hold,
  // non-blocking. Throws SystemError naming label when a pipe or the fork fails; a program that
  // cannot be executed exits 127 and says so on its stderr.
  Child(std::string label, const std::vector<std::string>& argv, Stderr err_mode = Stderr::pipe);
  Child(Child&& o) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // Closes our ends; one still running is killed (its group) and reaped: no zombie, no orphan.
  ~Child();

  void close_in() { close_fd(in); }
  void close_out() { close_fd(out); }
  void close_err() { close_fd(err); }
  static void close_fd(int& fd);  // closes it if open; -1 afterwards
  // Its whole process group.
  void signal(int sig) const;
  // Waits up to ms for it to exit; true when it has (status then holds its wait status).
  bool reap(int ms);
  // stop_all of this one.
  void stop(std::chrono::milliseconds grace);
  // "exited with status N", "killed by signal N".
  [[nodiscard]] std::string describe_status() const;
  // The shell's convention: the exit status, or 128 + the signal that ended it.
  [[nodiscard]] int exit_code() const;

  std::string label;
  int pid{-1};
  int in{-1};   // our end of its stdin
  int out{-1};  // its stdout
  int err{-1};  // its stderr (Stderr::pipe only)
  bool exited{false};
  int status{0};
};

// Closes every stdin and waits up to grace for them all, then SIGTERM (on_term(c) just before, for
// each one left) and 2 s, then SIGKILL. drain() runs every few ms while they are waited for: one
// blocked on a full output pipe never exits.
void stop_all(std::span<Child* const> children, std::chrono::milliseconds grace,
              const std::function<void()>& drain = {}, const std::function<void(const Child&)>& on_term = {});

// Appends what fd has ready (it is non-blocking) while into is below cap (the rest is read and
// dropped); false at end of file or on an error.
bool read_some(int fd, std::string& into, std::size_t cap = std::size_t{1} << 20);

}  // namespace fabperf
