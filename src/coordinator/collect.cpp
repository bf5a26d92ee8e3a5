// After the start: each agent's RESULT (or why there is none), the live progress line from the
// heartbeats meanwhile, and the agents' release.
#include <fabperf/core/error.hpp>

#include "coordinator/coordinator_internal.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <algorithm>

namespace fabperf {

std::string progress_text(double elapsed_s, double total_s, double mb_per_s) {
  return fmt::format("{:.1f} of {:.1f} s, {:.0f} MB/s now", std::min(elapsed_s, total_s), total_s, mb_per_s);
}

namespace coord {

using proto::MsgType;

// Agents stop by their own schedule; one that goes silent is marked and the rest go on. With a
// sink, each node's result goes out as it arrives and is not kept here. Heartbeats alone do not
// keep a node waited for: its RESULT must arrive within result_drain + result_grace of the test's
// end, or the node is reported stalled and the rest still reported.
asio::awaitable<void> Coordinator::collect(const Window& w) {
  const auto end_tp =
      std::chrono::steady_clock::now() + std::chrono::nanoseconds(std::max<std::int64_t>(0, w.end - mono_now_ns()));
  co_await each([&](Node& n) { return collect_one(n, w, end_tp); });
  running_ = false;
  spdlog::info("coordinator: results of {} agents collected {:.3f} s after the test's end", nodes_.size(),
               seconds_since(w.end));
}

asio::awaitable<void> Coordinator::collect_one(Node& n, const Window& w, std::chrono::steady_clock::time_point end_tp) {
  bool overdue = false;
  asio::steady_timer bound(co_await asio::this_coro::executor);
  const auto arm = [&overdue, &bound, conn = n.conn](std::chrono::steady_clock::time_point at) {
    bound.expires_at(at);  // a pending wait ends with operation_aborted
    bound.async_wait([&overdue, conn](error_code e) {
      if (e) return;
      overdue = true;
      conn->close();  // the agent sees its coordinator gone and stops
    });
  };
  arm(end_tp + t_.result_drain + t_.result_grace);
  // An agent whose connections still drain what the kernels hold after the stop (a slow link,
  // big socket buffers) says so in its heartbeats: its RESULT is waited for while it does,
  // never past the agent's own drain limit (drain_max) and the grace.
  const auto drain_cap = end_tp + t_.result_drain + t_.drain_max + t_.result_grace;
  auto on_heartbeat = [&](const nlohmann::json& body) {
    if (const auto rx = body.find("rx_bytes"); rx != body.end() && rx->is_number_unsigned())
      live_progress(n, rx->get<std::uint64_t>(), w);
    const auto it = body.find("draining");
    if (it == body.end() || !it->is_boolean() || !it->get<bool>() || overdue) return;
    const auto at = std::min(drain_cap, std::chrono::steady_clock::now() + t_.result_grace);
    if (at > bound.expiry()) arm(at);
  };
  try {
    n.rec.result =
        parse_agent_result(co_await expect(n, MsgType::result, t_.idle, t_.result_frame, false, on_heartbeat));
  } catch (const ProtocolError& e) {
    n.rec.status = NodeStatus::failed;
    n.rec.error = e.what();
  } catch (const TimeoutError& e) {
    // Silent past the idle deadline, heartbeats included: the connection may still be up.
    n.rec.status = NodeStatus::stalled;
    n.rec.error = e.what();
  } catch (const std::exception& e) {
    if (overdue) {
      n.rec.status = NodeStatus::stalled;
      // The bound it was given: longer than the usual one while it said it was draining.
      n.rec.error = fmt::format("agent {}: no RESULT within {:.3g} s of the test's end (it still sent heartbeats)",
                                n.rec.name, std::chrono::duration<double>(bound.expiry() - end_tp).count());
    } else {
      n.rec.status = NodeStatus::lost;
      n.rec.error = e.what();
    }
  }
  bound.cancel();
  if (req_.sink) {
    req_.sink->node(n.rec);
    n.rec.result.reset();
  }
}

asio::awaitable<void> Coordinator::release() {
  const std::int64_t t_release = mono_now_ns();
  for (auto& n : nodes_) {
    if (n.conn && n.conn->is_open()) n.conn->send(MsgType::bye, nlohmann::json::object());
  }
  co_await each([](Node& n) -> asio::awaitable<void> {
    if (n.conn) co_await n.conn->flush();
  });
  spdlog::info("coordinator: {} agents released in {:.3f} s", nodes_.size(), seconds_since(t_release));
}

void Coordinator::live_progress(const Node& n, std::uint64_t bytes, const Window& w) {
  if (!req_.progress) return;
  const std::int64_t now = mono_now_ns();
  Live& l = live_[&n];
  const std::int64_t since = l.t > 0 ? l.t : w.start;  // the first count runs from the start
  if (now > since && bytes >= l.bytes)
    l.mb_per_s = static_cast<double>(bytes - l.bytes) / 1e6 / (static_cast<double>(now - since) / 1e9);
  l.bytes = bytes;
  l.t = now;
  if (now - last_progress_ns_ < 900'000'000) return;  // once a second, whichever node spoke last
  last_progress_ns_ = now;
  double total = 0;
  for (const auto& [node, v] : live_) total += v.mb_per_s;
  req_.progress(std::max(0.0, static_cast<double>(now - w.start) / 1e9), static_cast<double>(w.end - w.start) / 1e9,
                total);
}

}  // namespace coord
}  // namespace fabperf
