// --per-link sequential: the links of multi-link hosts swept one at a time. Each step is a full
// test restricted to link i on every host (so nothing else competes with it); the steps are then
// compared so that a link that falls behind its siblings is named.
#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/report/report.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>

namespace fabperf {
namespace {

// A step more than this far below the best step is named in the findings.
constexpr double kBehindPct = 10.0;

struct StepFigure {
  std::size_t link{0};
  std::string address;     // the first client's address on this link
  std::string interface;   // the client interface that carried the step
  double mb_per_s{0};      // aggregate payload of the step
  double best_goodput{0};  // that interface's framing limit (0: speed unknown)
  double efficiency_pct{-1};
  double pct_of_best_step{0};
  bool complete{true};
};

// The client link that carried most payload in a step.
StepFigure figure_of(const Report& r, std::size_t link, const std::string& address) {
  StepFigure f;
  f.link = link;
  f.address = address;
  f.mb_per_s = r.aggregate.mb_per_s;
  f.complete = r.complete;
  double most = -1;
  for (const auto& n : r.nodes) {
    if (n.role.find("client") == std::string::npos) continue;
    for (const auto& l : n.links) {
      const double moved = std::max(l.payload_tx_mb_per_s, l.payload_rx_mb_per_s);
      if (moved > most) {
        most = moved;
        f.interface = l.name + (l.vanished ? " (vanished)" : "");
        f.best_goodput = l.best_goodput_mb_per_s;
        f.efficiency_pct = l.efficiency_pct;
      }
    }
    break;  // the first client names the link; the aggregate covers them all
  }
  return f;
}

std::vector<std::string> compare_steps(std::vector<StepFigure>& steps) {
  double best = 0;
  for (const auto& s : steps) best = std::max(best, s.mb_per_s);
  std::vector<std::string> findings;
  for (auto& s : steps) {
    s.pct_of_best_step = best > 0 ? 100.0 * s.mb_per_s / best : 0;
    if (!s.complete) findings.push_back(fmt::format("link {} ({}): the step was incomplete", s.link, s.address));
    if (best > 0 && s.pct_of_best_step < 100.0 - kBehindPct) {
      findings.push_back(fmt::format("link {} ({} {}): {:.1f} MB/s is {:.1f}% below the best link", s.link, s.address,
                                     s.interface, s.mb_per_s, 100.0 - s.pct_of_best_step));
    }
  }
  return findings;
}

nlohmann::json to_json(const StepFigure& s) {
  return {{"link", s.link},
          {"address", s.address},
          {"interface", s.interface},
          {"mb_per_s", s.mb_per_s},
          {"best_goodput_mb_per_s", s.best_goodput},
          {"efficiency_pct", s.efficiency_pct},
          {"pct_of_best_step", s.pct_of_best_step},
          {"complete", s.complete}};
}

void write_json(const std::string& path, const nlohmann::json& doc, std::ostream& os) {
  if (path.empty()) return;
  if (path == "-") {
    os << doc.dump(2) << "\n";
    return;
  }
  std::ofstream out(path);
  out << doc.dump(2) << "\n";
  if (!out) throw SystemError("write results to", path, errno);
}

}  // namespace

int run_per_link_sequential(const RunRequest& base, std::size_t n_links, const std::string& json_path, bool quiet,
                            bool verbose, std::ostream& os) {
  const bool text = json_path != "-";
  nlohmann::json reports = nlohmann::json::array();
  std::vector<StepFigure> steps;
  auto document = [&](const std::vector<std::string>& findings, const std::string& stopped) {
    nlohmann::json sum = nlohmann::json::array();
    for (const auto& s : steps) sum.push_back(to_json(s));
    nlohmann::json doc{{"schema", "fabperf.per_link_sequential"},
                       {"schema_version", 1},
                       {"links", n_links},
                       {"steps", reports},
                       {"summary", sum},
                       {"findings", findings}};
    if (!stopped.empty()) doc["stopped"] = stopped;
    return doc;
  };
  for (std::size_t i = 0; i < n_links; ++i) {
    RunRequest req = base;
    for (auto* list : {&req.servers, &req.clients}) {
      for (auto& h : *list) h.links = {h.links.at(i)};
    }
    if (base.bind_devs.size() > 1) req.bind_devs = {base.bind_devs[i]};
    const std::string address = req.clients.front().links.front();
    RunRecord rec;
    try {
      rec = run_test(req);
    } catch (const Error& e) {
      // The steps already measured are kept: written out, then the failure is reported.
      write_json(json_path, document({}, fmt::format("link {}: {}", i, e.what())), os);
      throw Error(e.code(), fmt::format("--per-link sequential, link {} ({}): {}", i, address, e.what()));
    }
    const Report rep = compute_report(rec);
    reports.push_back(render_json(rep));
    steps.push_back(figure_of(rep, i, address));
    if (text) {
      os << fmt::format("== link {} of {}: {} ==\n", i + 1, n_links, address);
      os << (quiet ? render_summary_line(rep) + "\n" : render_text(rep, verbose)) << "\n";
    }
  }
  const auto findings = compare_steps(steps);
  write_json(json_path, document(findings, ""), os);
  if (text) {
    os << fmt::format("per-link sequential: {} links, one at a time\n", n_links);
    os << fmt::format("  {:>4}  {:<24} {:<12} {:>10} {:>14} {:>11} {:>10}\n", "link", "address", "interface", "MB/s",
                      "best goodput", "efficiency", "of best");
    for (const auto& s : steps) {
      os << fmt::format("  {:>4}  {:<24} {:<12} {:>10.2f} {:>14} {:>11} {:>9.1f}%\n", s.link, s.address,
                        s.interface.empty() ? "-" : s.interface, s.mb_per_s,
                        s.best_goodput > 0 ? fmt::format("{:.2f}", s.best_goodput) : "-",
                        s.efficiency_pct >= 0 ? fmt::format("{:.1f}%", s.efficiency_pct) : "-", s.pct_of_best_step);
    }
    for (const auto& f : findings) os << "  ! " << f << "\n";
  }
  const bool complete = std::all_of(steps.begin(), steps.end(), [](const StepFigure& s) { return s.complete; });
  return complete ? 0 : static_cast<int>(ExitCode::infrastructure);
}

}  // namespace fabperf
