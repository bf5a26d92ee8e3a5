// The Prometheus text exposition (format 0.0.4; OpenMetrics-compatible names in base units) of
// the monitor's state, and the HTTP request handling around it. Pure: the listener is http.cpp.
#include <fabperf/monitor/monitor.hpp>

#include <fmt/format.h>
#include <array>
#include <optional>

namespace fabperf::monitor {
namespace {

std::string escape(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (const char ch : v) {
    switch (ch) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += ch;
    }
  }
  return out;
}

using Labels = std::vector<std::pair<std::string_view, std::string>>;

std::string label_text(const Labels& ls) {
  std::string s;
  for (const auto& [k, v] : ls) s += fmt::format("{}{}=\"{}\"", s.empty() ? "" : ",", k, escape(v));
  return s.empty() ? s : "{" + s + "}";
}

// The families, in exposition order. Names ending in _total are counters, the others gauges.
namespace fam {
enum Id { tput, base, alert, lp50, lp99, retr, probes, fails, last, p50, p99, speed, mtu, nic, bond, up, rot, count };
}
constexpr std::pair<const char*, const char*> kFamilies[fam::count] = {
    {"fabperf_throughput_bytes_per_second", "Payload throughput of the last bandwidth probe of the pair on the link."},
    {"fabperf_baseline_bytes_per_second",
     "The pair's baseline throughput on the link (median of its first probes, or the acceptance result)."},
    {"fabperf_drift_alert", "1 while the last throughput is more than the drift threshold below the baseline, else 0."},
    {"fabperf_latency_under_load_p50_seconds",
     "Median ping round trip from client to server during the last bandwidth probe."},
    {"fabperf_latency_under_load_p99_seconds",
     "99th percentile ping round trip from client to server during the last bandwidth probe."},
    {"fabperf_retransmits_total", "TCP segments retransmitted by the pair's connections during bandwidth probes."},
    {"fabperf_probes_total", "Probes of the pair on the link, by kind."},
    {"fabperf_probe_failures_total",
     "Probes of the pair on the link that failed or could not run (agent down), by kind."},
    {"fabperf_last_probe_timestamp_seconds", "Unix time of the pair's last successful probe on the link, by kind."},
    {"fabperf_latency_p50_seconds", "Median round trip of the last latency probe (one small rpc at a time)."},
    {"fabperf_latency_p99_seconds", "99th percentile round trip of the last latency probe (one small rpc at a time)."},
    {"fabperf_link_speed_bytes_per_second",
     "Negotiated speed of the host's interface on the link plane (bits/s / 8), as seen in the last probe."},
    {"fabperf_link_mtu_bytes", "MTU of the host's interface on the link plane, as seen in the last probe."},
    {"fabperf_nic_errors_total", "Receive and transmit errors and drops of the interface within probe windows."},
    {"fabperf_bond_member_share_ratio", "A bond member's share of the bond's bytes in the last probe, by direction."},
    {"fabperf_agent_up",
     "1 when the host's agent answered its last probe (or none has failed yet), 0 while it is backed off."},
    {"fabperf_monitor_rotations_total", "Completed rotations (every pair probed on every link once)."},
};

// The samples of each family; text() gives HELP and TYPE once before them, nothing for a family
// that has none.
class Exposition {
 public:
  template <typename V>
  void add(fam::Id f, const Labels& ls, V v) {
    samples_[f] += fmt::format("{}{} {}\n", kFamilies[f].first, label_text(ls), v);
  }
  [[nodiscard]] std::string text() const {
    std::string out;
    for (std::size_t f = 0; f < std::size(kFamilies); ++f) {
      if (samples_[f].empty()) continue;
      const auto [name, help] = kFamilies[f];
      const char* type = std::string_view(name).ends_with("_total") ? "counter" : "gauge";
      out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}", name, help, name, type, samples_[f]);
    }
    return out;
  }

 private:
  std::array<std::string, fam::count> samples_;
};

}  // namespace

std::string render_metrics(const MonitorState& s) {
  const auto& cfg = s.config();
  const std::string transport(to_string(cfg.probe.transport()));
  const std::string direction(direction_of(cfg.probe.test()));
  Exposition x;

  const auto n = static_cast<std::uint32_t>(cfg.hosts.size());
  for (std::uint32_t c = 0; c < n; ++c) {
    for (std::uint32_t v = 0; v < n; ++v) {
      if (c == v) continue;
      for (std::uint32_t l = 0; l < cfg.link_names.size(); ++l) {
        const auto& p = s.pair(c, v, l);
        // The pair's labels; the bandwidth series add the direction, the probe counts the kind.
        const Labels ll{{"client", cfg.hosts[c].name},
                        {"server", cfg.hosts[v].name},
                        {"link", cfg.link_names[l]},
                        {"transport", transport}};
        Labels pl = ll;
        pl.emplace_back("direction", direction);
        if (p.bytes_per_s) x.add(fam::tput, pl, *p.bytes_per_s);
        if (p.baseline.bytes_per_s) x.add(fam::base, pl, *p.baseline.bytes_per_s);
        x.add(fam::alert, pl, std::uint64_t{p.drift_alert ? 1u : 0u});
        if (const auto& t = p.p50_s[0]) x.add(fam::lp50, pl, *t);  // [0] bandwidth, [1] latency (ProbeKind)
        if (const auto& t = p.p99_s[0]) x.add(fam::lp99, pl, *t);
        x.add(fam::retr, pl, p.retransmits_total);
        for (const auto k : {ProbeKind::bandwidth, ProbeKind::latency}) {
          const auto i = static_cast<std::size_t>(k);
          Labels kl = ll;
          kl.emplace_back("kind", to_string(k));
          x.add(fam::probes, kl, p.probes_total[i]);
          x.add(fam::fails, kl, p.failures_total[i]);
          if (p.last_probe_s[i]) x.add(fam::last, kl, *p.last_probe_s[i]);
        }
        if (const auto& t = p.p50_s[1]) x.add(fam::p50, ll, *t);
        if (const auto& t = p.p99_s[1]) x.add(fam::p99, ll, *t);
      }
    }
  }
  for (std::uint32_t h = 0; h < n; ++h) {
    for (std::uint32_t l = 0; l < cfg.link_names.size(); ++l) {
      const auto& hl = s.host_link(h, l);
      if (hl.interface.empty()) continue;
      const Labels ls{{"host", cfg.hosts[h].name}, {"link", cfg.link_names[l]}, {"interface", hl.interface}};
      if (hl.speed_bps > 0) x.add(fam::speed, ls, static_cast<double>(hl.speed_bps) / 8.0);
      if (hl.mtu > 0) x.add(fam::mtu, ls, static_cast<std::uint64_t>(hl.mtu));
      x.add(fam::nic, ls, hl.nic_errors_total);
      for (const auto& b : hl.bonds) {
        for (const auto& [dir, v] : {std::pair<const char*, double>{"tx", b.tx_ratio}, {"rx", b.rx_ratio}}) {
          Labels bl(ls.begin(), ls.begin() + 2);  // host and link, then the member's
          bl.insert(bl.end(), {{"bond", b.bond}, {"member", b.member}, {"direction", dir}});
          x.add(fam::bond, bl, v);
        }
      }
    }
    x.add(fam::up, {{"host", cfg.hosts[h].name}}, std::uint64_t{s.agent_up(h) ? 1u : 0u});
  }
  x.add(fam::rot, {}, s.rotations());

  return x.text();
}

std::size_t max_series(const MonitorConfig& cfg, std::size_t max_bond_members) {
  const std::size_t n = cfg.hosts.size();
  const std::size_t l = cfg.link_names.size();
  const std::size_t pairs = n * (n - 1) * l;
  // Per pair and link: 6 bandwidth families, 3 families x 2 kinds, 2 latency families.
  return 14 * pairs + (3 + 2 * max_bond_members) * n * l + n + 1;
}

HttpReply handle_http(std::string_view method, std::string_view target, const std::function<std::string()>& render) {
  // {status, content type, body, allow}
  if (method != "GET")
    return {405, kPlainText, fmt::format("method {} not allowed: only GET /metrics\n", method.substr(0, 32)), "GET"};
  if (target.substr(0, target.find('?')) != "/metrics")
    return {404, kPlainText, "not found: the metrics are at /metrics\n", ""};
  return {200, kExpositionContentType, render(), ""};
}

}  // namespace fabperf::monitor
