// Running a plan (`fabperf run PLAN`, `fabperf run --pattern`): the library's executor, so the
// command line only parses and calls. What a person reads goes to the stream the caller gives;
// the results file is written as each step ends (docs/results-format.md).
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>

#include <fabperf/plan/plan.hpp>
#include <fabperf/proto/auth.hpp>

namespace fabperf::plan {

struct RunOptions {
  std::string results;  // empty: NAME-YYYYmmdd-HHMMSS.jsonl in the current directory
  std::string resume;   // continue this results file
  bool quiet{false};
  bool preflight{true};
  bool allow_hooks{false};  // --allow-hooks: a plan's [ab] hooks may run commands on this host
  bool progress{false};     // redraw one progress line (the output is a terminal)
  auth::Key key;
  std::chrono::milliseconds connect_timeout{5000};
};

// Executes a plan (pre-flight, steps, results file, KPIs, verdicts); returns the exit code
// (docs/usage.md "Exit codes"). SIGINT/SIGTERM (fabperf/core/stop.hpp) stop it between steps.
int run_plan(const Plan& p, const RunOptions& o, std::ostream& os);

// The probe test alone: every host loads every other one at once, briefly. 0 when fine or only
// warnings, 3 on errors.
int run_preflight(const Plan& p, const auth::Key& key, std::chrono::milliseconds connect_timeout, bool quiet,
                  std::ostream& os);

}  // namespace fabperf::plan
