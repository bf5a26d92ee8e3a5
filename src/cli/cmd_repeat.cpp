// `fabperf run --repeat N`: N trials of one test with the same agents and settings. Each result
// is one line of the --json file, written and synced as the trial ends, so an interrupted series
// keeps every finished trial; `fabperf compare` reads the file as a set of trials.
#include "cli/commands.hpp"

#include <fabperf/core/bytes.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/stats.hpp>
#include <fabperf/report/report.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <cerrno>
#include <iostream>

namespace fabperf::cli {

int run_repeated(const RunRequest& req, std::uint32_t n, const std::string& json_path, bool quiet) {
  int fd = -1;
  if (json_path == "-") {
    fd = STDOUT_FILENO;
  } else if (!json_path.empty()) {
    fd = ::open(json_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw SystemError("open trials file", json_path, errno);
  }
  std::ostream& text = json_path == "-" ? std::cerr : std::cout;
  std::vector<double> mbs;
  int code = 0;
  for (std::uint32_t t = 1; t <= n; ++t) {
    RunRequest trial = req;
    if (req.progress) {  // the trial's number before the live figures
      trial.progress = [&, t](double e, double total, double mb) {
        std::cerr << "\r\033[K" << fmt::format("trial {}/{}: ", t, n) << progress_text(e, total, mb) << std::flush;
      };
    }
    const RunRecord rec = run_test(trial);
    if (req.progress) std::cerr << "\r\033[K" << std::flush;
    const Report report = compute_report(rec);
    auto j = render_json(report);
    j["trial"] = t;
    j["trial_count"] = n;
    if (fd >= 0) {
      if (const int e = write_all(fd, j.dump() + "\n"); e != 0)
        throw SystemError("write trials file", json_path == "-" ? "standard output" : json_path, e);
      if (fd != STDOUT_FILENO) ::fsync(fd);
    }
    text << fmt::format("trial {}/{}: {}\n", t, n, render_summary_line(report)) << std::flush;
    if (!report.complete) {
      code = static_cast<int>(ExitCode::infrastructure);
      text << fmt::format("trial {}: incomplete (a node did not report); stopping after {} of {} trials\n", t, t, n);
      break;
    }
    if (rec.interrupted) {
      code = static_cast<int>(ExitCode::infrastructure);
      text << fmt::format("interrupted after {} of {} trials\n", t, n);
      break;
    }
    mbs.push_back(report.aggregate.mb_per_s);
  }
  if (fd >= 0 && fd != STDOUT_FILENO) ::close(fd);
  if (!quiet && !mbs.empty()) {
    const double m = stats::mean(mbs);
    double lo = mbs.front(), hi = mbs.front();
    for (const double v : mbs) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    text << fmt::format(
        "{} trials: mean {:.1f} MB/s, run-to-run cv {:.1f}%, min {:.1f}, max {:.1f}{}\n", mbs.size(), m,
        m > 0 ? 100 * stats::stddev(mbs) / m : 0.0, lo, hi,
        json_path.empty() || json_path == "-" ? "" : "; compare sets with: fabperf compare " + json_path + " OTHER");
  }
  return code;
}

}  // namespace fabperf::cli
