#include <fabperf/core/stop.hpp>

#include <atomic>
#include <csignal>

namespace fabperf::stop {
namespace {

// Lock-free atomics: the only state a signal handler may touch.
std::atomic<std::uint64_t> g_requests{0};
std::atomic<int> g_last_signal{0};
std::atomic<std::uint64_t> g_mark{0};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  request(sig);
}

}  // namespace

void request(int sig) noexcept {
  g_last_signal.store(sig, std::memory_order_relaxed);
  g_requests.fetch_add(1, std::memory_order_release);
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
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  ::sigaction(SIGPIPE, &ign, nullptr);
}

}  // namespace fabperf::stop
