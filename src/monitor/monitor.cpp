// The monitor's loop and its pure decisions: which probe runs next and when (rotation under the
// duty cap), when an unreachable agent is tried again, and whether a value has drifted. The loop
// asks the schedule what runs next, waits for it, skips the pairs of agents that are backed off,
// probes, applies the samples to the state under its lock, and reports.
#include <fabperf/core/error.hpp>
#include <fabperf/monitor/monitor.hpp>
#include <fabperf/plan/plan.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace fabperf::monitor {

using nlohmann::json;

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BondShare, bond, member, tx_ratio, rx_ratio)  // keys: the field names

json to_json(const JobResult& r, const MonitorConfig& cfg) {
  const auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json pairs = json::array();
  for (const auto& p : r.pairs) {
    pairs.push_back({{"client", cfg.hosts.at(p.client).name},
                     {"server", cfg.hosts.at(p.server).name},
                     {"ok", p.ok},
                     {"error", p.error},
                     {"bytes_per_second", opt(p.bytes_per_s)},
                     {"p50_seconds", opt(p.p50_s)},
                     {"p99_seconds", opt(p.p99_s)},
                     {"retransmits", p.retransmits}});
  }
  json links = json::array();
  for (const auto& l : r.links) {
    links.push_back({{"host", cfg.hosts.at(l.host).name},
                     {"interface", l.interface},
                     {"speed_bits_per_second", l.speed_bps > 0 ? json(l.speed_bps) : json(nullptr)},
                     {"mtu", l.mtu},
                     {"errors", l.errors},
                     {"bonds", l.bonds}});
  }
  return {{"kind", std::string(to_string(r.job.kind))},
          {"link", cfg.link_names.at(r.job.link)},
          {"transport", std::string(to_string(cfg.probe.transport()))},
          {"direction", std::string(direction_of(cfg.probe.test()))},
          {"time_unix_s", r.wall_s},
          {"pairs", pairs},
          {"links", links}};
}

namespace {

using HostPair = std::pair<std::uint32_t, std::uint32_t>;

// A job's pairs split by whether an agent of theirs is backed off: those pairs are not tried
// (they fail at once, so its series show it).
struct Split {
  Job runnable;
  std::vector<HostPair> skipped;
  std::string why;  // the first backed-off agent, for the skipped pairs' error
  double due{0};    // the first backed-off agent's next attempt, a second from now at most
};

Split split_backed_off(const Job& job, const Backoff& backoff, const MonitorConfig& cfg, double now) {
  Split out{{job.kind, job.link, {}}, {}, {}, now + 1.0};
  for (const auto& pr : job.pairs) {
    std::string down;
    for (const auto h : {pr.first, pr.second}) {
      if (!backoff.blocked(h, now)) continue;
      out.due = std::min(out.due, backoff.retry_at(h));
      if (down.empty())
        down = fmt::format("agent {} ({}) is unreachable; next attempt in {:.1f} s", cfg.hosts[h].name,
                           cfg.hosts[h].hp.str(), backoff.retry_at(h) - now);
    }
    if (down.empty()) {
      out.runnable.pairs.push_back(pr);
    } else {
      out.skipped.push_back(pr);
      if (out.why.empty()) out.why = down;
    }
  }
  return out;
}

// Back-off: the agents the error named wait longer each time; the others of a job that ran are
// fine. Under the state's lock; returns the lines to log.
std::vector<std::string> update_agents(const MonitorConfig& cfg, const Job& ran, const JobResult& result,
                                       bool job_failed, double end, Backoff& backoff, MonitorState& state) {
  std::vector<std::string> lines;
  for (const auto h : ran.hosts()) {
    const bool named = std::find(result.unreachable.begin(), result.unreachable.end(), h) != result.unreachable.end();
    const bool was_down = !state.agent_up(h);
    if (named) {
      backoff.failed(h, end);
      lines.push_back(fmt::format("agent {} ({}) unreachable ({} in a row); next attempt in {:.1f} s",
                                  cfg.hosts[h].name, cfg.hosts[h].hp.str(), backoff.failures(h),
                                  backoff.retry_at(h) - end));
    } else if (!job_failed || std::any_of(result.pairs.begin(), result.pairs.end(), [&](const PairSample& p) {
                 return p.ok && (p.client == h || p.server == h);
               })) {
      backoff.succeeded(h);
      if (was_down)
        lines.push_back(fmt::format("agent {} ({}) answers again", cfg.hosts[h].name, cfg.hosts[h].hp.str()));
    }
    state.set_agent_up(h, backoff.failures(h) == 0);
  }
  return lines;
}

}  // namespace

int run_monitor(const MonitorConfig& cfg, Prober& prober, MonitorClock& clock, MonitorState& state, std::mutex& mu,
                const RunOptions& opts) {
  // --once: one latency round, then the rotation; a second latency round is never due.
  const double latency_interval =
      opts.once ? std::numeric_limits<double>::infinity() : std::chrono::duration<double>(cfg.latency_interval).count();
  Schedule sched(cfg.hosts.size(), cfg.link_names.size(), cfg.max_duty, latency_interval);
  Backoff backoff(cfg.hosts.size(), 1.0, std::chrono::duration<double>(cfg.max_backoff).count());
  const auto log = [&](const std::string& line) {
    if (opts.on_log) opts.on_log(line);
  };
  bool failed = false;
  for (;;) {
    if (opts.once && sched.rotations() >= 1 && sched.latency_rounds() >= 1) break;
    const auto next = sched.next(clock.now());
    if (!clock.sleep_until(next.at_s)) break;
    const Job& job = next.job;
    const double start = clock.now();
    const Split split = split_backed_off(job, backoff, cfg, start);
    const bool ran = !split.runnable.pairs.empty();
    JobResult result;
    if (ran) {
      result = prober.run(split.runnable);
      if (result.interrupted) break;
    }
    const double end = clock.now();
    result.job = job;
    if (!ran) result.wall_s = clock.wall();
    for (auto& p : failed_job(cfg, {job.kind, job.link, split.skipped}, split.why, 0).pairs)
      result.pairs.push_back(std::move(p));
    sched.done(job, start, ran ? end : start);

    const bool job_failed = !std::ranges::all_of(result.pairs, &PairSample::ok);
    failed = failed || job_failed;
    bool baselines_changed = false;
    std::vector<std::string> lines;
    json baselines;
    {
      std::lock_guard<std::mutex> lock(mu);
      lines = update_agents(cfg, split.runnable, result, job_failed, end, backoff, state);
      for (auto& l : state.apply(result, baselines_changed)) lines.push_back(std::move(l));
      while (state.rotations() < sched.rotations()) state.count_rotation();
      if (baselines_changed) baselines = state.baselines_json();
    }
    for (const auto& l : lines) log(l);
    if (job_failed && ran) {
      for (const auto& p : result.pairs) {
        // A pair skipped for a backed-off agent: its back-off line said so once, not per job.
        if (!p.ok && std::ranges::count(split.skipped, HostPair(p.client, p.server)) == 0) {
          log(fmt::format("probe failed: {} {}->{} {}: {}", to_string(job.kind), cfg.hosts[p.client].name,
                          cfg.hosts[p.server].name, cfg.link_names[job.link], p.error));
        }
      }
    }
    // The probe log holds what was probed; a job that could not run only moved the series.
    if (ran && opts.on_result) opts.on_result(to_json(result, cfg));
    if (baselines_changed && opts.on_baselines) opts.on_baselines(baselines);
    // Nothing was probed (every pair waits for a backed-off agent): the schedule may offer the next
    // such job at once, so wait for the first agent's next attempt, a second at most (the other
    // agents' jobs stay on time). Without it one agent down spun the loop (378,707 log lines in 6 s).
    if (!ran && split.due > start && !clock.sleep_until(split.due)) break;
  }
  if (failed) return 3;
  std::lock_guard<std::mutex> lock(mu);
  return state.active_alerts() > 0 ? 1 : 0;
}

// ---- schedule, back-off, drift ----
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
    const double at = std::max({now_s, ready_.at(c * links_ + t.link), ready_.at(s * links_ + t.link)});
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
