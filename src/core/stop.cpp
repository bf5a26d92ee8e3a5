#include <fabperf/core/stop.hpp>

#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fabperf::stop {
namespace {

// Lock-free atomics: the only state a signal handler may touch.
std::atomic<std::uint64_t> g_requests{0};
std::atomic<int> g_last_signal{0};
std::atomic<std::uint64_t> g_mark{0};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// Notifier slots: the eventfd (+1, so 0 is "not made yet") and whether a subscriber holds it.
constexpr std::size_t kNotifiers = 64;
std::array<std::atomic<int>, kNotifiers> g_notifier_fd{};
std::array<std::atomic<bool>, kNotifiers> g_notifier_held{};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  request(sig);
}

}  // namespace

void request(int sig) noexcept {
  g_last_signal.store(sig, std::memory_order_relaxed);
  g_requests.fetch_add(1, std::memory_order_release);
  const int saved = errno;  // a signal handler must leave errno as it found it
  for (const auto& slot : g_notifier_fd) {
    if (const int fd = slot.load(std::memory_order_acquire) - 1; fd >= 0) {
      const std::uint64_t one = 1;
      [[maybe_unused]] const auto n = ::write(fd, &one, sizeof one);
    }
  }
  errno = saved;
}

int acquire_notifier() {
  for (std::size_t i = 0; i < kNotifiers; ++i) {
    if (g_notifier_held[i].exchange(true, std::memory_order_acq_rel)) continue;
    int fd = g_notifier_fd[i].load(std::memory_order_acquire) - 1;
    if (fd < 0) {
      fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (fd < 0) {
        g_notifier_held[i].store(false, std::memory_order_release);
        throw std::runtime_error(std::string("stop notifier: eventfd: ") + std::strerror(errno));
      }
      g_notifier_fd[i].store(fd + 1, std::memory_order_release);
    }
    // What earlier requests left is not this subscriber's business: one read of an eventfd
    // returns its whole count and resets it (non-blocking: nothing to read is fine).
    std::uint64_t left = 0;
    [[maybe_unused]] const auto n = ::read(fd, &left, sizeof left);
    return fd;
  }
  throw std::runtime_error("stop notifier: all 64 in use");
}

void release_notifier(int fd) noexcept {
  for (std::size_t i = 0; i < kNotifiers; ++i) {
    if (g_notifier_fd[i].load(std::memory_order_acquire) - 1 == fd)
      g_notifier_held[i].store(false, std::memory_order_release);
  }
}

std::uint64_t requests() noexcept {
  return g_requests.load(std::memory_order_acquire);
}

void mark() noexcept {
  g_mark.store(requests(), std::memory_order_relaxed);
}

bool stopped() noexcept {
  return requests() > g_mark.load(std::memory_order_relaxed);
}

int last_signal() noexcept {
  return g_last_signal.load(std::memory_order_relaxed);
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (const int sig : {SIGINT, SIGTERM}) ::sigaction(sig, &sa, nullptr);
  sa.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &sa, nullptr);
}

}  // namespace fabperf::stop
