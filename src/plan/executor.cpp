// The plan executor behind `fabperf run PLAN` and `fabperf run --pattern` (include/fabperf/plan_run.hpp):
// pre-flight, the steps, A/B hooks, isolation rounds, KPIs and verdicts. Results go to a JSON Lines
// file, one record per finished step, written and synced before the next step starts
// (docs/results-format.md); what a person reads goes to the stream the caller gives.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <ctime>
#include <fabperf/build_config.hpp>
#include <fabperf/bytes.hpp>
#include <fabperf/compare.hpp>
#include <fabperf/coordinator.hpp>
#include <fabperf/error.hpp>
#include <fabperf/isolate.hpp>
#include <fabperf/plan_run.hpp>
#include <fabperf/stop.hpp>
#include <fabperf/units.hpp>
#include <map>
#include <optional>
#include <ostream>

#include "plan/hooks.hpp"

namespace fabperf::plan {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Between steps a SIGINT/SIGTERM stops the plan before its next step; during a step the
// coordinator stops the test and keeps what was measured. main() owns the handlers
// (fabperf/stop.hpp); the plan compares the request count with the one at its start.
std::uint64_t g_stop_base = 0;
bool stop_requested() {
  return stop::requests() > g_stop_base;
}

// Appends whole lines and syncs each one: a crash or a dead agent loses nothing already written.
class ResultsFile {
 public:
  ResultsFile(const std::string& path, bool must_be_new) : path_(path) {
    int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC;
    if (must_be_new) flags |= O_EXCL;
    fd_ = ::open(path.c_str(), flags, 0644);
    if (fd_ < 0 && errno == EEXIST) {
      throw UsageError(fmt::format(
          "--results {}: already exists (continue it with --resume {}, or choose another name)", path, path));
    }
    if (fd_ < 0) throw SystemError("open results file", path, errno);
  }
  ~ResultsFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  void write(const json& j) {
    if (const int e = write_all(fd_, j.dump() + "\n"); e != 0) throw SystemError("write results file", path_, e);
    ::fsync(fd_);
  }

 private:
  std::string path_;
  int fd_{-1};
};

std::string hms(double s) {
  const auto t = std::lround(s);
  if (t >= 3600) return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
  return fmt::format("{}:{:02}", t / 60, t % 60);
}

std::string default_results_name(const std::string& plan_name) {
  std::string base;
  for (const char ch : plan_name.substr(plan_name.find_last_of('/') + 1)) {
    base += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' ? ch : '-';
  }
  if (const auto dot = base.rfind("-toml"); dot != std::string::npos && dot + 5 == base.size()) base.resize(dot);
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("{}-{}.jsonl", base.empty() ? "plan" : base, buf);
}

std::map<std::string, std::string> node_names(const plan::Plan& p) {
  std::map<std::string, std::string> m;
  for (const auto& h : p.hosts) m[h.hp.str()] = h.name;
  return m;
}

std::uint64_t max_socksize(const plan::Plan& p) {
  std::uint64_t s = 0;
  for (const auto& t : p.tests) s = std::max(s, t.spec.socksize());
  return s;
}

}  // namespace

// The probe test: every host loads every other one at once, briefly. Returns the exit code
// (0 fine or warnings only, 3 errors).
int run_preflight(const Plan& p, const auth::Key& key, std::chrono::milliseconds connect_timeout, bool quiet,
                  std::ostream& os) {
  RunRequest req;
  req.spec = plan::preflight_spec(max_socksize(p), static_cast<std::uint32_t>(p.hosts.front().hp.links.size()));
  req.key = key;
  req.connect_timeout = connect_timeout;
  req.interval = std::chrono::milliseconds(100);
  for (std::uint32_t i = 0; i < p.hosts.size(); ++i) {
    req.servers.push_back(p.hosts[i].hp);
    req.clients.push_back(p.hosts[i].hp);
    for (std::uint32_t j = 0; j < p.hosts.size(); ++j) {
      if (i != j) req.pairs.emplace_back(i, j);
    }
  }
  const auto names = node_names(p);
  if (!quiet)
    os << fmt::format("preflight: {} hosts, probe of every ordered pair ({} s)\n", p.hosts.size(),
                      std::chrono::duration<double>(req.spec.time()).count());
  RunRecord rec;
  try {
    rec = run_test(req);
  } catch (const Interrupted&) {
    os << "preflight: interrupted\n";
    return static_cast<int>(ExitCode::infrastructure);
  } catch (const Error& e) {
    // The message names the agent; say which plan host that is, and how to fix it.
    std::string who;
    for (const auto& [addr, name] : names) {
      if (std::string(e.what()).find(addr) != std::string::npos) who += (who.empty() ? "" : ", ") + name;
    }
    os << plan::render_findings({{"error", who, e.what(), plan::agent_error_fix(e.what())}});
    os << "preflight: FAILED (fix the above, or run with --no-preflight)\n";
    return static_cast<int>(ExitCode::infrastructure);
  }
  const Report rep = compute_report(rec);
  const auto findings = plan::preflight_findings(rec, rep, names, {max_socksize(p), p.clock_warn_s});
  std::size_t errors = 0, warnings = 0;
  for (const auto& f : findings) {
    errors += f.level == "error" ? 1 : 0;
    warnings += f.level == "warning" ? 1 : 0;
  }
  if (!quiet || errors > 0) os << plan::render_findings(findings);
  if (rec.interrupted) {
    os << "preflight: interrupted\n";
    return static_cast<int>(ExitCode::infrastructure);
  }
  if (errors > 0) {
    os << fmt::format("preflight: FAILED, {} errors, {} warnings (fix them, or run with --no-preflight)\n", errors,
                      warnings);
    return static_cast<int>(ExitCode::infrastructure);
  }
  if (!quiet) os << fmt::format("preflight: ok ({} warnings)\n", warnings);
  return 0;
}

namespace {

bool isolatable(plan::Pattern p) {
  return p == plan::Pattern::all_to_all || p == plan::Pattern::each_vs_rest || p == plan::Pattern::incast ||
         p == plan::Pattern::all_pairs;
}

// The busiest non-loopback interface of each node of a step's result, by plan host index.
std::map<std::uint32_t, std::string> busiest_links(const plan::StepResult& result,
                                                   const std::map<std::string, std::uint32_t>& index) {
  std::map<std::uint32_t, std::string> out;
  for (const auto& n : result.nodes) {
    const auto it = index.find(n.node);
    if (it == index.end()) continue;
    double best = -1;
    for (const auto& l : n.links) {
      if (l.kind == "loopback") continue;
      const double v = std::max(l.payload_tx_mb_per_s, l.payload_rx_mb_per_s);
      if (v > best) {
        best = v;
        out[it->second] = l.link;
      }
    }
  }
  return out;
}

// Retests the suspects of a failing test round by round (plan/isolate.cpp decides, this runs
// the steps) and writes every round's results and the trace. Prints the trace as it goes.
void run_isolation(const plan::Plan& p, std::size_t ti, const std::vector<plan::StepOutcome>& outcomes,
                   const std::vector<plan::KpiCheck>& checks, const RunOptions& o, ResultsFile& out, bool& interrupted,
                   std::ostream& os) {
  const auto& t = p.tests[ti];
  if (!isolatable(t.pattern.pattern)) return;
  std::map<std::string, std::uint32_t> index;
  std::vector<std::string> host_names;
  for (std::uint32_t i = 0; i < p.hosts.size(); ++i) {
    index[p.hosts[i].hp.str()] = i;
    host_names.push_back(p.hosts[i].name);
  }
  std::vector<plan::StepOutcome> mine;
  for (const auto& s : outcomes) {
    if (s.test == t.name) mine.push_back(s);
  }
  std::vector<plan::KpiCheck> failing;
  for (const auto& c : checks) {
    if (c.test && *c.test == t.name && !c.pass) failing.push_back(c);
  }
  if (mine.empty()) return;
  const auto sus = plan::find_suspects(mine, index, host_names, std::string(to_string(t.spec.test())), failing);
  if (failing.empty() && sus.spread >= plan::kSpreadTrigger) return;
  std::vector<std::string> trace;
  const auto say = [&](const std::string& line) {
    trace.push_back(line);
    os << "isolate " << t.name << ": " << line << "\n" << std::flush;
  };
  say(failing.empty()
          ? fmt::format("node spread {:.2f} is below {:.2f}: retesting the suspects", sus.spread, plan::kSpreadTrigger)
          : fmt::format("{} KPI check(s) failed: retesting the suspects", failing.size()));
  for (const auto& l : sus.trace) say(l);
  std::size_t log2n = 0;
  while ((std::size_t{1} << log2n) < t.hosts.size()) ++log2n;
  plan::Isolator iso(sus.suspects, sus.good, host_names, 2 * log2n + 2);
  std::size_t shown = 0;
  const auto flush_trace = [&] {
    for (; shown < iso.trace().size(); ++shown) say(iso.trace()[shown]);
  };
  flush_trace();
  while (auto round = iso.next_round()) {
    std::vector<std::vector<std::optional<double>>> rates;
    std::map<std::uint32_t, std::string> links;
    for (std::size_t k = 0; k < round->steps.size(); ++k) {
      const auto& st = round->steps[k];
      RunRequest req;
      req.spec = t.spec;
      req.interval = t.interval;
      req.key = o.key;
      req.connect_timeout = o.connect_timeout;
      json pairs = json::array();
      std::vector<std::pair<std::uint32_t, std::uint32_t>> host_pairs;
      for (const auto& pr : st.pairs) {
        host_pairs.emplace_back(pr.client, pr.server);
        pairs.push_back({{"client", host_names[pr.client]}, {"server", host_names[pr.server]}, {"role", pr.role}});
      }
      set_host_pairs(req, host_pairs, [&](std::uint32_t h) { return p.hosts[h].hp; });
      json rec = {{"type", "isolate"},
                  {"test", t.name},
                  {"round", round->number},
                  {"kind", round->kind},
                  {"step", k},
                  {"pairs", pairs},
                  {"started_at", plan::iso8601_now()},
                  {"status", "done"},
                  {"error", ""}};
      std::vector<std::optional<double>> r(st.pairs.size());
      try {
        const RunRecord run = run_test(req);
        const Report report = compute_report(run);
        rec["result"] = render_json(report);
        const auto result = plan::decode_step_result(rec["result"]);
        if (run.interrupted) interrupted = true;
        // The result's pairs name nodes by index; map them back to plan hosts.
        std::map<std::uint64_t, std::uint32_t> node_host;
        for (const auto& n : result.nodes) {
          if (const auto it = index.find(n.node); it != index.end()) node_host[n.index] = it->second;
        }
        for (const auto& pr : result.pairs) {
          const auto c = node_host.find(pr.client);
          const auto v = node_host.find(pr.server);
          if (c == node_host.end() || v == node_host.end()) continue;
          for (std::size_t i = 0; i < st.pairs.size(); ++i) {
            if (st.pairs[i].client == c->second && st.pairs[i].server == v->second) r[i] = pr.mb_per_s;
          }
        }
        for (const auto& [h, l] : busiest_links(result, index)) {
          if (!links.count(h)) links[h] = l;
        }
      } catch (const Interrupted& e) {
        rec["status"] = "interrupted";
        rec["error"] = e.what();
        interrupted = true;
      } catch (const Error& e) {
        rec["status"] = "failed";
        rec["error"] = e.what();
      }
      out.write(rec);
      rates.push_back(std::move(r));
      if (interrupted || stop_requested()) break;
    }
    if (interrupted || stop_requested()) {
      interrupted = true;
      say("interrupted");
      break;
    }
    iso.record(rates, links);
    flush_trace();
  }
  flush_trace();
  json findings = json::array();
  for (const auto& f : iso.findings()) {
    findings.push_back(plan::to_json(f));
    if (f.slow) say("SLOW " + f.text);
  }
  out.write(
      {{"type", "isolation"}, {"test", t.name}, {"rounds", iso.rounds()}, {"trace", trace}, {"findings", findings}});
}

}  // namespace

// NOLINTNEXTLINE(readability-function-size): over 120 lines before the check; split it, do not grow it
int run_plan(const Plan& p, const RunOptions& o, std::ostream& os) {
  if (p.ab && !o.allow_hooks) {
    throw UsageError(
        fmt::format("plan {}: its [ab] hooks run commands on this host ('{}', '{}'): give --allow-hooks to let them",
                    p.file, p.ab->a, p.ab->b));
  }
  const auto steps = plan::expand(p);
  const auto names = node_names(p);
  const json plan_obj = plan::plan_json(p);

  // Resume: the same plan, steps already done are not run again.
  std::string path = o.results;
  plan::ResumeState prior;
  if (!o.resume.empty()) {
    if (!o.results.empty() && o.results != o.resume)
      throw UsageError("--results and --resume: give one file (a resumed run appends to it)");
    prior = plan::read_results(o.resume);
    if (prior.plan_record.value("plan", json()) != plan_obj) {
      throw UsageError(
          fmt::format("--resume {}: written for a different plan (hosts, tests, settings or KPIs changed)", o.resume));
    }
    path = o.resume;
  } else if (path.empty()) {
    path = default_results_name(p.name == p.file ? p.file : p.name);
  }
  std::size_t to_run = 0;
  for (const auto& s : steps) {
    const auto it = prior.steps.find(s.id);
    if (it == prior.steps.end() || it->second["status"] != "done") ++to_run;
  }
  double est = 0;
  for (const auto& s : steps) {
    const auto it = prior.steps.find(s.id);
    if (it == prior.steps.end() || it->second["status"] != "done") {
      est += std::chrono::duration<double>(p.tests[s.test].spec.time()).count() + plan::kStepOverheadS;
    }
  }
  if (!o.quiet) {
    os << fmt::format(
        "plan '{}': {} tests, {} steps{}, estimated {} (results: {})\n", p.name, p.tests.size(), steps.size(),
        to_run == steps.size() ? "" : fmt::format(" ({} to run, {} done before)", to_run, steps.size() - to_run),
        hms(est), path);
  }
  g_stop_base = stop::requests();
  if (o.preflight && to_run > 0) {
    const int rc = run_preflight(p, o.key, o.connect_timeout, o.quiet, os);
    if (rc != 0) return rc;
    if (stop_requested()) {
      os << "interrupted before the first step\n";
      return static_cast<int>(ExitCode::infrastructure);
    }
  }

  ResultsFile out(path, o.resume.empty());
  if (o.resume.empty()) {
    out.write({{"type", "plan"},
               {"schema", plan::kResultsSchema},
               {"version", plan::kResultsVersion},
               {"fabperf_version", FABPERF_VERSION},
               {"started_at", plan::iso8601_now()},
               {"plan_file", p.file},
               {"plan", plan_obj},
               {"steps_total", steps.size()}});
  }

  const bool tty = !o.quiet && o.progress;
  const auto t0 = Clock::now();
  std::vector<plan::StepOutcome> outcomes;  // every done step, plan-wide
  std::vector<plan::KpiCheck> checks;
  std::vector<std::size_t> ran_in_test(p.tests.size(), 0);
  // A test's KPIs are judged after its last step (with A/B, its steps come back every block).
  std::vector<std::size_t> last_of_test(p.tests.size(), 0);
  for (std::size_t i = 0; i < steps.size(); ++i) last_of_test[steps[i].test] = i;
  std::optional<std::size_t> hook_block;  // the A/B block whose hook ran last
  bool hook_failed = false;
  bool interrupted = false, any_step_ran = false;
  int worst_infra = 0;               // 2 or 3 once a step could not run
  double ran_s = 0, ran_time_s = 0;  // wall time of the steps run so far, and their test time
  std::size_t ran = 0;

  const auto eval_test = [&](std::size_t ti) {
    const auto& t = p.tests[ti];
    if (t.kpis.empty()) {
      if (p.isolate && ran_in_test[ti] > 0 && !interrupted)
        run_isolation(p, ti, outcomes, checks, o, out, interrupted, os);
      return;
    }
    std::vector<plan::KpiCheck> stored;
    for (const auto& c : prior.kpis) {
      if (c.test && *c.test == t.name) stored.push_back(c);
    }
    if (ran_in_test[ti] == 0 && !stored.empty()) {
      checks.insert(checks.end(), stored.begin(), stored.end());
      return;
    }
    std::vector<plan::StepOutcome> mine;
    for (const auto& s : outcomes) {
      if (s.test == t.name) mine.push_back(s);
    }
    for (auto& c : plan::evaluate_kpis(t.kpis, mine, names, t.name)) {
      out.write(plan::to_json(c));
      checks.push_back(std::move(c));
    }
    if (p.isolate && !interrupted) run_isolation(p, ti, outcomes, checks, o, out, interrupted, os);
  };

  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    const auto& t = p.tests[s.test];
    std::vector<std::string> cn, sn;
    for (const auto h : s.clients) cn.push_back(p.hosts[h].name);
    for (const auto h : s.servers) sn.push_back(p.hosts[h].name);
    const auto it = prior.steps.find(s.id);
    if (it != prior.steps.end() && it->second["status"] == "done") {
      try {
        outcomes.push_back({s.id, t.name, plan::decode_step_result(it->second["result"])});
      } catch (const UsageError& e) {
        throw UsageError(fmt::format("--resume {}: step {}: {}", path, s.id, e.what()));
      }
    } else {
      if (stop_requested()) {
        interrupted = true;
        break;
      }
      const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      double left = 0;
      for (std::size_t j = i; j < steps.size(); ++j) {
        const auto jt = prior.steps.find(steps[j].id);
        if (jt == prior.steps.end() || jt->second["status"] != "done") {
          left += std::chrono::duration<double>(p.tests[steps[j].test].spec.time()).count() + plan::kStepOverheadS;
        }
      }
      // Once steps have run, their measured set-up cost replaces the estimate.
      if (ran > 0) {
        double planned = 0;
        std::size_t n_left = 0;
        for (std::size_t j = i; j < steps.size(); ++j) {
          const auto jt = prior.steps.find(steps[j].id);
          if (jt == prior.steps.end() || jt->second["status"] != "done") ++n_left;
        }
        planned = left - static_cast<double>(n_left) * plan::kStepOverheadS;
        left = planned + static_cast<double>(n_left) *
                             std::max(0.0, ran_s / static_cast<double>(ran) - ran_time_s / static_cast<double>(ran));
      }
      const std::string step_line = fmt::format("[{}/{}] {} ({} clients, {} servers)  elapsed {}  ETA {}", i + 1,
                                                steps.size(), s.id, cn.size(), sn.size(), hms(elapsed), hms(left));
      if (tty) os << "\r\033[K" << step_line << std::flush;
      if (p.ab && hook_block != s.block) {
        // The block's configuration first: its hook, on this host, before its first step.
        const bool is_a = s.config == "A";
        const std::string& cmd = is_a ? p.ab->a : p.ab->b;
        const std::string& cname = is_a ? p.ab->a_name : p.ab->b_name;
        if (tty) os << "\r\033[K";
        const std::string started = plan::iso8601_now();
        const auto hr = run_hook(cmd, p.ab->timeout_s);
        out.write({{"type", "hook"},
                   {"config", s.config},
                   {"name", cname},
                   {"round", s.trial},
                   {"command", cmd},
                   {"exit_code", hr.exit_code},
                   {"timed_out", hr.timed_out},
                   {"error", hr.error},
                   {"started_at", started},
                   {"duration_s", hr.duration_s},
                   {"output_tail", hr.output}});
        hook_block = s.block;
        const bool ok = hr.exit_code == 0 && !hr.timed_out;
        if (!o.quiet || !ok) {
          os << fmt::format("hook {} ({}) round {}: {} in {:.1f} s: {}\n", s.config, cname, s.trial,
                            hr.timed_out        ? fmt::format("killed after {} s", p.ab->timeout_s)
                            : !hr.error.empty() ? "could not start (" + hr.error + ")"
                                                : fmt::format("exit {}", hr.exit_code),
                            hr.duration_s, cmd);
        }
        if (!ok) {
          os << "hook output (last lines):\n"
             << (hr.output.empty() ? "(none)\n" : hr.output)
             << (hr.output.empty() || hr.output.back() == '\n' ? "" : "\n");
          os << fmt::format(
                    "plan stopped: the hook for {} failed; nothing measured is lost (--resume {} runs the rest "
                    "once the hook works)\n",
                    cname, path)
             << std::flush;
          hook_failed = true;
          break;
        }
      }
      RunRequest req;
      req.spec = t.spec;
      req.interval = t.interval;
      req.key = o.key;
      req.connect_timeout = o.connect_timeout;
      if (tty) {
        req.progress = [&](double e, double total, double mb) {
          os << "\r\033[K" << step_line << "  step " << progress_text(e, total, mb) << std::flush;
        };
      }
      for (const auto h : s.servers) req.servers.push_back(p.hosts[h].hp);
      for (const auto h : s.clients) req.clients.push_back(p.hosts[h].hp);
      req.pairs = s.pairs;
      json rec = {{"type", "step"},
                  {"index", s.index},
                  {"id", s.id},
                  {"test", t.name},
                  {"pattern", std::string(plan::to_string(t.pattern.pattern))},
                  {"clients", cn},
                  {"servers", sn},
                  {"status", "done"},
                  {"error", ""},
                  {"started_at", plan::iso8601_now()},
                  {"base_id", s.base_id},
                  {"trial", s.trial}};
      if (!s.config.empty()) rec["config"] = s.config;
      const auto st0 = Clock::now();
      std::string summary;
      std::optional<plan::StepResult> result;
      try {
        const RunRecord r = run_test(req);
        const Report report = compute_report(r);
        rec["result"] = render_json(report);
        result = plan::decode_step_result(rec["result"]);
        if (r.interrupted) {
          rec["status"] = "interrupted";
          rec["error"] = "interrupted by the user";
          interrupted = true;
        } else if (!report.complete) {
          rec["status"] = "failed";
          std::string err;
          for (const auto& n : r.nodes) {
            if (!n.error.empty()) err += (err.empty() ? "" : "; ") + n.error;
          }
          rec["error"] = err.empty() ? "incomplete result (a node did not report)" : err;
          worst_infra = worst_infra == 2 ? 2 : 3;
        }
        const double mb = report.aggregate.mb_per_s;
        summary = mb >= 100 ? fmt::format("{:.0f} MB/s", mb) : fmt::format("{:.3g} MB/s", mb);
        // Bus bandwidth (incast, all-to-all) or bisection bandwidth (halves): read against line rate.
        const auto fig = plan::step_figures(t.pattern.pattern, t.hosts.size(), *result);
        if (!fig.is_null()) {
          rec["figures"] = fig;
          summary += ", " + plan::render_step_figures(fig);
        }
      } catch (const Interrupted& e) {
        rec["status"] = "interrupted";
        rec["error"] = e.what();
        interrupted = true;
        summary = "interrupted";
      } catch (const Error& e) {
        rec["status"] = "failed";
        rec["error"] = e.what();
        worst_infra = e.code() == ExitCode::usage ? 2 : (worst_infra == 2 ? 2 : 3);
        summary = "failed";
      }
      const double dur = std::chrono::duration<double>(Clock::now() - st0).count();
      rec["duration_s"] = dur;
      out.write(rec);
      any_step_ran = true;
      ++ran_in_test[s.test];
      ran_s += dur;
      ran_time_s += std::chrono::duration<double>(t.spec.time()).count();
      ++ran;
      const std::string status = rec["status"].get<std::string>();
      if (status == "done") outcomes.push_back({s.id, t.name, *result});
      // Every step's outcome stays on the screen (on a terminal the live line gives way to it).
      if (!o.quiet) {
        if (tty) os << "\r\033[K";
        std::string flows;
        for (const auto& [c, v] : s.pairs) flows += fmt::format("{}{}->{}", flows.empty() ? "" : " ", cn[c], sn[v]);
        if (flows.size() > 60) flows = fmt::format("{} pairs", s.pairs.size());
        os << fmt::format("step {}/{} {} ({}): {}{} in {:.1f} s\n", i + 1, steps.size(), s.id, flows, status,
                          status == "done" ? ", " + summary : ": " + rec["error"].get<std::string>(), dur)
           << std::flush;
      }
      if (interrupted) break;
    }
    // A test's KPIs once its last step is behind.
    if (i == last_of_test[s.test]) eval_test(s.test);
    if (interrupted) break;
  }
  if (tty) os << "\r\033[K" << std::flush;

  if (!interrupted && !hook_failed && !p.kpis.empty()) {
    std::vector<plan::KpiCheck> stored;
    for (const auto& c : prior.kpis) {
      if (!c.test) stored.push_back(c);
    }
    if (!any_step_ran && !stored.empty()) {
      checks.insert(checks.end(), stored.begin(), stored.end());
    } else {
      for (auto& c : plan::evaluate_kpis(p.kpis, outcomes, names, std::nullopt)) {
        out.write(plan::to_json(c));
        checks.push_back(std::move(c));
      }
    }
  }
  bool kpi_failed = false;
  for (const auto& c : checks) kpi_failed = kpi_failed || !c.pass;
  // An A/B plan that states what B should do ends with compare's verdict on its own results
  // (every done trial, resumed runs included): `fabperf compare RESULTS` says the same.
  std::string ab_verdict;
  if (p.ab && !interrupted && !hook_failed) {
    TrialCompareOptions co;
    co.expect = parse_expectations(p.ab->expect, p.ab->expect_rest, p.ab->expect_gain);
    if (!co.expect.empty()) {
      const auto sides = load_trial_sets(path);
      const auto cmp = compare_trial_sets(sides.at(0), sides.at(1), co);
      ab_verdict = render_trial_comparison_text(cmp);
      kpi_failed = kpi_failed || cmp.failed;
    }
  }
  int code = 0;
  if (worst_infra == 2) {
    code = 2;
  } else if (worst_infra == 3 || interrupted || hook_failed) {
    code = 3;
  } else if (kpi_failed) {
    code = 1;
  }
  out.write({{"type", "end"},
             {"finished_at", plan::iso8601_now()},
             {"interrupted", interrupted},
             {"passed", code == 0},
             {"exit_code", code}});

  const std::size_t done_steps = outcomes.size();
  const std::size_t failed_steps = steps.size() - done_steps;
  os << plan::render_verdicts(checks) << ab_verdict;
  os << fmt::format("plan '{}': {} of {} steps done{}, {} in {}; results in {}\n", p.name, done_steps, steps.size(),
                    interrupted   ? " (interrupted: continue with --resume " + path + ")"
                    : hook_failed ? " (stopped by a failing hook: --resume " + path + " continues)"
                    : failed_steps > 0
                        ? fmt::format(" ({} failed or not run: --resume {} runs them again)", failed_steps, path)
                        : std::string(),
                    code == 0   ? "PASSED"
                    : code == 1 ? "KPI FAILED"
                    : code == 2 ? "PLAN ERROR"
                                : "INCOMPLETE",
                    hms(std::chrono::duration<double>(Clock::now() - t0).count()), path);
  return code;
}

}  // namespace fabperf::plan
