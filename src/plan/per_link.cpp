// Hosts with several links: the device list of `bind-dev`, and `per-link = "sequential"`, whose
// steps (expand: one per link, every host restricted to its link i, so nothing else competes) are
// compared after the test so that a link that falls behind its siblings is named.
#include <fmt/format.h>
#include <algorithm>
#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/plan/plan.hpp>
#include <map>
#include <optional>

namespace fabperf::plan {

std::vector<std::string> parse_bind_devs(const std::string& text, std::size_t n_links) {
  if (text == "auto") {
    if (n_links == 0) throw UsageError("auto: give the hosts link addresses (NAME@ADDR+ADDR...)");
    return {"auto"};
  }
  std::vector<std::string> devs = split_list(text, '+');
  for (const auto& d : devs) {
    if (d.empty() || d.size() > 15 || d.find_first_of("/ \t") != std::string::npos)
      throw UsageError(fmt::format("'{}': '{}' is not an interface name (1-15 characters, no '/')", text, d));
  }
  if (devs.size() > 1 && devs.size() != n_links) {
    throw UsageError(fmt::format("'{}': {} devices for {} links per host (give one per link, or one for all)", text,
                                 devs.size(), n_links));
  }
  return devs;
}

LinkSweep compare_link_steps(const Plan& p, std::size_t test, const std::vector<PlannedStep>& steps,
                             const std::vector<StepOutcome>& outcomes) {
  // A step more than this far below the best step of its sweep is named in the findings.
  constexpr double kBehindPct = 10.0;
  struct Row {
    std::string sweep, address, interface = "-";
    std::uint32_t link{0};
    const ResultDoc* result{nullptr};  // null: the step did not complete
    std::optional<double> efficiency_pct;
  };
  std::vector<Row> rows;
  std::map<std::string, double> best;  // sweep -> its best step's MB/s
  for (const auto& s : steps) {
    if (s.test != test || !s.link) continue;
    Row r;
    r.link = *s.link;
    r.sweep = s.base_id.substr(0, s.base_id.rfind('/')) + s.id.substr(s.base_id.size());  // without "/linkI"
    r.address = p.hosts[s.clients.front()].hp.links.at(r.link);
    const auto o = std::find_if(outcomes.begin(), outcomes.end(), [&](const StepOutcome& x) { return x.id == s.id; });
    if (o != outcomes.end()) {
      r.result = &o->result;
      best[r.sweep] = std::max(best[r.sweep], o->result.aggregate.mb_per_s);
      // The first client names the interface: its link that carried most payload.
      const auto n = std::ranges::find_if(
          r.result->nodes, [](const NodeReport& x) { return x.role.find("client") != std::string::npos; });
      if (n != r.result->nodes.end() && !n->links.empty()) {
        const auto& l = *std::ranges::max_element(n->links, {}, payload_mb_per_s_of);
        if (payload_mb_per_s_of(l) > -1) {
          r.interface = l.name;
          r.efficiency_pct = l.efficiency_pct >= 0 ? std::optional(l.efficiency_pct) : std::nullopt;
        }
      }
    }
    rows.push_back(std::move(r));
  }
  LinkSweep out;
  out.record = {{"type", "per_link"}, {"test", p.tests[test].name}};
  nlohmann::json jrows = nlohmann::json::array();
  std::vector<std::string> findings;
  out.text = fmt::format(
      "per-link sequential, test {}: one link at a time\n  {:<16} {:>4}  {:<24} {:<12} {:>10} "
      "{:>11} {:>8}\n",
      p.tests[test].name, "step", "link", "address", "interface", "MB/s", "efficiency", "of best");
  for (const auto& r : rows) {
    const double mb = r.result ? r.result->aggregate.mb_per_s : 0;
    const double of_best = best[r.sweep] > 0 ? 100.0 * mb / best[r.sweep] : 0;
    const auto& eff = r.efficiency_pct;
    jrows.push_back({{"step", r.sweep},
                     {"link", r.link},
                     {"address", r.address},
                     {"interface", r.interface},
                     {"mb_per_s", mb},
                     {"efficiency_pct", eff ? nlohmann::json(*eff) : nlohmann::json()},
                     {"pct_of_best_step", of_best},
                     {"complete", r.result != nullptr}});
    out.text += fmt::format("  {:<16} {:>4}  {:<24} {:<12} {:>10.2f} {:>11} {:>7.1f}%\n", r.sweep, r.link, r.address,
                            r.interface, mb, eff ? fmt::format("{:.1f}%", *eff) : "-", of_best);
    if (!r.result) {
      findings.push_back(fmt::format("{}: link {} ({}): the step did not complete", r.sweep, r.link, r.address));
    } else if (best[r.sweep] > 0 && of_best < 100.0 - kBehindPct) {
      findings.push_back(fmt::format("{}: link {} ({} {}): {:.1f} MB/s is {:.1f}% below the best link", r.sweep, r.link,
                                     r.address, r.interface, mb, 100.0 - of_best));
    }
  }
  for (const auto& f : findings) out.text += "  ! " + f + "\n";
  out.record["links"] = std::move(jrows);
  out.record["findings"] = std::move(findings);
  return out;
}

}  // namespace fabperf::plan
