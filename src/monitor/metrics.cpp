// The Prometheus text exposition (format 0.0.4; OpenMetrics-compatible names in base units) of
// the monitor's state, and the HTTP request handling around it. Pure: the listener is http.cpp.
#include <fabperf/monitor/monitor.hpp>

#include <fmt/format.h>
#include <optional>

namespace fabperf::monitor {
namespace {

std::string escape(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (const char ch : v) {
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '"') {
      out += "\\\"";
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
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

// One metric family: HELP and TYPE once, then its samples; nothing at all when it has none.
class Family {
 public:
  Family(std::string name, const char* type, const char* help) : name_(std::move(name)), type_(type), help_(help) {}
  void add(const Labels& ls, double v) { samples_ += fmt::format("{}{} {}\n", name_, label_text(ls), v); }
  void add(const Labels& ls, std::uint64_t v) { samples_ += fmt::format("{}{} {}\n", name_, label_text(ls), v); }
  void render(std::string& out) const {
    if (samples_.empty()) return;
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, help_, name_, type_);
    out += samples_;
  }

 private:
  std::string name_;
  const char* type_;
  const char* help_;
  std::string samples_;
};

}  // namespace

std::string render_metrics(const MonitorState& s) {
  const auto& cfg = s.config();
  const std::string transport(to_string(cfg.probe.transport()));
  const std::string direction(direction_of(cfg.probe.test()));
  Family tput("fabperf_throughput_bytes_per_second", "gauge",
              "Payload throughput of the last bandwidth probe of the pair on the link.");
  Family base("fabperf_baseline_bytes_per_second", "gauge",
              "The pair's baseline throughput on the link (median of its first probes, or the acceptance result).");
  Family alert("fabperf_drift_alert", "gauge",
               "1 while the last throughput is more than the drift threshold below the baseline, else 0.");
  Family lp50("fabperf_latency_under_load_p50_seconds", "gauge",
              "Median ping round trip from client to server during the last bandwidth probe.");
  Family lp99("fabperf_latency_under_load_p99_seconds", "gauge",
              "99th percentile ping round trip from client to server during the last bandwidth probe.");
  Family retr("fabperf_retransmits_total", "counter",
              "TCP segments retransmitted by the pair's connections during bandwidth probes.");
  Family probes("fabperf_probes_total", "counter", "Probes of the pair on the link, by kind.");
  Family fails("fabperf_probe_failures_total", "counter",
               "Probes of the pair on the link that failed or could not run (agent down), by kind.");
  Family last("fabperf_last_probe_timestamp_seconds", "gauge",
              "Unix time of the pair's last successful probe on the link, by kind.");
  Family p50("fabperf_latency_p50_seconds", "gauge",
             "Median round trip of the last latency probe (one small rpc at a time).");
  Family p99("fabperf_latency_p99_seconds", "gauge",
             "99th percentile round trip of the last latency probe (one small rpc at a time).");
  Family speed("fabperf_link_speed_bytes_per_second", "gauge",
               "Negotiated speed of the host's interface on the link plane (bits/s / 8), as seen in the last probe.");
  Family mtu("fabperf_link_mtu_bytes", "gauge",
             "MTU of the host's interface on the link plane, as seen in the last probe.");
  Family nic("fabperf_nic_errors_total", "counter",
             "Receive and transmit errors and drops of the interface within probe windows.");
  Family bond("fabperf_bond_member_share_ratio", "gauge",
              "A bond member's share of the bond's bytes in the last probe, by direction.");
  Family up("fabperf_agent_up", "gauge",
            "1 when the host's agent answered its last probe (or none has failed yet), 0 while it is backed off.");
  Family rot("fabperf_monitor_rotations_total", "counter",
             "Completed rotations (every pair probed on every link once).");

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
        if (p.bytes_per_s) tput.add(pl, *p.bytes_per_s);
        if (p.baseline.bytes_per_s) base.add(pl, *p.baseline.bytes_per_s);
        alert.add(pl, std::uint64_t{p.drift_alert ? 1u : 0u});
        if (p.loaded_p50_s) lp50.add(pl, *p.loaded_p50_s);
        if (p.loaded_p99_s) lp99.add(pl, *p.loaded_p99_s);
        retr.add(pl, p.retransmits_total);
        for (const auto k : {ProbeKind::bandwidth, ProbeKind::latency}) {
          const auto i = static_cast<std::size_t>(k);
          Labels kl = ll;
          kl.emplace_back("kind", to_string(k));
          probes.add(kl, p.probes_total[i]);
          fails.add(kl, p.failures_total[i]);
          if (p.last_probe_s[i]) last.add(kl, *p.last_probe_s[i]);
        }
        if (p.latency_p50_s) p50.add(ll, *p.latency_p50_s);
        if (p.latency_p99_s) p99.add(ll, *p.latency_p99_s);
      }
    }
  }
  for (std::uint32_t h = 0; h < n; ++h) {
    for (std::uint32_t l = 0; l < cfg.link_names.size(); ++l) {
      const auto& hl = s.host_link(h, l);
      if (hl.interface.empty()) continue;
      const Labels ls{{"host", cfg.hosts[h].name}, {"link", cfg.link_names[l]}, {"interface", hl.interface}};
      if (hl.speed_bps && *hl.speed_bps > 0) speed.add(ls, static_cast<double>(*hl.speed_bps) / 8.0);
      if (hl.mtu && *hl.mtu > 0) mtu.add(ls, static_cast<std::uint64_t>(*hl.mtu));
      nic.add(ls, hl.nic_errors_total);
      for (const auto& b : hl.bonds) {
        for (const auto& [dir, v] : {std::pair<const char*, double>{"tx", b.tx_ratio}, {"rx", b.rx_ratio}}) {
          bond.add({{"host", cfg.hosts[h].name},
                    {"link", cfg.link_names[l]},
                    {"bond", b.bond},
                    {"member", b.member},
                    {"direction", dir}},
                   v);
        }
      }
    }
    up.add({{"host", cfg.hosts[h].name}}, std::uint64_t{s.agent_up(h) ? 1u : 0u});
  }
  rot.add({}, s.rotations());

  std::string out;
  for (const Family* f : {&tput, &base, &alert, &lp50, &lp99, &retr, &probes, &fails, &last, &p50, &p99, &speed, &mtu,
                          &nic, &bond, &up, &rot}) {
    f->render(out);
  }
  return out;
}

std::size_t max_series(const MonitorConfig& cfg, std::size_t max_bond_members) {
  const std::size_t n = cfg.hosts.size();
  const std::size_t l = cfg.link_names.size();
  const std::size_t pairs = n * (n - 1) * l;
  // Per pair and link: 6 bandwidth families, 3 families x 2 kinds, 2 latency families.
  return 14 * pairs + (3 + 2 * max_bond_members) * n * l + n + 1;
}

HttpReply handle_http(std::string_view method, std::string_view target, const std::function<std::string()>& render) {
  HttpReply r;
  r.content_type = "text/plain; charset=utf-8";
  const std::string_view path = target.substr(0, target.find('?'));
  if (method != "GET") {
    r.status = 405;
    r.allow = "GET";
    r.body = fmt::format("method {} not allowed: only GET /metrics\n", method.substr(0, 32));
    return r;
  }
  if (path != "/metrics") {
    r.status = 404;
    r.body = "not found: the metrics are at /metrics\n";
    return r;
  }
  r.content_type = kExpositionContentType;
  r.body = render();
  return r;
}

}  // namespace fabperf::monitor
