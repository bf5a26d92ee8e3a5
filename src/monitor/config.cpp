// The monitor's config file (TOML, toml++). Probe settings come from the one settings table
// (include/fabperf/core/settings.hpp) exactly as plan files read them; the monitor's own keys are
// listed once, in read_monitor. Every mistake is reported as FILE:LINE: field 'x': problem.
#include <fabperf/core/error.hpp>
#include <fabperf/core/settings.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/monitor/monitor.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <set>

#include <toml++/toml.h>

#include "plan/toml_reader.hpp"

namespace fabperf::monitor {
namespace {

using Ctx = TomlReader;

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The [probe] or [latency] table (`name`) through the settings table, as plan files do.
TestSpec spec_from_table(const Ctx& c, const toml::table& root, const char* name, const toml::node* mon, SpecParams p) {
  const auto* where = root.get(name);
  if (where) {
    for (const auto& [key, v] : c.table(*where, name)) {
      const std::string k(key.str());
      const Setting* st = find_setting(k);
      if (!st)
        c.fail(&v, k, "unknown setting (the names of 'fabperf run' options, e.g. time, buffsize, threads, mode)");
      c.apply_setting(*st, v, p);
    }
  }
  return c.wrap(where ? where : mon, "", [&] {
    refuse_inapplicable(p);
    return TestSpec::make(p);
  });
}

std::chrono::nanoseconds seconds_of(const Ctx& c, const toml::node& n, std::string_view field, double lo_s,
                                    double hi_s) {
  const auto d = c.wrap(&n, field, [&] { return parse_duration(c.scalar_text(n, field), "value"); });
  const double s = std::chrono::duration<double>(d).count();
  if (!(s >= lo_s && s <= hi_s)) c.fail(&n, field, fmt::format("{} s is out of range ({}..{} s)", s, lo_s, hi_s));
  return d;
}

// [monitor] listen: HOST:PORT or [IPV6]:PORT, read by core's parser, but with a port and no @links.
void read_listen(const Ctx& c, const toml::node* n, MonitorConfig& cfg) {
  const std::string s = c.str(*n, "listen");
  const auto colon = s.rfind(':');  // the port's, after the host ("]:" after an IPv6 address)
  const auto host_end = s.starts_with('[') ? s.find("]:") + 1 : s.find(':');
  if (colon == std::string::npos || host_end != colon || s.find('@') != std::string::npos)
    c.fail(n, "listen", fmt::format("'{}': expected HOST:PORT or [IPV6]:PORT", s));
  if (colon == 0 || s.starts_with("[]"))
    c.fail(n, "listen", fmt::format("'{}': no host (give 127.0.0.1:PORT, or an address with listen-public = true)", s));
  const HostPort hp = c.wrap(n, "listen", [&] { return parse_host_port(s, "listen"); });
  cfg.listen_host = hp.host;
  cfg.listen_port = hp.port;
}

// [monitor], all but link-names (that needs the hosts).
void read_monitor(const Ctx& c, const toml::node* mon, const toml::table& m, MonitorConfig& cfg) {
  // The monitor's own keys: the refusal of an unknown one lists them (docs/monitor.md explains each).
  c.known_keys(m,
               {"listen", "listen-public", "state-dir", "max-duty", "latency-interval", "drift-percent",
                "baseline-probes", "acceptance", "link-names", "max-backoff", "connect-timeout"},
               "unknown field of [monitor]");
  if (const auto* n = m.get("listen")) read_listen(c, n, cfg);
  if (const auto* n = m.get("listen-public")) cfg.listen_public = c.boolean(*n, "listen-public");
  if (!is_loopback(cfg.listen_host) && !cfg.listen_public) {
    c.fail(m.get("listen"), "listen",
           fmt::format("{} is not a loopback address: metrics would be readable from the network; set listen-public = "
                       "true to allow it",
                       cfg.listen_host));
  }
  const auto* sd = m.get("state-dir");
  if (!sd) c.fail(mon, "state-dir", "missing: the folder that keeps the baselines across restarts");
  cfg.state_dir = c.str(*sd, "state-dir");
  if (cfg.state_dir.empty()) c.fail(sd, "state-dir", "empty path");
  if (const auto* n = m.get("max-duty")) {
    std::string t = c.scalar_text(*n, "max-duty");
    if (!t.empty() && t.back() == '%') t.pop_back();
    char* end = nullptr;
    const double pct = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size())
      c.fail(n, "max-duty", fmt::format("'{}': expected a percentage such as \"1%\"", c.scalar_text(*n, "max-duty")));
    if (!(pct > 0 && pct <= 100)) c.fail(n, "max-duty", fmt::format("{}% is out of range (above 0, at most 100)", pct));
    cfg.max_duty = pct / 100.0;
  }
  if (const auto* n = m.get("latency-interval")) cfg.latency_interval = seconds_of(c, *n, "latency-interval", 1, 86400);
  if (const auto* n = m.get("drift-percent")) {
    cfg.drift_pct = c.number(*n, "drift-percent");
    if (!(cfg.drift_pct > 0 && cfg.drift_pct < 100))
      c.fail(n, "drift-percent", fmt::format("{} is out of range (above 0, below 100)", cfg.drift_pct));
  }
  if (const auto* n = m.get("baseline-probes"))
    cfg.baseline_probes = static_cast<std::uint32_t>(c.integer(*n, "baseline-probes", 1, 1000));
  if (const auto* n = m.get("acceptance")) {
    cfg.acceptance = c.str(*n, "acceptance");
    if (cfg.acceptance.empty()) c.fail(n, "acceptance", "empty path");
  }
  if (const auto* n = m.get("max-backoff")) cfg.max_backoff = seconds_of(c, *n, "max-backoff", 1, 86400);
  if (const auto* n = m.get("connect-timeout")) {
    cfg.connect_timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(seconds_of(c, *n, "connect-timeout", 0.1, 600));
  }
}

// [[hosts]] as in plan files, then link-names: one per link address of a host.
void read_hosts(const Ctx& c, const toml::table& root, const toml::table& m, MonitorConfig& cfg) {
  cfg.hosts = c.hosts<MonitorHost>(
      root, 2, "two", [&](const toml::node& hn, const auto& before) { return c.host<MonitorHost>(hn, {}, before); });
  const std::size_t planes = std::max<std::size_t>(1, cfg.hosts.front().hp.links.size());
  if (const auto* n = m.get("link-names")) {
    cfg.link_names = c.strings(*n, "link-names");
    if (cfg.link_names.size() != planes) {
      c.fail(n, "link-names",
             fmt::format("{} names for {} link plane(s): give one per link address of a host", cfg.link_names.size(),
                         planes));
    }
    std::set<std::string> seen;
    for (const auto& ln : cfg.link_names) {
      if (ln.empty() || ln.find_first_of(" \"\\\n") != std::string::npos)
        c.fail(n, "link-names", fmt::format("'{}': use a non-empty name without spaces or quotes", ln));
      if (!seen.insert(ln).second) c.fail(n, "link-names", fmt::format("'{}' is listed twice", ln));
    }
  } else if (cfg.hosts.front().hp.links.empty()) {
    cfg.link_names = {"default"};
  } else {
    for (std::size_t i = 0; i < planes; ++i) cfg.link_names.push_back(fmt::format("link{}", i));
  }
}

}  // namespace

std::string_view direction_of(TestKind t) {
  switch (t) {
    case TestKind::read:
    case TestKind::sread: return "server-to-client";
    case TestKind::rw: return "both";
    default: return "client-to-server";
  }
}

MonitorConfig parse_config(std::string_view text, const std::string& file) {
  Ctx c(file);
  const toml::table root = Ctx::parse(text, file);
  MonitorConfig cfg;
  cfg.file = file;
  c.known_keys(root, {"monitor", "hosts", "probe", "latency"}, "unknown top-level field");
  const auto* mon = root.get("monitor");
  if (!mon) c.fail(nullptr, "monitor", "missing (a [monitor] table with at least state-dir)");
  const auto& m = c.table(*mon, "monitor");
  read_monitor(c, mon, m, cfg);
  read_hosts(c, root, m, cfg);

  // [probe] and [latency]: the settings table. The latency probe's defaults: one small rpc at a
  // time, short (a light round trip measurement, not a load).
  SpecParams probe_defaults, latency_defaults;
  probe_defaults.mode = Mode::stream;
  probe_defaults.time = std::chrono::seconds(2);
  probe_defaults.buffsize = 1024 * 1024;
  latency_defaults.mode = Mode::rpc;
  latency_defaults.buffsize = 4 * 1024;
  latency_defaults.threads = 1;
  latency_defaults.time = std::chrono::seconds(1);
  cfg.probe = spec_from_table(c, root, "probe", mon, probe_defaults);
  cfg.latency = spec_from_table(c, root, "latency", mon, latency_defaults);
  if (cfg.latency.transport() != cfg.probe.transport()) {
    c.fail(root.get("latency") ? root.get("latency") : mon, "transport",
           "the [latency] and [probe] transports differ: the `transport` label would mix them");
  }
  return cfg;
}

MonitorConfig load_config(const std::string& path) {
  return parse_config(read_text_file(path, "monitor config"), path);
}

}  // namespace fabperf::monitor
