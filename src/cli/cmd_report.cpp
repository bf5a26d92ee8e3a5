// `fabperf report RESULTS [--format text|json|csv|junit|html] [--table T] [-o FILE]`: load,
// build the model, render. Exit 0 when a report was written (whatever the verdict), 2 on a bad
// file or option; with --exit-code the verdict's code instead (0 pass, 1 KPI failed, 3 error).
#include "cli/options.hpp"

#include <fabperf/report/plan_report.hpp>

#include <cerrno>
#include <fstream>
#include <iostream>

namespace fabperf::cli {

int cmd_report(int argc, char** argv) {
  cxxopts::Options o(
      "fabperf report",
      "Render plan results (fabperf run --results FILE) or one run's JSON: fabperf report RESULTS [options]");
  o.add_options()("f,format", "text, json, csv, junit or html", cxxopts::value<std::string>()->default_value("text"))(
      "table", "csv only: steps (one row per step x node), pairs, links or kpis",
      cxxopts::value<std::string>()->default_value("steps"))("o,output", "write to FILE instead of stdout",
                                                             cxxopts::value<std::string>())(
      "exit-code",
      "exit with the verdict: 0 pass (or no KPI), 1 a KPI failed, 3 a step failed or the plan did not finish")(
      "file", "", cxxopts::value<std::vector<std::string>>())("h,help", "this help");
  const auto r = prefix_errors("report: ", [&] { return parse_options(o, argc, argv, {"file"}, "RESULTS"); });
  const auto format = r["format"].as<std::string>();
  const auto table = r["table"].as<std::string>();
  const auto output = get_or<std::string>(r, "output");
  const auto files = get_or<std::vector<std::string>>(r, "file");
  if (files.size() != 1) throw UsageError("report: give exactly one results file: fabperf report RESULTS");
  if (format != "text" && format != "json" && format != "csv" && format != "junit" && format != "html") {
    throw UsageError(fmt::format("--format '{}': expected text, json, csv, junit or html", format));
  }
  if (r.count("table") && format != "csv") throw UsageError("--table applies to --format csv only");

  // Text and HTML show the details of the listed steps only (docs/reports.md, "Large plans").
  const PlanReport report = read_plan_report(files[0], format == "text" || format == "html");
  std::string text;
  if (format == "text") text = render_plan_text(report);
  if (format == "json") text = render_plan_json(report).dump(2) + "\n";
  if (format == "csv") text = render_plan_csv(report, table);
  if (format == "junit") text = render_plan_junit(report);
  if (format == "html") text = render_plan_html(report);

  if (output.empty() || output == "-") {
    std::cout << text << std::flush;
  } else {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    if (!out) throw SystemError("report: open", output, errno);
    out << text;
    out.close();
    if (!out) throw SystemError("report: write", output, errno);
  }
  if (!r.count("exit-code")) return 0;
  if (report.verdict == "FAIL") return static_cast<int>(ExitCode::kpi_failed);
  if (report.verdict == "ERROR" || report.verdict == "INCOMPLETE") return static_cast<int>(ExitCode::infrastructure);
  return 0;
}

}  // namespace fabperf::cli
