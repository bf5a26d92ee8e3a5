// Waits, on an io_context, for the process's next stop request (fabperf/core/stop.hpp): the handler
// only counts, so this polls the count every 50 ms, which is prompt enough for a person's Ctrl-C
// and costs nothing measurable.
#pragma once

#include <fabperf/core/stop.hpp>

#include <chrono>
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
    state_->timer.cancel();
  }

 private:
  struct State {
    State(asio::io_context& io, std::function<void(int)> f)
        : timer(io), on_request(std::move(f)), seen(stop::requests()) {}
    asio::steady_timer timer;
    std::function<void(int)> on_request;
    std::uint64_t seen;
    bool cancelled{false};
  };
  static void arm(const std::shared_ptr<State>& s) {
    s->timer.expires_after(std::chrono::milliseconds(50));
    s->timer.async_wait([s](error_code ec) {
      if (ec || s->cancelled) return;
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
