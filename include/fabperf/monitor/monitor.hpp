// `fabperf monitor`: a long-running coordinator that probes the fabric in rotation, keeps per-pair
// and per-link baselines, flags drift, and exposes everything as Prometheus metrics
// (docs/monitor.md). Pure parts (config, schedule, state and drift, exposition) are separate from
// the parts that touch the world (the prober over run_test, the HTTP listener, the state file), so
// each is tested with a fake clock and fake probe results.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fabperf/core/spec.hpp>
#include <fabperf/core/stats.hpp>
#include <fabperf/proto/auth.hpp>

namespace fabperf {
struct Report;
}

namespace fabperf::monitor {

// ---- configuration (TOML; every mistake is a UsageError "FILE:LINE: field 'x': problem") ----

struct MonitorHost {
  std::string name;
  HostPort hp;  // hp.links: one data address per link plane (empty: the control address only)
};

struct MonitorConfig {
  std::string file;
  std::vector<MonitorHost> hosts;
  // One name per link plane (the `link` label); {"default"} when hosts have no per-link addresses.
  std::vector<std::string> link_names;
  TestSpec probe = TestSpec::make({});    // bandwidth probes: the [probe] table (the settings table)
  TestSpec latency = TestSpec::make({});  // latency probes: the [latency] table
  std::string listen_host{"127.0.0.1"};
  std::uint16_t listen_port{9668};  // the default metrics port
  bool listen_public{false};        // needed for any address that is not loopback
  double max_duty{0.01};            // of each host link's time spent in bandwidth probes (0..1]
  std::chrono::nanoseconds latency_interval{std::chrono::seconds(60)};
  double drift_pct{20};              // a throughput more than this below its baseline raises the alert
  std::uint32_t baseline_probes{5};  // successful probes whose median sets a baseline
  std::string state_dir;             // baselines.json lives here
  std::string acceptance;            // optional: a `fabperf run --json` result or plan results seeding baselines
  std::chrono::nanoseconds max_backoff{std::chrono::seconds(300)};
  std::chrono::milliseconds connect_timeout{5000};
};

MonitorConfig parse_config(std::string_view text, const std::string& file);
MonitorConfig load_config(const std::string& path);

// The `direction` label of a test: where the data flows.
std::string_view direction_of(TestKind t);

// ---- probes ----
enum class ProbeKind { bandwidth, latency };
inline std::string_view to_string(ProbeKind k) {
  return k == ProbeKind::bandwidth ? "bandwidth" : "latency";
}

// One coordinated test: the pairs run at once, all on one link plane.
struct Job {
  ProbeKind kind{ProbeKind::bandwidth};
  std::uint32_t link{0};
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;  // (client, server) host indexes
  [[nodiscard]] std::vector<std::uint32_t> hosts() const;      // of the pairs, in first-seen order
  friend bool operator==(const Job&, const Job&) = default;
};

struct PairSample {
  std::uint32_t client{0}, server{0};
  bool ok{false};
  std::string error;
  std::optional<double> bytes_per_s;   // payload throughput (bandwidth probes)
  std::optional<double> p50_s, p99_s;  // bandwidth: ping delay under load; latency: rpc round trip
  std::uint64_t retransmits{0};
};

struct BondShare {
  std::string bond, member;
  double tx_ratio{0}, rx_ratio{0};  // the member's share of the bond's bytes, 0..1
};

// What one host's link looked like during a probe (the interface that carried the flows).
struct LinkSample {
  std::uint32_t host{0};
  std::string interface;
  std::int64_t speed_bps{-1};  // -1: unknown (virtual links)
  int mtu{0};
  std::uint64_t errors{0};  // rx/tx errors + drops within the probe's window
  std::vector<BondShare> bonds;
};

struct JobResult {
  Job job;
  double wall_s{0};               // Unix time at the end of the probe
  std::vector<PairSample> pairs;  // one per job pair, in order
  std::vector<LinkSample> links;
  std::vector<std::uint32_t> unreachable;  // hosts the error named (they back off)
  bool interrupted{false};                 // SIGINT/SIGTERM during the probe: the monitor stops
};

class Prober {
 public:
  virtual ~Prober() = default;
  // Runs the job; never throws for a probe that fails (the failure is in the result).
  virtual JobResult run(const Job& job) = 0;
};

// The real prober: each job is one run_test on the config's hosts (restricted to the job's link);
// a stop request (stop::stopped()) during a probe marks its result interrupted.
std::unique_ptr<Prober> make_prober(const MonitorConfig& cfg, auth::Key key);
// A job's samples from a report (pure): nodes are matched to hosts by `name` (host:port).
JobResult job_result_from_report(const MonitorConfig& cfg, const Job& job, const Report& r, double wall_s);
// A job that could not run: every pair failed with `error`; the hosts it names are unreachable.
JobResult failed_job(const MonitorConfig& cfg, const Job& job, const std::string& error, double wall_s);

// ---- schedule: rotation over ordered pairs and links under the duty cap ----
// Bandwidth probes rotate over every ordered pair on every link plane. A probe that took D
// seconds of a host link lets that host link take the next one only D / max_duty after it
// started, so no host link spends more than max_duty of its time in bandwidth probes. Within a
// rotation the next probe is the one that may start soonest (ties: rotation order); a rotation
// ends when every target ran once. Latency rounds (every pair, on every link) run every
// latency_interval; their load is one small rpc at a time and is not counted in the duty.
class Schedule {
 public:
  Schedule(std::size_t hosts, std::size_t links, double max_duty, double latency_interval_s);
  struct Next {
    Job job;
    double at_s{0};  // earliest start (the caller's monotonic clock)
  };
  // What runs next. Latency rounds first when due.
  [[nodiscard]] Next next(double now_s) const;
  // The job ran from start_s to end_s (or was skipped: start == end).
  void done(const Job& job, double start_s, double end_s);
  [[nodiscard]] std::uint64_t rotations() const { return rotations_; }  // completed rotations
  [[nodiscard]] std::uint64_t latency_rounds() const { return latency_rounds_; }
  [[nodiscard]] const std::vector<Job>& bandwidth_targets() const { return targets_; }
  [[nodiscard]] const std::vector<Job>& latency_jobs() const { return latency_; }

 private:
  std::size_t links_;
  double duty_;
  double latency_interval_;
  std::vector<Job> targets_;
  std::vector<Job> latency_;
  std::vector<bool> done_;
  std::vector<double> ready_;  // host * links + link
  std::size_t latency_pos_{0};
  double latency_due_{0};
  std::uint64_t rotations_{0}, latency_rounds_{0};
};

// Exponential back-off per host: after k consecutive failures a host is tried again only after
// min(cap, base * 2^(k-1)) seconds; a success resets it.
class Backoff {
 public:
  Backoff(std::size_t hosts, double base_s, double cap_s);
  void failed(std::uint32_t host, double now_s);
  void succeeded(std::uint32_t host);
  [[nodiscard]] bool blocked(std::uint32_t host, double now_s) const {
    return failures(host) > 0 && now_s < retry_at(host);
  }
  [[nodiscard]] double retry_at(std::uint32_t host) const { return retry_.at(host); }
  [[nodiscard]] std::uint32_t failures(std::uint32_t host) const { return failures_.at(host); }

 private:
  double base_, cap_;
  std::vector<std::uint32_t> failures_;
  std::vector<double> retry_;
};

// ---- drift ----
struct DriftEval {
  bool alert{false};
  double threshold{0};  // baseline * (1 - pct/100)
  double below_pct{0};  // how far below the baseline the value is (negative: above)
};
// Alert when value < baseline * (1 - pct/100); clears as soon as it is back at or above.
DriftEval evaluate_drift(double value, double baseline, double pct);
using stats::median;

// ---- state: what the metrics show, and the baselines ----
struct Baseline {
  std::optional<double> bytes_per_s;
  std::vector<double> samples;  // while fewer than baseline_probes
  std::string source;           // "probes" or "acceptance FILE"
  std::string set_at;           // ISO 8601 UTC
};

struct PairState {
  std::optional<double> bytes_per_s;
  std::optional<double> p50_s[2], p99_s[2];  // by ProbeKind: ping under load, or the latency rpc
  std::uint64_t retransmits_total{0};
  std::uint64_t probes_total[2]{0, 0};  // by ProbeKind
  std::uint64_t failures_total[2]{0, 0};
  std::optional<double> last_probe_s[2];  // Unix time of the last successful probe, by kind
  Baseline baseline;
  bool drift_alert{false};
};

// The last probe's sample of a host link (its bonds replaced, never accumulated), and its errors so far.
struct HostLinkState : LinkSample {
  std::uint64_t nic_errors_total{0};
};

class MonitorState {
 public:
  explicit MonitorState(const MonitorConfig& cfg);
  // Applies a job's samples; returns the log lines it gives rise to (drift raised or cleared,
  // a baseline set). `baselines_changed` tells the caller to persist them.
  std::vector<std::string> apply(const JobResult& r, bool& baselines_changed);
  void set_agent_up(std::uint32_t host, bool up) { agent_up_.at(host) = up; }
  void count_rotation() { ++rotations_; }

  [[nodiscard]] const PairState& pair(std::uint32_t c, std::uint32_t s, std::uint32_t l) const {
    return pairs_[index(c, s, l)];
  }
  PairState& pair(std::uint32_t c, std::uint32_t s, std::uint32_t l) { return pairs_[index(c, s, l)]; }
  [[nodiscard]] const HostLinkState& host_link(std::uint32_t host, std::uint32_t link) const;
  [[nodiscard]] bool agent_up(std::uint32_t host) const { return agent_up_.at(host); }
  [[nodiscard]] std::uint64_t rotations() const { return rotations_; }
  [[nodiscard]] std::size_t active_alerts() const {
    return static_cast<std::size_t>(std::ranges::count(pairs_, true, &PairState::drift_alert));
  }
  [[nodiscard]] const MonitorConfig& config() const { return *cfg_; }

  // Baselines as the state file holds them, and back (entries for pairs or links the config
  // no longer has are dropped; their number is returned; a discarded parse is not valid JSON).
  [[nodiscard]] nlohmann::json baselines_json() const;
  std::size_t load_baselines(const nlohmann::json& j, const std::string& file);
  // Seeds baselines of pairs that have none from an acceptance result (`fabperf run --json`
  // output or plan results). Returns how many were set. Throws UsageError naming the file when it
  // cannot be used (unreadable, other settings, several link planes).
  std::size_t seed_from_acceptance(const std::string& text, const std::string& file);

 private:
  [[nodiscard]] std::size_t index(std::uint32_t c, std::uint32_t s, std::uint32_t l) const;
  const MonitorConfig* cfg_;
  std::vector<PairState> pairs_;
  std::vector<HostLinkState> host_links_;
  std::vector<bool> agent_up_;
  std::uint64_t rotations_{0};
};

// The Prometheus text exposition (format 0.0.4) of the state: pure.
std::string render_metrics(const MonitorState& s);
// The most series render_metrics can emit for this config (docs/monitor.md states the formula).
std::size_t max_series(const MonitorConfig& cfg, std::size_t max_bond_members);

// ---- the state file ----
// Writes `content` to `path` so that a kill at any moment leaves either the old or the new file:
// a temporary file in the same folder, fsync, rename, fsync of the folder. Throws SystemError.
void write_file_atomic(const std::string& path, const std::string& content);

// ---- the HTTP side ----
struct HttpReply {
  unsigned status{200};
  std::string content_type;
  std::string body;
  std::string allow;  // for 405
};
// GET /metrics -> the exposition; other paths 404; other methods 405. Pure.
HttpReply handle_http(std::string_view method, std::string_view target, const std::function<std::string()>& render);
inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";
inline constexpr const char* kPlainText = "text/plain; charset=utf-8";  // the other answers'

// Listens on host:port (0: a kernel-chosen port) on its own thread until destroyed. Requests are
// bounded (headers 8 KiB, no body, 10 s to send one); at most 32 connections at once.
class MetricsServer {
 public:
  MetricsServer(const std::string& host, std::uint16_t port, std::function<std::string()> render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  [[nodiscard]] std::uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- the loop ----
class MonitorClock {
 public:
  virtual ~MonitorClock() = default;
  virtual double now() = 0;   // monotonic seconds
  virtual double wall() = 0;  // Unix seconds
  // Waits until `t` (monotonic); false when asked to stop first.
  virtual bool sleep_until(double t) = 0;
};

struct RunOptions {
  bool once{false};
  // Called after each job, with the job result as JSON (the --probe-log line).
  std::function<void(const nlohmann::json&)> on_result;
  // Called when baselines changed, with the state file's new content (persist it).
  std::function<void(const nlohmann::json&)> on_baselines;
  // The monitor's own events (drift raised or cleared, a baseline set, an agent down or back).
  std::function<void(const std::string&)> on_log;
};

// Runs probes until stopped (or, with once, one rotation and one latency round). Locks `mu`
// around every change of `state` (the metrics listener renders under it). Returns the exit code
// for --once: 0 every probe ran and no drift alert, 1 a drift alert is raised, 3 a probe failed.
int run_monitor(const MonitorConfig& cfg, Prober& prober, MonitorClock& clock, MonitorState& state, std::mutex& mu,
                const RunOptions& opts);
nlohmann::json to_json(const JobResult& r, const MonitorConfig& cfg);

}  // namespace fabperf::monitor
