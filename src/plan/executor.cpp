// The plan executor behind `fabperf run PLAN` and `fabperf run --pattern` (include/fabperf/plan/plan_run.hpp):
// pre-flight, the steps, A/B hooks, isolation rounds, KPIs and verdicts. Results go to a JSON Lines
// file, one record per finished step, written and synced before the next step starts
// (docs/results-format.md); what a person reads goes to the stream the caller gives.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/core/build_config.hpp>
#include <fabperf/core/bytes.hpp>
#include <fabperf/core/child.hpp>
#include <fabperf/core/clock.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/fd.hpp>
#include <fabperf/core/stop.hpp>
#include <fabperf/plan/isolate.hpp>
#include <fabperf/plan/plan_run.hpp>
#include <fabperf/report/compare.hpp>
#include <limits>
#include <map>
#include <optional>
#include <ostream>

namespace fabperf::plan {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

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
  return fmt::format("{}-{}.jsonl", base.empty() ? "plan" : base, wall_clock_text("%Y%m%d-%H%M%S", true));
}

// A step's request: the test's settings, the run's key and time-out.
RunRequest test_request(const PlanTest& t, const RunOptions& o) {
  RunRequest req;
  req.spec = t.spec;
  req.interval = t.interval;
  req.key = o.key;
  req.connect_timeout = o.connect_timeout;
  return req;
}

// A test's step outcomes (or KPI checks, by an optional test name: null is plan-wide).
template <typename T, typename Test>
std::vector<T> of_test(const std::vector<T>& v, const Test& test) {
  std::vector<T> out;
  std::copy_if(v.begin(), v.end(), std::back_inserter(out), [&](const T& x) { return x.test == test; });
  return out;
}

// An A/B hook: `/bin/sh -c command` on this host (never on an agent), in its own process group (a
// Child), with stdin at end of file, bounded in time, its output kept (docs/statistics.md).
struct HookRun {
  int exit_code{-1};  // the command's status; 128+N when killed by signal N; -1 when it could not start
  double duration_s{0};
  bool timed_out{false};  // killed (with its process group) after the timeout
  std::string output;     // the last kHookOutputTail bytes of stdout and stderr together
  std::string error;      // why it could not start
};
constexpr std::size_t kHookOutputTail = 4096;

HookRun run_hook_command(const std::string& command, double timeout_s) {
  HookRun h;
  const std::int64_t t0 = mono_now_ns();
  const std::int64_t deadline = t0 + static_cast<std::int64_t>(timeout_s * 1e9);
  try {
    Child c("hook", {"/bin/sh", "-c", command}, Child::Stderr::merged);
    c.close_in();  // end of file at once, as from /dev/null
    while (c.out >= 0) {
      const std::int64_t left_ms = (deadline - mono_now_ns()) / 1'000'000;
      if (left_ms <= 0) {
        h.timed_out = true;
        c.signal(SIGKILL);  // its process group: everything the hook started
        break;
      }
      pollfd p{c.out, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left_ms, 1000))) <= 0) continue;
      if (!read_some(c.out, h.output, SIZE_MAX)) c.close_out();
      if (h.output.size() > 2 * kHookOutputTail) h.output.erase(0, h.output.size() - kHookOutputTail);
    }
    // The output closed: the shell is ending (or a background child kept the pipe and went away).
    // Wait for the shell within what is left of the timeout.
    if (!c.reap(static_cast<int>(std::max<std::int64_t>(0, (deadline - mono_now_ns()) / 1'000'000)))) {
      h.timed_out = true;
      c.signal(SIGKILL);
      c.reap(5000);
    }
    h.exit_code = c.exit_code();
  } catch (const std::exception& e) {
    h.error = e.what();
  }
  if (h.output.size() > kHookOutputTail) h.output.erase(0, h.output.size() - kHookOutputTail);
  h.duration_s = static_cast<double>(mono_now_ns() - t0) / 1e9;
  return h;
}

// One run of a plan, its phases as methods over what they share.
class PlanRun {
 public:
  PlanRun(const Plan& p, const RunOptions& o, std::ostream& os)
      : p_(p),
        o_(o),
        os_(os),
        steps_(expand(p)),
        names_(node_names(p)),
        plan_obj_(plan_json(p)),
        ran_in_test_(p.tests.size(), 0),
        last_of_test_(p.tests.size(), 0) {
    // A test's KPIs are judged after its last step (with A/B, its steps come back every block).
    for (std::size_t i = 0; i < steps_.size(); ++i) last_of_test_[steps_[i].test] = i;
  }

  int run() {
    // Resume: the same plan, steps already done are not run again.
    path_ = o_.results;
    if (!o_.resume.empty()) {
      if (!o_.results.empty() && o_.results != o_.resume)
        throw UsageError("--results and --resume: give one file (a resumed run appends to it)");
      prior_ = load_results(o_.resume);
      if (prior_.single_run) throw UsageError(fmt::format("--resume {}: not a fabperf plan results file", o_.resume));
      for (const auto& s : prior_.steps) resumed_[s.at("id").get<std::string>()] = &s;
      if (prior_.plan.value("plan", json()) != plan_obj_) {
        throw UsageError(fmt::format(
            "--resume {}: written for a different plan (hosts, tests, settings or KPIs changed)", o_.resume));
      }
      path_ = o_.resume;
    } else if (path_.empty()) {
      path_ = default_results_name(p_.name);
    }
    const auto to_run = static_cast<std::size_t>(
        std::count_if(steps_.begin(), steps_.end(), [&](const PlannedStep& s) { return pending(s.id); }));
    if (!o_.quiet) {
      os_ << fmt::format(
          "plan '{}': {} tests, {} steps{}, estimated {} (results: {})\n", p_.name, p_.tests.size(), steps_.size(),
          to_run == steps_.size() ? "" : fmt::format(" ({} to run, {} done before)", to_run, steps_.size() - to_run),
          hms(seconds_left(0)), path_);
    }
    // Between steps a SIGINT/SIGTERM stops the plan before its next step; during a step the
    // coordinator stops the test and keeps what was measured.
    stop::mark();
    if (o_.preflight && to_run > 0) {
      const int rc = run_preflight(p_, o_.key, o_.connect_timeout, o_.quiet, os_);
      if (rc != 0) return rc;
      if (stop::stopped()) {
        os_ << "interrupted before the first step\n";
        return static_cast<int>(ExitCode::infrastructure);
      }
    }
    out_ = UniqueFd(
        ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | (o_.resume.empty() ? O_EXCL : 0), 0644));
    if (!out_.valid() && errno == EEXIST) {
      throw UsageError(fmt::format(
          "--results {}: already exists (continue it with --resume {}, or choose another name)", path_, path_));
    }
    if (!out_.valid()) throw SystemError("open results file", path_, errno);
    if (o_.resume.empty()) {
      write({{"type", "plan"},
             {"schema", kPlanResultsSchema},
             {"version", kPlanResultsVersion},
             {"fabperf_version", FABPERF_VERSION},
             {"started_at", iso8601_utc_now()},
             {"plan_file", p_.file},
             {"plan", plan_obj_},
             {"steps_total", steps_.size()}});
    }
    tty_ = !o_.quiet && o_.progress;
    t0_ = Clock::now();
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const auto& s = steps_[i];
      if (!pending(s.id)) {
        outcomes_.push_back({s.id, p_.tests[s.test].name,
                             read_result_doc(resumed_.at(s.id)->at("result"), ReadMode::strict,
                                             fmt::format("--resume {}: step {}: step result", path_, s.id))});
      } else if (!run_step(i)) {
        break;
      }
      // A test's KPIs once its last step is behind.
      if (i == last_of_test_[s.test]) eval_test(s.test);
      if (interrupted_) break;
    }
    if (tty_) os_ << "\r\033[K" << std::flush;
    return finish();
  }

 private:
  // Not done in the file resumed (every step of a fresh run).
  [[nodiscard]] bool pending(const std::string& id) const {
    const auto it = resumed_.find(id);
    return it == resumed_.end() || (*it->second)["status"] != "done";
  }
  // Appends a whole line and syncs it: a crash or a dead agent loses nothing already written.
  void write(const json& j) {
    if (const int e = write_all(out_.get(), j.dump() + "\n"); e != 0) throw SystemError("write results file", path_, e);
    ::fsync(out_.get());
  }

  // The time the pending steps from `from` on will take; once steps have run, their measured
  // set-up cost replaces the estimate.
  double seconds_left(std::size_t from) const {
    std::vector<PlannedStep> left;
    std::copy_if(steps_.begin() + static_cast<std::ptrdiff_t>(from), steps_.end(), std::back_inserter(left),
                 [&](const PlannedStep& s) { return pending(s.id); });
    const double per_step =
        ran_ == 0 ? kStepOverheadS : std::max(0.0, (ran_s_ - ran_time_s_) / static_cast<double>(ran_));
    return estimate_seconds(p_, left) + static_cast<double>(left.size()) * (per_step - kStepOverheadS);
  }

  // The block's configuration first: its hook, on this host, before its first step. False when it
  // failed (the plan stops).
  bool run_hook(const PlannedStep& s) {
    const bool is_a = s.config == "A";
    const std::string& cmd = is_a ? p_.ab->a : p_.ab->b;
    const std::string& cname = is_a ? p_.ab->a_name : p_.ab->b_name;
    if (tty_) os_ << "\r\033[K";
    const std::string started = iso8601_utc_now();
    const auto hr = run_hook_command(cmd, p_.ab->timeout_s);
    write({{"type", "hook"},
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
    hook_block_ = s.block;
    const bool ok = hr.exit_code == 0 && !hr.timed_out;
    if (!o_.quiet || !ok) {
      os_ << fmt::format("hook {} ({}) round {}: {} in {:.1f} s: {}\n", s.config, cname, s.trial,
                         hr.timed_out        ? fmt::format("killed after {} s", p_.ab->timeout_s)
                         : !hr.error.empty() ? "could not start (" + hr.error + ")"
                                             : fmt::format("exit {}", hr.exit_code),
                         hr.duration_s, cmd);
    }
    if (ok) return true;
    os_ << "hook output (last lines):\n"
        << (hr.output.empty() ? "(none)\n" : hr.output) << (hr.output.empty() || hr.output.back() == '\n' ? "" : "\n");
    os_ << fmt::format(
               "plan stopped: the hook for {} failed; nothing measured is lost (--resume {} runs the rest once the "
               "hook works)\n",
               cname, path_)
        << std::flush;
    hook_failed_ = true;
    return false;
  }

  // Runs the test and puts its JSON result into rec["result"], then done(run, the result as read back
  // from there); an interruption or an error becomes the status and error. Returns the error's code.
  template <typename Done>
  ExitCode attempt(const RunRequest& req, json& rec, std::string& status, std::string& error, Done done) {
    try {
      const RunRecord run = run_test(req);
      rec["result"] = render_json(compute_report(run));
      interrupted_ = interrupted_ || run.interrupted;
      done(run, read_result_doc(rec["result"], ReadMode::strict));
    } catch (const Interrupted& e) {
      status = "interrupted";
      error = e.what();
      interrupted_ = true;
    } catch (const Error& e) {
      status = "failed";
      error = e.what();
      return e.code();
    }
    return ExitCode::ok;
  }

  // Runs step i (its block's hook first) and writes its record. False: the plan stops here.
  bool run_step(std::size_t i) {
    const auto& s = steps_[i];
    const auto& t = p_.tests[s.test];
    if (stop::stopped()) {
      interrupted_ = true;
      return false;
    }
    std::vector<std::string> cn, sn;
    for (const auto h : s.clients) cn.push_back(p_.hosts[h].name);
    for (const auto h : s.servers) sn.push_back(p_.hosts[h].name);
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0_).count();
    const std::string step_line =
        fmt::format("[{}/{}] {} ({} clients, {} servers)  elapsed {}  ETA {}", i + 1, steps_.size(), s.id, cn.size(),
                    sn.size(), hms(elapsed), hms(seconds_left(i)));
    if (tty_) os_ << "\r\033[K" << step_line << std::flush;
    if (p_.ab && hook_block_ != s.block && !run_hook(s)) return false;
    RunRequest req = test_request(t, o_);
    if (tty_) {
      req.progress = [&](double e, double total, double mb) {
        os_ << "\r\033[K" << step_line << "  step " << progress_text(e, total, mb) << std::flush;
      };
    }
    for (const auto h : s.servers) req.servers.push_back(p_.hosts[h].hp);
    for (const auto h : s.clients) req.clients.push_back(p_.hosts[h].hp);
    req.pairs = s.pairs;
    req.bind_devs = t.bind_devs;
    if (s.link) {  // per-link sequential: every host on its link i alone
      for (auto* list : {&req.servers, &req.clients}) {
        for (auto& h : *list) h.links = {h.links.at(*s.link)};
      }
      if (t.bind_devs.size() > 1) req.bind_devs = {t.bind_devs.at(*s.link)};
    }
    StepHead rec{.index = static_cast<int>(s.index),
                 .id = s.id,
                 .test = t.name,
                 .pattern = std::string(to_string(t.pattern.pattern)),
                 .clients = std::move(cn),
                 .servers = std::move(sn),
                 .status = "done",
                 .error = "",
                 .started_at = iso8601_utc_now(),
                 .base_id = s.base_id,
                 .trial = s.trial,
                 .config = s.config};
    json body = json::object();  // the record's result and figures
    const auto st0 = Clock::now();
    std::string summary;  // of a step done
    const ExitCode code = attempt(req, body, rec.status, rec.error, [&](const RunRecord& r, const ResultDoc& res) {
      if (r.interrupted) {
        rec.status = "interrupted";
        rec.error = "interrupted by the user";
      } else if (!res.complete) {
        rec.status = "failed";
        for (const auto& n : r.nodes) {
          if (!n.error.empty()) rec.error += (rec.error.empty() ? "" : "; ") + n.error;
        }
        if (rec.error.empty()) rec.error = "incomplete result (a node did not report)";
        step_failed(ExitCode::infrastructure);
      }
      summary = figure(res.aggregate.mb_per_s) + " MB/s";
      // Bus bandwidth (incast, all-to-all) or bisection bandwidth (halves): read against line rate.
      const auto fig = step_figures(t.pattern.pattern, t.hosts.size(), res);
      if (!fig.is_null()) {
        body["figures"] = fig;
        summary += ", " + render_step_figures(fig);
      }
      if (rec.status == "done") outcomes_.push_back({s.id, t.name, res});
    });
    if (code != ExitCode::ok) step_failed(code);
    rec.duration_s = std::chrono::duration<double>(Clock::now() - st0).count();
    body.update(plan_record("step", rec));
    write(body);
    ++ran_in_test_[s.test];
    ran_s_ += rec.duration_s;
    ran_time_s_ += std::chrono::duration<double>(t.spec.time()).count();
    ++ran_;
    // Every step's outcome stays on the screen (on a terminal the live line gives way to it).
    if (!o_.quiet) {
      if (tty_) os_ << "\r\033[K";
      std::string flows = flow_names(p_, s);
      if (flows.size() > 60) flows = fmt::format("{} pairs", s.pairs.size());
      os_ << fmt::format("step {}/{} {} ({}): {}{} in {:.1f} s\n", i + 1, steps_.size(), s.id, flows, rec.status,
                         rec.status == "done" ? ", " + summary : ": " + rec.error, rec.duration_s)
          << std::flush;
    }
    return !interrupted_;
  }

  // KPIs judged over `steps` and written; when none of the steps ran this time, the verdicts the
  // resumed file holds stand (false).
  bool judge(const KpiSet& k, const std::vector<StepOutcome>& steps, const std::optional<std::string>& test, bool ran) {
    const auto stored = of_test(prior_.kpis, test);
    if (!ran && !stored.empty()) {
      checks_.insert(checks_.end(), stored.begin(), stored.end());
      return false;
    }
    for (auto& c : evaluate_kpis(k, steps, names_, test)) {
      write(to_json(c));
      checks_.push_back(std::move(c));
    }
    return true;
  }

  void eval_test(std::size_t ti) {
    const auto& t = p_.tests[ti];
    if (t.per_link_sequential && ran_in_test_[ti] > 0) {
      auto sweep = compare_link_steps(p_, ti, steps_, outcomes_);
      write(sweep.record);
      os_ << sweep.text;
    }
    // Isolation follows a test judged (or without KPIs) this time, not the verdicts of a resumed one.
    const bool ran = ran_in_test_[ti] > 0;
    if (!(t.kpis.empty() ? ran : judge(t.kpis, of_test(outcomes_, t.name), t.name, ran))) return;
    if (p_.isolate && !interrupted_) run_isolation(ti);
  }

  // Retests the suspects of a failing test round by round (plan/isolate.cpp decides, this runs
  // the steps) and writes every round's results and the trace. Prints the trace as it goes.
  void run_isolation(std::size_t ti) {
    const auto& t = p_.tests[ti];
    // Patterns whose steps rank nodes against each other.
    const Pattern P = t.pattern.pattern;
    if (P != Pattern::all_to_all && P != Pattern::each_vs_rest && P != Pattern::incast && P != Pattern::all_pairs)
      return;
    std::map<std::string, std::uint32_t> index;
    std::vector<std::string> host_names;
    for (std::uint32_t i = 0; i < p_.hosts.size(); ++i) {
      index[p_.hosts[i].hp.str()] = i;
      host_names.push_back(p_.hosts[i].name);
    }
    const auto mine = of_test(outcomes_, t.name);
    auto failing = of_test(checks_, std::optional(t.name));
    std::erase_if(failing, [](const KpiCheck& c) { return c.pass; });
    if (mine.empty()) return;
    const auto sus = find_suspects(mine, index, host_names, std::string(to_string(t.spec.test())), failing);
    if (failing.empty() && sus.spread >= kSpreadTrigger) return;
    std::vector<std::string> trace;
    const auto say = [&](const std::string& line) {
      trace.push_back(line);
      os_ << "isolate " << t.name << ": " << line << "\n" << std::flush;
    };
    say(failing.empty()
            ? fmt::format("node spread {:.2f} is below {:.2f}: retesting the suspects", sus.spread, kSpreadTrigger)
            : fmt::format("{} KPI check(s) failed: retesting the suspects", failing.size()));
    for (const auto& l : sus.trace) say(l);
    Isolator iso(sus.suspects, sus.good, host_names, 2 * isolation_round_bound(t.hosts.size()));
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
        RunRequest req = test_request(t, o_);
        json pairs = json::array();
        std::vector<std::pair<std::uint32_t, std::uint32_t>> host_pairs;
        for (const auto& pr : st.pairs) {
          host_pairs.emplace_back(pr.client, pr.server);
          pairs.push_back({{"client", host_names[pr.client]}, {"server", host_names[pr.server]}, {"role", pr.role}});
        }
        set_host_pairs(req, host_pairs, [&](std::uint32_t h) { return p_.hosts[h].hp; });
        json rec = {{"type", "isolate"}, {"test", t.name}, {"round", round->number},         {"kind", round->kind},
                    {"step", k},         {"pairs", pairs}, {"started_at", iso8601_utc_now()}};
        std::string status = "done", error;
        std::vector<std::optional<double>> r(st.pairs.size());
        attempt(req, rec, status, error, [&](const RunRecord&, const ResultDoc& result) {
          // The result's pairs name nodes by index; map them back to plan hosts. A finding names
          // each host's busiest interface (the first round that saw it).
          std::map<std::uint64_t, std::uint32_t> node_host;
          for (const auto& n : result.nodes) {
            const auto it = index.find(n.name);
            if (it == index.end()) continue;
            node_host[n.index] = it->second;
            const auto busiest = std::ranges::max_element(n.links, {}, [](const LinkReport& l) {
              return l.kind == "loopback" ? -std::numeric_limits<double>::infinity() : payload_mb_per_s_of(l);
            });
            if (busiest != n.links.end() && busiest->kind != "loopback") links.emplace(it->second, busiest->name);
          }
          for (const auto& pr : result.pairs) {
            const auto c = node_host.find(pr.client);
            const auto v = node_host.find(pr.server);
            if (c == node_host.end() || v == node_host.end()) continue;
            for (std::size_t i = 0; i < st.pairs.size(); ++i) {
              if (st.pairs[i].client == c->second && st.pairs[i].server == v->second) r[i] = pr.tput.mb_per_s;
            }
          }
        });
        rec["status"] = status;
        rec["error"] = error;
        write(rec);
        rates.push_back(std::move(r));
        if (interrupted_ || stop::stopped()) break;
      }
      if (interrupted_ || stop::stopped()) {
        interrupted_ = true;
        say("interrupted");
        break;
      }
      iso.record(rates, links);
      flush_trace();
    }
    flush_trace();
    const json findings = iso.findings();
    for (const auto& f : iso.findings()) {
      if (f.slow) say("SLOW " + f.text);
    }
    write(
        {{"type", "isolation"}, {"test", t.name}, {"rounds", iso.rounds()}, {"trace", trace}, {"findings", findings}});
  }

  // Plan-wide KPIs, A/B verdict, the "end" record and the last lines.
  int finish() {
    if (!interrupted_ && !hook_failed_ && !p_.kpis.empty()) judge(p_.kpis, outcomes_, std::nullopt, ran_ > 0);
    bool kpi_failed = std::any_of(checks_.begin(), checks_.end(), [](const KpiCheck& c) { return !c.pass; });
    // An A/B plan that states what B should do ends with compare's verdict on its own results
    // (every done trial, resumed runs included): `fabperf compare RESULTS` says the same.
    std::string ab_verdict;
    if (p_.ab && !interrupted_ && !hook_failed_) {
      TrialCompareOptions co;
      co.expect = parse_expectations(p_.ab->expect, p_.ab->expect_rest, p_.ab->expect_gain);
      if (!co.expect.empty()) {
        const auto sides = load_trial_sets(path_);
        const auto cmp = compare_trial_sets(sides.at(0), sides.at(1), co);
        ab_verdict = render_trial_comparison_text(cmp);
        kpi_failed = kpi_failed || cmp.failed;
      }
    }
    const ExitCode code = step_error_ != ExitCode::ok    ? step_error_
                          : interrupted_ || hook_failed_ ? ExitCode::infrastructure
                          : kpi_failed                   ? ExitCode::kpi_failed
                                                         : ExitCode::ok;
    write(plan_record("end", PlanEnd{iso8601_utc_now(), interrupted_, code == ExitCode::ok, static_cast<int>(code)}));
    const std::size_t failed_steps = steps_.size() - outcomes_.size();
    os_ << render_verdicts(checks_) << ab_verdict;
    if (p_.repeat > 1 && !o_.quiet) {
      std::map<std::string, std::string> same;  // step id -> that step in every trial, with its configuration
      for (const auto& s : steps_) same[s.id] = s.base_id + (s.config.empty() ? "" : "@" + s.config);
      std::vector<std::pair<std::string, double>> trials;
      for (const auto& o : outcomes_) trials.emplace_back(same[o.id], o.result.aggregate.mb_per_s);
      os_ << render_trial_spread(trials);
    }
    os_ << fmt::format(
        "plan '{}': {} of {} steps done{}, {} in {}; results in {}\n", p_.name, outcomes_.size(), steps_.size(),
        interrupted_       ? " (interrupted: continue with --resume " + path_ + ")"
        : hook_failed_     ? " (stopped by a failing hook: --resume " + path_ + " continues)"
        : failed_steps > 0 ? fmt::format(" ({} failed or not run: --resume {} runs them again)", failed_steps, path_)
                           : std::string(),
        code == ExitCode::ok           ? "PASSED"
        : code == ExitCode::kpi_failed ? "KPI FAILED"
        : code == ExitCode::usage      ? "PLAN ERROR"
                                       : "INCOMPLETE",
        hms(std::chrono::duration<double>(Clock::now() - t0_).count()), path_);
    return static_cast<int>(code);
  }

  const Plan& p_;
  const RunOptions& o_;
  std::ostream& os_;
  const std::vector<PlannedStep> steps_;
  const std::map<std::string, std::string> names_;
  const json plan_obj_;
  std::string path_;
  RawResults prior_;                            // the results file resumed (load_results)
  std::map<std::string, const json*> resumed_;  // its last record of each step, by id
  UniqueFd out_;                                // the results file
  bool tty_{false};
  Clock::time_point t0_;
  std::vector<StepOutcome> outcomes_;  // every done step, plan-wide
  std::vector<KpiCheck> checks_;
  std::vector<std::size_t> ran_in_test_;
  std::vector<std::size_t> last_of_test_;
  std::optional<std::size_t> hook_block_;  // the A/B block whose hook ran last
  bool hook_failed_{false}, interrupted_{false};
  // A step that could not run: usage (a plan error) outranks infrastructure, whatever came first.
  ExitCode step_error_{ExitCode::ok};
  void step_failed(ExitCode c) {
    if (step_error_ != ExitCode::usage) step_error_ = c == ExitCode::usage ? c : ExitCode::infrastructure;
  }
  double ran_s_{0}, ran_time_s_{0};  // wall time of the steps run so far, and their test time
  std::size_t ran_{0};               // steps run (not resumed)
};

}  // namespace

int run_plan(const Plan& p, const RunOptions& o, std::ostream& os) {
  if (p.ab && !o.allow_hooks) {
    throw UsageError(
        fmt::format("plan {}: its [ab] hooks run commands on this host ('{}', '{}'): give --allow-hooks to let them",
                    p.file, p.ab->a, p.ab->b));
  }
  return PlanRun(p, o, os).run();
}

}  // namespace fabperf::plan
