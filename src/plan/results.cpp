// Reading results back for --resume: the results file through load_results, the one reader of
// results files.
#include <fabperf/core/error.hpp>
#include <fabperf/plan/plan.hpp>
#include <fabperf/report/plan_report.hpp>

#include <fmt/format.h>

namespace fabperf::plan {

ResumeState read_results(const std::string& path) {
  RawResults raw = load_results(path);
  if (raw.single_run) throw UsageError(fmt::format("--resume {}: not a fabperf plan results file", path));
  ResumeState st{std::move(raw.plan), {}, std::move(raw.kpis)};
  for (auto& s : raw.steps) {
    // The id first: json's operator= takes its argument by value, and C++17 evaluates the right
    // side of an assignment first, so `steps[s["id"]] = std::move(s)` would read a moved-from s.
    auto id = s["id"].get<std::string>();
    st.steps[std::move(id)] = std::move(s);
  }
  return st;
}

}  // namespace fabperf::plan
