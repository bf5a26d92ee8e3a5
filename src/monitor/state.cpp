// The monitor's state: the last values of every series, counters, baselines and drift alerts.
// Its size is fixed by the config (hosts x hosts x links), so weeks of probes do not grow it.
#include <fabperf/core/bytes.hpp>
#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/fd.hpp>
#include <fabperf/monitor/monitor.hpp>
#include <fabperf/report/plan_report.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "report/result_json.hpp"  // std::optional as a JSON value

namespace fabperf::monitor {

using nlohmann::json;

MonitorState::MonitorState(const MonitorConfig& cfg)
    : cfg_(&cfg),
      pairs_(cfg.hosts.size() * cfg.hosts.size() * cfg.link_names.size()),
      host_links_(cfg.hosts.size() * cfg.link_names.size()),
      agent_up_(cfg.hosts.size(), true) {}

std::size_t MonitorState::index(std::uint32_t c, std::uint32_t s, std::uint32_t l) const {
  const std::size_t n = cfg_->hosts.size();
  if (c >= n || s >= n || l >= cfg_->link_names.size())
    throw Error(ExitCode::internal, "monitor state: pair index out of range");
  return (static_cast<std::size_t>(c) * n + s) * cfg_->link_names.size() + l;
}
const HostLinkState& MonitorState::host_link(std::uint32_t h, std::uint32_t l) const {
  return host_links_.at(static_cast<std::size_t>(h) * cfg_->link_names.size() + l);
}

std::vector<std::string> MonitorState::apply(const JobResult& r, bool& baselines_changed) {
  std::vector<std::string> log;
  const auto k = static_cast<std::size_t>(r.job.kind);
  const auto& names = cfg_->hosts;
  const std::string& link = cfg_->link_names.at(r.job.link);
  for (const auto& s : r.pairs) {
    auto& p = pair(s.client, s.server, r.job.link);
    ++p.probes_total[k];
    const std::string subject = fmt::format("{}->{} {} {}", names[s.client].name, names[s.server].name, link,
                                            to_string(cfg_->probe.transport()));
    if (!s.ok) {
      ++p.failures_total[k];
      continue;
    }
    p.last_probe_s[k] = r.wall_s;
    p.p50_s[k] = s.p50_s;
    p.p99_s[k] = s.p99_s;
    if (r.job.kind == ProbeKind::latency) continue;
    p.retransmits_total += s.retransmits;
    if (!s.bytes_per_s) continue;
    const double v = *s.bytes_per_s;
    p.bytes_per_s = v;
    auto& b = p.baseline;
    if (!b.bytes_per_s) {
      b.samples.push_back(v);
      baselines_changed = true;
      if (b.samples.size() >= cfg_->baseline_probes) {
        b = {median(b.samples), {}, "probes", iso8601_utc_now()};
        log.push_back(fmt::format("baseline: {} set to {:.3f} MB/s (median of {} probes)", subject,
                                  *b.bytes_per_s / 1e6, cfg_->baseline_probes));
      }
      continue;
    }
    const auto d = evaluate_drift(v, *b.bytes_per_s, cfg_->drift_pct);
    if (d.alert && !p.drift_alert) {
      log.push_back(fmt::format("drift: {} at {:.3f} MB/s is {:.1f}% below its baseline {:.3f} MB/s (alert above {}%)",
                                subject, v / 1e6, d.below_pct, *b.bytes_per_s / 1e6, cfg_->drift_pct));
    } else if (!d.alert && p.drift_alert) {
      log.push_back(fmt::format("drift cleared: {} back at {:.3f} MB/s (baseline {:.3f} MB/s)", subject, v / 1e6,
                                *b.bytes_per_s / 1e6));
    }
    p.drift_alert = d.alert;
  }
  for (const auto& l : r.links) {
    auto& h = host_links_.at(static_cast<std::size_t>(l.host) * cfg_->link_names.size() + r.job.link);
    const std::uint64_t errors = h.nic_errors_total + l.errors;
    static_cast<LinkSample&>(h) = l;
    h.nic_errors_total = errors;
  }
  return log;
}

// ---- baselines file: one entry per pair and link, the probe settings it was measured with ----
namespace {

constexpr const char* kBaselinesSchema = "fabperf.monitor-baselines";

// One entry per pair and link: its names, what the probes measured (a mismatch drops it), its baseline.
struct BaselineEntry {
  std::string client, server, link, transport, direction;
  std::optional<double> bytes_per_second;  // null while fewer than baseline_probes
  std::vector<double> samples;
  std::string source, set_at;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BaselineEntry, client, server, link, transport, direction, bytes_per_second, samples,
                                   source, set_at)

}  // namespace

json MonitorState::baselines_json() const {
  json arr = json::array();
  const auto n = static_cast<std::uint32_t>(cfg_->hosts.size());
  const std::string transport(to_string(cfg_->probe.transport()));
  const std::string direction(direction_of(cfg_->probe.test()));
  for (std::uint32_t c = 0; c < n; ++c) {
    for (std::uint32_t s = 0; s < n; ++s) {
      for (std::uint32_t l = 0; l < cfg_->link_names.size() && c != s; ++l) {
        const auto& b = pair(c, s, l).baseline;
        if (b.bytes_per_s || !b.samples.empty())
          arr.push_back(BaselineEntry{cfg_->hosts[c].name, cfg_->hosts[s].name, cfg_->link_names[l], transport,
                                      direction, b.bytes_per_s, b.samples, b.source, b.set_at});
      }
    }
  }
  return {{"schema", kBaselinesSchema}, {"version", 1}, {"probe_settings", to_json(cfg_->probe)}, {"baselines", arr}};
}

std::size_t MonitorState::load_baselines(const json& j, const std::string& file) {
  const auto bad = [&](const std::string& what) {
    return UsageError(fmt::format(
        "state file {}: {} (move it away, or start with --reset-baselines to measure new baselines)", file, what));
  };
  if (j.is_discarded()) throw bad("not valid JSON");
  if (!j.is_object() || j.value("schema", "") != kBaselinesSchema)
    throw bad(fmt::format("not a {} file", kBaselinesSchema));
  if (!j.contains("version") || j["version"] != 1) throw bad("unknown version (this fabperf reads version 1)");
  if (!j.contains("baselines") || !j["baselines"].is_array()) throw bad("no 'baselines' array");
  const auto find = [](const auto& v, const std::string& name, auto proj) -> std::optional<std::uint32_t> {
    const auto it = std::ranges::find(v, name, proj);
    if (it == v.end()) return std::nullopt;
    return static_cast<std::uint32_t>(it - v.begin());
  };
  std::size_t dropped = 0;
  for (const auto& je : j["baselines"]) {
    BaselineEntry e;
    try {
      e = je.get<BaselineEntry>();
    } catch (const json::exception& ex) {
      throw bad(fmt::format("a baseline entry is malformed ({})", ex.what()));
    }
    if (e.bytes_per_second && !(*e.bytes_per_second > 0)) throw bad("a bytes_per_second that is not a positive number");
    const auto c = find(cfg_->hosts, e.client, &MonitorHost::name);
    const auto s = find(cfg_->hosts, e.server, &MonitorHost::name);
    const auto l = find(cfg_->link_names, e.link, std::identity{});
    if (!c || !s || !l || *c == *s || e.transport != to_string(cfg_->probe.transport()) ||
        e.direction != direction_of(cfg_->probe.test())) {
      ++dropped;
    } else {
      pair(*c, *s, *l).baseline = {e.bytes_per_second, std::move(e.samples), std::move(e.source), std::move(e.set_at)};
    }
  }
  return dropped;
}

std::size_t MonitorState::seed_from_acceptance(const std::string& text, const std::string& file) {
  const auto bad = [&](const std::string& what) {
    return UsageError(fmt::format("acceptance file {}: {}", file, what));
  };
  if (cfg_->link_names.size() != 1) {
    throw bad(
        fmt::format("a result does not say which link carried each pair, and this config has {} link planes: "
                    "let the first probes set the baselines instead",
                    cfg_->link_names.size()));
  }
  // A run's result or a plan's results, read and checked as `fabperf report` reads them: the done
  // steps' results.
  std::vector<ResultDoc> docs;
  try {
    std::istringstream in(text);
    for (auto& st : load_results(in, file).steps) {
      if (st["status"] == "done")
        docs.push_back(read_result_doc(st["result"], ReadMode::lenient,
                                       fmt::format("{}: step {}: result", file, st.value("id", std::string{}))));
    }
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("acceptance file {}", e.what()));  // what() starts with FILE[:LINE]
  }
  if (docs.empty()) throw bad("no finished result in it (expected `fabperf run --json` output or plan results)");
  // The probes must measure what the acceptance run measured, or the baseline means nothing.
  const json mine = to_json(cfg_->probe);
  for (const auto& d : docs) {
    const json& theirs = d.settings;
    for (const char* k : {"transport", "test", "mode", "buffsize", "threads", "parallel"}) {
      if (theirs.value(k, json()) != mine[k]) {
        throw bad(fmt::format("setting '{}' is {} there but {} in the [probe] table: its figures are not comparable", k,
                              theirs.value(k, json()).dump(), mine[k].dump()));
      }
    }
  }
  std::map<std::string, std::uint32_t> by_addr;
  for (std::uint32_t i = 0; i < cfg_->hosts.size(); ++i) by_addr[cfg_->hosts[i].hp.str()] = i;
  // Payload throughputs per (client, server) host pair over the results, nodes matched by host:port.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<double>> values;
  for (const auto& d : docs) {
    std::map<std::uint64_t, std::uint32_t> host_of;  // the result's node index -> host
    for (const auto& n : d.nodes) {
      if (const auto it = by_addr.find(n.name); it != by_addr.end()) host_of[n.index] = it->second;
    }
    for (const auto& p : d.pairs) {
      if (host_of.count(p.client) && host_of.count(p.server))
        values[{host_of[p.client], host_of[p.server]}].push_back(p.tput.mb_per_s * 1e6);
    }
  }
  std::size_t set = 0;
  for (const auto& [hosts, vals] : values) {
    auto& b = pair(hosts.first, hosts.second, 0).baseline;
    if (hosts.first == hosts.second || b.bytes_per_s) continue;
    const double v = median(vals);
    if (!(v > 0)) continue;
    b = {v, {}, "acceptance " + file, iso8601_utc_now()};
    ++set;
  }
  return set;
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  // A new file of a name nobody could have prepared (mkostemp: O_EXCL, never through a symlink),
  // not a fixed "PATH.tmp" that a link planted in the state folder would send elsewhere.
  std::string tmp = path + ".XXXXXX";
  UniqueFd owned(::mkostemp(tmp.data(), O_CLOEXEC));
  const int fd = owned.get();
  if (fd < 0) throw SystemError("create state file", path + ".XXXXXX", errno);
  auto fail = [&](const char* what, int err) {
    owned.reset();
    ::unlink(tmp.c_str());
    throw SystemError(what, tmp, err);
  };
  if (::fchmod(fd, 0644) != 0) fail("set the mode of state file", errno);
  if (const int e = write_all(fd, content); e != 0) fail("write state file", e);
  if (::fsync(fd) != 0) fail("sync state file", errno);
  owned.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw SystemError("replace state file", path, err);
  }
  // The rename itself must reach the disk, or a crash could bring back the old name.
  if (const UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); d.valid()) ::fsync(d.get());
}

}  // namespace fabperf::monitor
