// `fabperf monitor CONFIG`: options, the state file, the metrics listener and signals around the
// library's loop (src/monitor; docs/monitor.md).
#include "cli/options.hpp"

#include <fabperf/core/clock.hpp>
#include <fabperf/core/stop.hpp>
#include <fabperf/monitor/monitor.hpp>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

namespace fabperf::cli {
namespace {

using nlohmann::json;
namespace mon = fabperf::monitor;

class RealClock : public mon::MonitorClock {
 public:
  double now() override { return static_cast<double>(mono_now_ns()) / 1e9; }
  double wall() override { return static_cast<double>(wall_now_ns()) / 1e9; }
  bool sleep_until(double t) override {
    while (!stop::stopped()) {
      const double left = t - now();
      if (left <= 0) return true;
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(left, 0.1)));
    }
    return false;
  }
};

void say(const std::string& line) {
  std::cerr << iso8601_utc_now() << " monitor: " << line << "\n" << std::flush;
}

std::string describe(const mon::MonitorConfig& cfg, const mon::Schedule& s) {
  const double d = std::chrono::duration<double>(cfg.probe.time()).count() + 0.7;  // set-up and collection per probe
  const double per_host_link = 2.0 * static_cast<double>(cfg.hosts.size() - 1) * d / cfg.max_duty;
  const double sequential = static_cast<double>(s.bandwidth_targets().size()) * d;
  return fmt::format(
      "{} hosts, {} link plane(s), {} bandwidth probes per rotation ({} s each, max-duty {}%: a rotation takes "
      "about {:.0f} s or more), {} latency steps every {} s, drift alert below {}% of baseline, baselines from {} "
      "probes; at most {} series (2 bond members per link)",
      cfg.hosts.size(), cfg.link_names.size(), s.bandwidth_targets().size(),
      std::chrono::duration<double>(cfg.probe.time()).count(), cfg.max_duty * 100, std::max(per_host_link, sequential),
      s.latency_jobs().size(), std::chrono::duration<double>(cfg.latency_interval).count(), 100 - cfg.drift_pct,
      cfg.baseline_probes, mon::max_series(cfg, 2));
}

// The state: baselines survive restarts; a file that cannot be read is never silently replaced.
void load_state(const mon::MonitorConfig& cfg, const std::string& state_file, bool reset, mon::MonitorState& state) {
  std::error_code fec;
  std::filesystem::create_directories(cfg.state_dir, fec);
  if (fec) throw SystemError("create state folder", cfg.state_dir, fec.message());
  if (!std::filesystem::exists(state_file)) return;
  if (reset) {
    say(fmt::format("ignoring {} (--reset-baselines): the first {} probes of each pair set new baselines", state_file,
                    cfg.baseline_probes));
    return;
  }
  const auto dropped =
      state.load_baselines(json::parse(read_text_file(state_file, "state file"), nullptr, false), state_file);
  say(fmt::format("baselines loaded from {}{}", state_file,
                  dropped ? fmt::format(" ({} for pairs or links no longer configured dropped)", dropped) : ""));
}

// What the monitor says when it ends, and its exit code.
int finish(bool once, int code) {
  if (once && stop::stopped()) {
    say("--once: interrupted before the rotation ended");
    return static_cast<int>(ExitCode::infrastructure);
  }
  if (!once) {
    say("stopped");
    return 0;
  }
  say(fmt::format("--once: {}", code == 0   ? "every probe ran, no drift"
                                : code == 1 ? "DRIFT alert raised"
                                            : "a probe FAILED"));
  return code;
}

}  // namespace

int cmd_monitor(int argc, char** argv) {
  cxxopts::Options o("fabperf monitor",
                     "Continuous fabric probes exported as Prometheus metrics: fabperf monitor CONFIG.toml");
  o.add_options()("config", "", cxxopts::value<std::string>())(
      "once",
      "one latency round and one rotation of bandwidth probes, then exit: 0 fine, 1 drift alert, 3 a probe failed")(
      "check", "validate the config and print what would run")(
      "reset-baselines", "ignore the state file's baselines (also a corrupt one): the first probes set new ones")(
      "probe-log", "append every probe's samples to FILE (JSON Lines)", cxxopts::value<std::string>());
  add_common_options(o, kKeyFile | kLogLevel);
  const auto r = cli::parse_options(o, argc, argv, {"config"}, "CONFIG.toml");
  if (!r.count("config")) throw UsageError("monitor: usage: fabperf monitor CONFIG.toml [--once] (docs/monitor.md)");
  const auto cfg = mon::load_config(get<std::string>(r, "config"));
  const bool once = r.count("once") > 0;
  setup_logging(get<std::string>(r, "log-level"));
  const mon::Schedule sched(cfg.hosts.size(), cfg.link_names.size(), cfg.max_duty,
                            std::chrono::duration<double>(cfg.latency_interval).count());
  if (r.count("check")) {
    std::cout << "monitor " << cfg.file << ": " << describe(cfg, sched) << "\n";
    std::cout << fmt::format("metrics: http://{}:{}/metrics; state: {}/baselines.json\nconfig ok\n", cfg.listen_host,
                             cfg.listen_port, cfg.state_dir);
    return 0;
  }
  const auth::Key key = key_option(r);

  const std::string state_file = cfg.state_dir + "/baselines.json";
  mon::MonitorState state(cfg);
  load_state(cfg, state_file, r.count("reset-baselines") > 0, state);
  const auto persist = [&](const json& j) {
    try {
      mon::write_file_atomic(state_file, j.dump(1) + "\n");
    } catch (const Error& e) {
      say(fmt::format("baselines not saved: {}", e.what()));
    }
  };
  if (!cfg.acceptance.empty()) {
    const auto n = state.seed_from_acceptance(read_text_file(cfg.acceptance, "acceptance file"), cfg.acceptance);
    if (n > 0) {
      say(fmt::format("{} baselines seeded from {}", n, cfg.acceptance));
      persist(state.baselines_json());
    }
  }
  mon::RunOptions ro;
  ro.once = once;
  ro.on_log = say;
  ro.on_baselines = persist;
  std::ofstream probe_log;
  if (r.count("probe-log")) {
    const auto path = get<std::string>(r, "probe-log");
    probe_log.open(path, std::ios::app);
    if (!probe_log) throw UsageError(fmt::format("--probe-log {}: cannot be opened ({})", path, errno_text(errno)));
    ro.on_result = [&](const json& j) { probe_log << j.dump() << "\n" << std::flush; };
  }

  std::mutex mu;
  std::unique_ptr<mon::MetricsServer> server;
  if (!once) {
    server = std::make_unique<mon::MetricsServer>(cfg.listen_host, cfg.listen_port, [&] {
      std::lock_guard<std::mutex> lock(mu);
      return mon::render_metrics(state);
    });
  }
  say(describe(cfg, sched));
  if (server) say(fmt::format("metrics on http://{}/metrics", HostPort{cfg.listen_host, server->port(), {}}.str()));
  const auto prober = mon::make_prober(cfg, key);
  RealClock clock;
  // A probe under way is stopped by its coordinator, which keeps what was measured.
  stop::mark();
  return finish(once, mon::run_monitor(cfg, *prober, clock, state, mu, ro));
}

}  // namespace fabperf::cli
