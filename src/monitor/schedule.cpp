// The monitor's pure decisions: which probe runs next and when (rotation under the duty cap),
// when an unreachable agent is tried again, and whether a value has drifted.
#include <fabperf/core/error.hpp>
#include <fabperf/monitor/monitor.hpp>
#include <fabperf/plan/plan.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace fabperf::monitor {

std::string_view to_string(ProbeKind k) {
  return k == ProbeKind::bandwidth ? "bandwidth" : "latency";
}

Schedule::Schedule(std::size_t hosts, std::size_t links, double max_duty, double latency_interval_s)
    : links_(links), duty_(max_duty), latency_interval_(latency_interval_s), ready_(hosts * links, 0.0) {
  if (hosts < 2 || links < 1 || !(max_duty > 0 && max_duty <= 1))
    throw UsageError("monitor schedule: needs 2+ hosts, 1+ links, duty in (0, 1]");
  // All-pairs steps (circle method) with as many disjoint pairs per step as fit: consecutive
  // bandwidth targets then involve different hosts where possible, and a latency step measures
  // every node against exactly one peer (its latency is that pair's).
  plan::PatternParams pp;
  pp.pattern = plan::Pattern::all_pairs;
  pp.concurrent_pairs = static_cast<std::uint32_t>(std::max<std::size_t>(1, hosts / 2));
  const auto steps = plan::make_steps(hosts, pp);
  for (std::uint32_t l = 0; l < links; ++l) {
    for (const auto& st : steps) {
      Job lat{ProbeKind::latency, l, {}};
      for (const auto& f : st.flows) {
        targets_.push_back({ProbeKind::bandwidth, l, {{f.client, f.server}}});
        lat.pairs.emplace_back(f.client, f.server);
      }
      latency_.push_back(std::move(lat));
    }
  }
  done_.assign(targets_.size(), false);
}

Schedule::Next Schedule::next(double now_s) const {
  if (latency_pos_ > 0) return {latency_[latency_pos_], now_s};
  std::size_t best = targets_.size();
  double best_at = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < targets_.size(); ++i) {
    if (done_[i]) continue;
    const auto& t = targets_[i];
    const auto [c, s] = t.pairs.front();
    const double at = std::max({now_s, ready_at(c, t.link), ready_at(s, t.link)});
    if (at < best_at) {
      best_at = at;
      best = i;
    }
  }
  const double lat_at = std::max(now_s, latency_due_);
  if (lat_at <= best_at) return {latency_.front(), lat_at};
  return {targets_[best], best_at};
}

void Schedule::done(const Job& job, double start_s, double end_s) {
  if (job.kind == ProbeKind::latency) {
    if (latency_pos_ == 0) latency_due_ = start_s + latency_interval_;
    if (++latency_pos_ == latency_.size()) {
      latency_pos_ = 0;
      ++latency_rounds_;
    }
    return;
  }
  for (std::size_t i = 0; i < targets_.size(); ++i) {
    if (done_[i] || !(targets_[i] == job)) continue;
    done_[i] = true;
    // D seconds of probe: the host link rests until D / duty after the start.
    const double next = start_s + std::max(0.0, end_s - start_s) / duty_;
    for (const auto h : {job.pairs.front().first, job.pairs.front().second}) {
      auto& r = ready_.at(h * links_ + job.link);
      r = std::max(r, next);
    }
    break;
  }
  if (std::all_of(done_.begin(), done_.end(), [](bool b) { return b; })) {
    ++rotations_;
    done_.assign(targets_.size(), false);
  }
}

Backoff::Backoff(std::size_t hosts, double base_s, double cap_s)
    : base_(base_s), cap_(cap_s), failures_(hosts, 0), retry_(hosts, 0) {}

void Backoff::failed(std::uint32_t host, double now_s) {
  const auto k = ++failures_.at(host);
  const double wait = std::min(cap_, base_ * std::pow(2.0, std::min<double>(k - 1, 60)));
  retry_.at(host) = now_s + wait;
}
void Backoff::succeeded(std::uint32_t host) {
  failures_.at(host) = 0;
  retry_.at(host) = 0;
}

DriftEval evaluate_drift(double value, double baseline, double pct) {
  DriftEval e;
  e.threshold = baseline * (1.0 - pct / 100.0);
  e.below_pct = baseline > 0 ? (baseline - value) / baseline * 100.0 : 0.0;
  e.alert = baseline > 0 && value < e.threshold;
  return e;
}

}  // namespace fabperf::monitor
