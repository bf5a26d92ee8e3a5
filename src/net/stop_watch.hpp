// Waits, on an io_context, for the process's next stop request (fabperf/core/stop.hpp): it sleeps
// on the request notifier (an eventfd the signal handler writes), so an idle process wakes for
// nothing; the counts, not the descriptor's value, say how many requests there were.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <fabperf/core/stop.hpp>

#include <functional>
#include <memory>

#include "net/asio.hpp"

namespace fabperf {

class StopWatch {
 public:
  // on_request(signal) runs on `io` once for every request made after construction.
  StopWatch(asio::io_context& io, std::function<void(int)> on_request)
      : state_(std::make_shared<State>(io, std::move(on_request))) {
    arm(state_);
  }
  ~StopWatch() { cancel(); }
  StopWatch(const StopWatch&) = delete;
  StopWatch& operator=(const StopWatch&) = delete;
  void cancel() {
    state_->cancelled = true;
    error_code ec;
    state_->wake.cancel(ec);
  }

 private:
  struct State {
    // The notifier is acquired (and drained) before the count is read: a request between the
    // two only wakes the watch once for nothing.
    State(asio::io_context& io, std::function<void(int)> f)
        : notifier(stop::acquire_notifier()),
          wake(io, ::fcntl(notifier, F_DUPFD_CLOEXEC, 0)),  // asio closes its own copy
          on_request(std::move(f)),
          seen(stop::requests()) {}
    ~State() { stop::release_notifier(notifier); }
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    int notifier;
    asio::posix::stream_descriptor wake;
    std::function<void(int)> on_request;
    std::uint64_t seen;
    bool cancelled{false};
  };
  static void arm(const std::shared_ptr<State>& s) {
    s->wake.async_wait(asio::posix::descriptor_base::wait_read, [s](error_code ec) {
      if (ec || s->cancelled) return;
      std::uint64_t n = 0;  // one read returns and resets the eventfd's whole count
      [[maybe_unused]] const auto got = ::read(s->notifier, &n, sizeof n);
      for (const std::uint64_t now = stop::requests(); s->seen < now && !s->cancelled;) {
        ++s->seen;
        s->on_request(stop::last_signal());
      }
      if (!s->cancelled) arm(s);
    });
  }
  std::shared_ptr<State> state_;
};

}  // namespace fabperf
