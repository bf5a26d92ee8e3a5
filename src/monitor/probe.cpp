// Probes through the real coordinator: one run_test per job, its report turned into samples.
#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/stop.hpp>
#include <fabperf/monitor/monitor.hpp>
#include <fabperf/report/report.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <map>

namespace fabperf::monitor {
namespace {

double unix_now() {
  return static_cast<double>(wall_now_ns()) / 1e9;
}

// The interface that carried the node's flows: the busiest one that is not loopback.
const LinkReport* busiest(const NodeReport& n) {
  const auto load = [](const LinkReport& l) {
    return l.kind == "loopback" ? -1.0 : std::max(l.payload_tx_mb_per_s, l.payload_rx_mb_per_s);
  };
  const auto it = std::ranges::max_element(n.links, {}, load);
  return it == n.links.end() || load(*it) < 0 ? nullptr : &*it;
}

class RunTestProber : public Prober {
 public:
  RunTestProber(const MonitorConfig& cfg, auth::Key key) : cfg_(cfg), key_(std::move(key)) {}

  JobResult run(const Job& job) override {
    RunRequest req;
    req.spec = job.kind == ProbeKind::bandwidth ? cfg_.probe : cfg_.latency;
    req.key = key_;
    req.connect_timeout = cfg_.connect_timeout;
    req.coordinator_name = "fabperf-monitor";
    // Sampling: a handful of intervals per probe is enough for the link counters.
    req.interval = std::max<std::chrono::nanoseconds>(std::chrono::milliseconds(100), req.spec.time() / 4);
    set_host_pairs(req, job.pairs, [&](std::uint32_t h) {
      HostPort hp = cfg_.hosts[h].hp;
      if (!hp.links.empty()) hp.links = {hp.links.at(job.link)};  // only this link plane
      return hp;
    });
    JobResult r;
    try {
      const RunRecord rec = run_test(req);
      r = job_result_from_report(cfg_, job, compute_report(rec), unix_now());
      r.interrupted = rec.interrupted;
    } catch (const Error& e) {
      r = failed_job(cfg_, job, e.what(), unix_now());
      r.interrupted = dynamic_cast<const Interrupted*>(&e) != nullptr;
    }
    // A stop request that came during a probe ends the monitor after it.
    r.interrupted = r.interrupted || stop::stopped();
    return r;
  }

 private:
  const MonitorConfig& cfg_;
  auth::Key key_;
};

}  // namespace

std::unique_ptr<Prober> make_prober(const MonitorConfig& cfg, auth::Key key) {
  return std::make_unique<RunTestProber>(cfg, std::move(key));
}

std::vector<std::uint32_t> Job::hosts() const {
  std::vector<std::uint32_t> out;
  for (const auto& [c, s] : pairs) {
    for (const auto h : {c, s}) {
      if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
    }
  }
  return out;
}

JobResult failed_job(const MonitorConfig& cfg, const Job& job, const std::string& error, double wall_s) {
  JobResult r{job, wall_s, {}, {}, {}, false};
  for (const auto& [c, s] : job.pairs) r.pairs.push_back({c, s, false, error, {}, {}, {}, 0});
  // The coordinator's errors name the agent (host:port) they could not reach.
  for (const auto h : job.hosts()) {
    if (error.find(cfg.hosts[h].hp.str()) != std::string::npos) r.unreachable.push_back(h);
  }
  return r;
}

JobResult job_result_from_report(const MonitorConfig& cfg, const Job& job, const Report& rep, double wall_s) {
  JobResult r{job, wall_s, {}, {}, {}, false};
  std::map<std::string, std::uint32_t> by_name;
  for (std::uint32_t i = 0; i < cfg.hosts.size(); ++i) by_name[cfg.hosts[i].hp.str()] = i;
  std::map<std::uint32_t, const NodeReport*> node_of_host;
  for (const auto& n : rep.nodes) {
    if (const auto it = by_name.find(n.name); it != by_name.end()) node_of_host[it->second] = &n;
  }
  // Why a node of the pair has no figures ("" when it has).
  const auto node_error = [&](std::uint32_t h) -> std::string {
    const auto it = node_of_host.find(h);
    if (it == node_of_host.end()) return "the node is missing from the result";
    const NodeReport& n = *it->second;
    if (n.status == NodeStatus::ok && !n.aborted) return {};
    return fmt::format("{} {}: {}", n.name, to_string(n.status), n.error.empty() ? std::string("aborted") : n.error);
  };
  for (const auto& [c, s] : job.pairs) {
    PairSample& p = r.pairs.emplace_back(PairSample{c, s, false, {}, {}, {}, {}, 0});
    if (p.error = node_error(c); p.error.empty()) p.error = node_error(s);
    if (!p.error.empty()) continue;
    // The indexes named first: clang 14 cannot capture a structured binding in a lambda.
    const std::uint32_t ci = node_of_host.at(c)->index, si = node_of_host.at(s)->index;
    const auto pr =
        std::ranges::find_if(rep.pairs, [&](const PairReport& x) { return x.client == ci && x.server == si; });
    if (pr == rep.pairs.end()) {
      p.error = "no figure for the pair in the result";
      continue;
    }
    p.ok = true;
    p.retransmits = pr->retrans;
    const NodeReport& client = *node_of_host.at(c);
    if (job.kind == ProbeKind::bandwidth) {
      p.bytes_per_s = pr->tput.mb_per_s * 1e6;  // what the receivers read (docs/methodology.md)
      if (client.delay && client.delay->count > 0) {
        p.p50_s = client.delay->p50_us / 1e6;
        p.p99_s = client.delay->p99_us / 1e6;
      }
    } else if (client.latency && client.latency->count > 0) {
      p.p50_s = client.latency->p50_us / 1e6;
      p.p99_s = client.latency->p99_us / 1e6;
    } else {
      p.ok = false;
      p.error = "the latency probe completed no round trip";
    }
  }
  for (const auto& [h, n] : node_of_host) {
    const LinkReport* l = busiest(*n);
    if (!l) continue;
    LinkSample ls{h,
                  l->name,
                  l->speed_mbps > 0 ? l->speed_mbps * 1000000 : -1,
                  l->mtu,
                  l->tx_errors + l->rx_errors + l->tx_dropped + l->rx_dropped,
                  {}};
    for (const auto& b : n->bonds) {
      if (b.name != l->name) continue;
      for (const auto& m : b.members)
        ls.bonds.push_back({b.name, m.name, m.tx_share_pct / 100.0, m.rx_share_pct / 100.0});
    }
    r.links.push_back(std::move(ls));
  }
  return r;
}

}  // namespace fabperf::monitor
