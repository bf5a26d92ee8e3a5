#include <fabperf/core/error.hpp>
#include <fabperf/report/compare.hpp>
#include "report/match.hpp"
#include "report/result_json.hpp"

#include "report/text_table.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace fabperf {

using nlohmann::json;

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Delta, name, before_mb_per_s, after_mb_per_s, change_pct, matched)

std::string_view to_string(LinkVerdict v) {
  static constexpr std::string_view kWords[] = {
      "improved as expected", "improved less than expected", "improved", "no change", "regressed",
      "missing in one run"};
  return kWords[static_cast<std::size_t>(v)];  // in the enum's order
}

// The JSON keys are the field names; a link's verdict is added in words, a bond side absent in a
// run is null.
void to_json(json& j, const LinkDelta& d) {
  FABPERF_JSON_FIELDS(j, d, node, link, before_mb_per_s, after_mb_per_s, change_pct, before_speed_mbps,
                      after_speed_mbps, expected_pct, expectation, noise_before_pct, noise_after_pct, fails);
  j["verdict"] = to_string(d.verdict);
}
void to_json(json& j, const BondSide& s) {
  if (!s.present) return;
  FABPERF_JSON_FIELDS(j, s, mode, hash_policy, tx_mb_per_s, rx_mb_per_s, tx_members_used, rx_members_used, summary);
  j["capacity_used_pct"] = jsonu::nonneg(s.capacity_used_pct);
  j["members"] = jsonu::array_json(s.members, [](const BondMemberReport& m) {
    json o{{"member", m.name}};
    FABPERF_JSON_FIELDS(o, m, tx_share_pct, rx_share_pct, link_failures);
    return o;
  });
}
void to_json(json& j, const BondDelta& d) {
  FABPERF_JSON_FIELDS(j, d, node, bond, before, after, verdict);
}

std::optional<Expectation> LinkExpectations::for_link(const std::string& node, const std::string& link,
                                                      std::int64_t before_speed, std::int64_t after_speed) const {
  // A run's nodes are "host:port"; the user may name the host alone.
  const std::string full = node + "/" + link, by_host = node.substr(0, node.rfind(':')) + "/" + link;
  for (const auto& [name, pct] : links) {
    if (name == link || name == full || name == by_host)
      return Expectation{pct, fmt::format("--expect {}={:+g}%", name, pct)};
  }
  if (rest == Rest::unchanged) return Expectation{0, "--expect-rest unchanged"};
  if (rest == Rest::speeds && before_speed > 0 && after_speed > 0) {
    return Expectation{change(static_cast<double>(before_speed), static_cast<double>(after_speed)),
                       fmt::format("speed {} -> {} Mb/s", before_speed, after_speed)};
  }
  return gain();
}

std::optional<Expectation> LinkExpectations::gain() const {
  if (!gain_pct) return std::nullopt;
  return Expectation{*gain_pct, fmt::format("--expect-gain {:g}", *gain_pct)};
}

double parse_percent(const std::string& text, const std::string& option, double lo, double hi) {
  std::string num = text;
  if (!num.empty() && num.back() == '%') num.pop_back();
  char* end = nullptr;
  const double v = std::strtod(num.c_str(), &end);
  if (num.empty() || end != num.c_str() + num.size() || !(v > lo && v < hi)) {
    throw UsageError(fmt::format("--{} '{}': expected a percentage such as {}", option, text, lo < 0 ? "40" : "2"));
  }
  return v;
}

LinkExpectations parse_expectations(const std::vector<std::string>& links, const std::string& rest,
                                    const std::string& gain) {
  LinkExpectations e;
  for (const auto& l : links) {
    const auto eq = l.rfind('=');
    if (eq == 0 || eq == std::string::npos)
      throw UsageError(fmt::format("--expect '{}': expected LINK=PCT, e.g. h4/eth0=+150% or eth0=0", l));
    e.links.emplace_back(l.substr(0, eq), parse_percent(l.substr(eq + 1), "expect " + l.substr(0, eq), -100, 10000));
  }
  using Rest = LinkExpectations::Rest;
  e.rest = rest == "unchanged" ? Rest::unchanged : rest == "speeds" ? Rest::speeds : Rest::none;
  if (e.rest == Rest::none && !rest.empty())
    throw UsageError(fmt::format("--expect-rest '{}': expected 'unchanged' or 'speeds'", rest));
  if (!gain.empty()) {
    if (!e.empty()) {
      throw UsageError(
          "--expect-gain applies to every link: give it alone, or per link with --expect and --expect-rest");
    }
    e.gain_pct = parse_percent(gain, "expect-gain", -100, 10000);
  }
  return e;
}

namespace {

// Tolerances: a change inside the noise band is "no change"; an expected gain is met when the
// measured gain is within 5 percentage points (or the noise, if larger) of it.
constexpr double kMinNoiseBandPct = 3.0;
constexpr double kExpectTolerancePct = 5.0;

// Coefficient of variation (%) of the per-interval tx+rx rates; the first interval is dropped
// when there are several (shapers' bursts inflate it).
double noise_pct(const std::vector<IntervalPoint>& intervals) {
  std::vector<double> v;
  v.reserve(intervals.size());
  for (const auto& p : intervals) v.push_back(p.tx_mb_per_s + p.rx_mb_per_s);
  if (v.size() > 2) v.erase(v.begin());
  if (v.size() < 2) return 0.0;
  const double m = stats::mean(v);
  return m > 0 ? 100.0 * stats::stddev(v) / m : 0.0;
}

// One link's verdict: its change against both runs' noise and against what was expected of it.
// A link in one run only (the other null) is missing: a port that went away or appeared is news
// either way, and fails.
LinkDelta judge_link(const std::pair<std::string, std::string>& key, const LinkReport* before, const LinkReport* after,
                     const LinkExpectations& expect) {
  LinkDelta d;
  d.node = key.first;
  d.link = key.second;
  d.verdict = LinkVerdict::missing;
  d.fails = true;
  if (before) {
    d.before_mb_per_s = payload_mb_per_s_of(*before);
    d.before_speed_mbps = before->speed_mbps;
    d.noise_before_pct = noise_pct(before->intervals);
  }
  if (after) {
    d.after_mb_per_s = payload_mb_per_s_of(*after);
    d.after_speed_mbps = after->speed_mbps;
  }
  if (!before || !after) return d;
  d.noise_after_pct = noise_pct(after->intervals);
  d.change_pct = change(d.before_mb_per_s, d.after_mb_per_s);
  const auto expected = expect.for_link(d.node, d.link, d.before_speed_mbps, d.after_speed_mbps);
  if (expected) {
    d.expected_pct = expected->pct;
    d.expectation = expected->reason;
  } else if (d.before_speed_mbps > 0 && d.after_speed_mbps > 0 && d.before_speed_mbps != d.after_speed_mbps) {
    d.expected_pct = change(static_cast<double>(d.before_speed_mbps), static_cast<double>(d.after_speed_mbps));
  }
  const double band = std::max(kMinNoiseBandPct, 2.0 * std::max(d.noise_before_pct, d.noise_after_pct));
  const double tolerance = std::max(kExpectTolerancePct, band);
  const int moved = d.change_pct < -band ? -1 : d.change_pct <= band ? 0 : 1;
  d.verdict = moved < 0                                     ? LinkVerdict::regressed
              : moved == 0                                  ? LinkVerdict::no_change
              : !d.expected_pct                             ? LinkVerdict::improved
              : d.change_pct >= *d.expected_pct - tolerance ? LinkVerdict::as_expected
                                                            : LinkVerdict::less_than_expected;
  d.fails = misses(expected ? d.expected_pct : std::nullopt, expected && std::abs(expected->pct) <= band, moved,
                   d.change_pct, tolerance);
  return d;
}

std::map<std::string, double> node_rates(const ResultDoc& d) {
  std::map<std::string, double> m;
  for (const auto& n : d.nodes) m[n.name] = n.tx_mb_per_s + n.rx_mb_per_s;
  return m;
}

std::map<std::string, double> pair_rates(const ResultDoc& d) {
  std::map<std::string, double> m;
  for (const auto& p : d.pairs) m[node_name(d, p.client) + " -> " + node_name(d, p.server)] = p.tput.mb_per_s;
  return m;
}

std::vector<Delta> deltas(const std::map<std::string, double>& b, const std::map<std::string, double>& a) {
  std::vector<Delta> out;
  match(b, a, [&](const std::string& k, const double* x, const double* y) {
    out.push_back({k, x ? *x : 0, y ? *y : 0, x && y ? change(*x, *y) : 0, x && y});
  });
  return out;
}

// Bonds: the same bond before and after a change of mode (ALB vs LACP),
// member shares, aggregate and balance side by side, and a verdict in plain words.
std::string shares(const BondSide& s, bool tx) {
  std::string out;
  for (const auto& m : s.members)
    out += fmt::format("{}{:.0f}", out.empty() ? "" : "/", tx ? m.tx_share_pct : m.rx_share_pct);
  return out;
}

BondSide side_of(const BondReport& b) {
  BondSide s{b, true, {}};
  const std::size_t n = s.members.size();
  std::uint64_t failures = 0;
  for (const auto& m : s.members) failures += m.link_failures;
  s.summary = fmt::format(
      "{}{}: {:.1f} MB/s out ({} % per member, {:.1f} of {} links used), {:.1f} MB/s in ({} %, {:.1f} of "
      "{} links used){}{}",
      text::or_dash(s.mode, "?"), s.hash_policy.empty() ? "" : " " + s.hash_policy, s.tx_mb_per_s, shares(s, true),
      s.tx_members_used, n, s.rx_mb_per_s, shares(s, false), s.rx_members_used, n,
      s.capacity_used_pct >= 0 ? fmt::format(", {:.0f}% of the members' speed", s.capacity_used_pct) : "",
      failures ? fmt::format(", {} link failure(s)", failures) : "");
  return s;
}

// The verdict on one bond seen in both runs, in plain words: the overall change, then each
// direction's spread over the members (none for a direction both runs moved almost nothing in).
std::string bond_verdict(const BondDelta& d) {
  const BondSide &b = d.before, &a = d.after;
  const std::string bn = "before (" + text::or_dash(b.mode, "?") + ")",
                    an = "after (" + text::or_dash(a.mode, "?") + ")";
  const std::size_t n = std::max(b.members.size(), a.members.size());
  const double tb = b.tx_mb_per_s + b.rx_mb_per_s, ta = a.tx_mb_per_s + a.rx_mb_per_s;
  const double ch = change(tb, ta);
  std::string out =
      std::fabs(ch) < 3.0 ? "the bond moved the same amount in both runs"
      : ch > 0            ? fmt::format("{} moved {:.0f}% more through the bond", an, ch)
               : fmt::format("{} moved {:.0f}% more through the bond", bn, tb / std::max(ta, 1e-9) * 100.0 - 100.0);
  for (const bool tx : {true, false}) {
    const double b_mb = tx ? b.tx_mb_per_s : b.rx_mb_per_s, a_mb = tx ? a.tx_mb_per_s : a.rx_mb_per_s;
    const double b_used = tx ? b.tx_members_used : b.rx_members_used;
    const double a_used = tx ? a.tx_members_used : a.rx_members_used;
    if (b_mb < 0.1 && a_mb < 0.1) continue;
    out += fmt::format("; {}: {} {:.1f} MB/s over {:.1f} of {} links, {} {:.1f} MB/s over {:.1f} ({:+.0f}%)",
                       tx ? "out" : "in", bn, b_mb, b_used, n, an, a_mb, a_used, change(b_mb, a_mb)) +
           (a_used - b_used >= 0.3   ? fmt::format("; {} spreads it better", an)
            : b_used - a_used >= 0.3 ? fmt::format("; {} spread it better", bn)
                                     : "");
  }
  return out;
}

}  // namespace

std::vector<BondDelta> compare_bonds(const ResultDoc& before, const ResultDoc& after) {
  std::vector<BondDelta> out;
  // Each bond in one run (the other null) or both.
  match(by_node(before, &NodeReport::bonds, &BondReport::name), by_node(after, &NodeReport::bonds, &BondReport::name),
        [&](const auto& key, const BondReport* b, const BondReport* a) {
          auto& d = out.emplace_back(
              BondDelta{key.first, key.second, b ? side_of(*b) : BondSide{}, a ? side_of(*a) : BondSide{}, ""});
          d.verdict = !a ? "only in the before run" : !b ? "only in the after run" : bond_verdict(d);
        });
  return out;
}

void check_result_schema(const json& j, const std::string& file) {
  if (const auto problem = result_doc_problem(j); !problem.empty())
    throw UsageError(fmt::format("compare: {}: {}", file, problem));
}

std::vector<std::string> settings_differ(const ResultDoc& b, const ResultDoc& a) {
  std::vector<std::string> out;
  if (!b.settings.is_object() || !a.settings.is_object()) return out;
  for (const char* k : {"test", "mode", "transport", "buffsize", "parallel", "threads"}) {
    if (b.settings.value(k, json()) != a.settings.value(k, json())) {
      out.push_back(fmt::format("settings differ: {} {} -> {}: changes may come from that, not the fabric", k,
                                b.settings.value(k, json()).dump(), a.settings.value(k, json()).dump()));
    }
  }
  return out;
}

Comparison compare_results(const ResultDoc& b, const ResultDoc& a, const std::string& bf, const std::string& af,
                           const LinkExpectations& expect) {
  Comparison c;
  if (b.schema_version != a.schema_version) {
    // Version 1 counted what the sender wrote, version 2 what arrived: over short windows on slow
    // links the first can read higher by what sat in socket buffers.
    c.notes.push_back(
        fmt::format("{} has schema version {}, {} has {}: version 1 counted what senders wrote, later "
                    "versions what arrived; short windows on slow links read higher in version 1",
                    bf, b.schema_version, af, a.schema_version));
  }
  c.before_file = bf;
  c.after_file = af;
  c.aggregate = {"aggregate", b.aggregate.mb_per_s, a.aggregate.mb_per_s,
                 change(b.aggregate.mb_per_s, a.aggregate.mb_per_s), true};
  c.nodes = deltas(node_rates(b), node_rates(a));
  if (std::ranges::none_of(c.nodes, &Delta::matched)) {
    throw UsageError(
        fmt::format("compare: {} and {} have no node in common: they are results of unrelated runs", bf, af));
  }
  for (auto& n : settings_differ(b, a)) c.notes.push_back(std::move(n));
  c.pairs = deltas(pair_rates(b), pair_rates(a));
  auto lb = by_node(b, &NodeReport::links, &LinkReport::name), la = by_node(a, &NodeReport::links, &LinkReport::name);
  for (auto* m : {&lb, &la}) std::erase_if(*m, [](const auto& e) { return e.second.kind == "loopback"; });
  match(lb, la, [&](const auto& key, const LinkReport* x, const LinkReport* y) {
    c.links.push_back(judge_link(key, x, y, expect));
  });
  c.bonds = compare_bonds(b, a);
  if (c.links.empty()) c.notes.push_back("no non-loopback links in the results: nothing to judge per link");
  c.failed = std::ranges::any_of(c.links, &LinkDelta::fails);
  return c;
}

std::string render_comparison_text(const Comparison& c) {
  std::string out = fmt::format("compare {} -> {}\n\n", c.before_file, c.after_file);
  auto pct = [](double v) { return fmt::format("{:+.1f}%", v); };
  if (!c.links.empty()) {
    out += "Links (payload MB/s)\n";
    out += fmt::format("  {:<18} {:<8} {:>9} {:>9} {:>8} {:>13} {:>9} {:>9}  {}\n", "node", "link", "before", "after",
                       "change", "speeds Mb/s", "expected", "noise", "verdict");
    for (const auto& d : c.links) {
      const std::string speeds = d.before_speed_mbps > 0 || d.after_speed_mbps > 0
                                     ? fmt::format("{}->{}", text::positive_or_dash(d.before_speed_mbps),
                                                   text::positive_or_dash(d.after_speed_mbps))
                                     : "-";
      out +=
          fmt::format("  {:<18} {:<8} {:>9.1f} {:>9.1f} {:>8} {:>13} {:>9} {:>9}  {}{}\n", d.node, d.link,
                      d.before_mb_per_s, d.after_mb_per_s, d.verdict == LinkVerdict::missing ? "-" : pct(d.change_pct),
                      speeds, d.expected_pct ? pct(*d.expected_pct) : "-",
                      fmt::format("{:.1f}/{:.1f}%", d.noise_before_pct, d.noise_after_pct), to_string(d.verdict),
                      d.fails ? "  <-- FAIL" : "");
    }
    for (const auto& d : c.links) {
      if (d.expectation)
        out += fmt::format("  {} {}: expected {:+.1f}% ({})\n", d.node, d.link, *d.expected_pct, *d.expectation);
    }
    out += "\n";
  }
  if (!c.bonds.empty()) {
    out += "Bonds (member counters; shares in % of the bond's bytes, members in slave order)\n";
    const auto side = [](const BondSide& s) { return s.present ? s.summary : std::string("-"); };
    for (const auto& d : c.bonds) {
      out += fmt::format("  {} {}\n    before: {}\n    after:  {}\n    => {}\n", d.node, d.bond, side(d.before),
                         side(d.after), d.verdict);
    }
    out += "\n";
  }
  using Section = std::tuple<const char*, const std::vector<Delta>*, int>;
  for (const auto& [title, list, width] :
       {Section{"Nodes (tx+rx MB/s)", &c.nodes, 24}, {"\nPairs (MB/s)", &c.pairs, 40}}) {
    out += std::string(title) + "\n";
    for (const auto& d : *list) {
      out += d.matched
                 ? fmt::format("  {:<{}} {:>9.1f} -> {:>9.1f}  {}\n", d.name, width, d.before_mb_per_s,
                               d.after_mb_per_s, pct(d.change_pct))
                 : fmt::format("  {:<{}} only in {}\n", d.name, width, d.before_mb_per_s > 0 ? "before" : "after");
    }
  }
  out += fmt::format("\naggregate {:.1f} -> {:.1f} MB/s ({})\n", c.aggregate.before_mb_per_s,
                     c.aggregate.after_mb_per_s, pct(c.aggregate.change_pct));
  for (const auto& n : c.notes) out += "note: " + n + "\n";
  out += c.failed ? "verdict: FAIL (a link regressed, missed what was expected of it, or is missing in one run)\n"
                  : "verdict: PASS\n";
  return out;
}

json render_comparison_json(const Comparison& c) {
  json j{{"schema", "fabperf.compare"}, {"schema_version", 1}, {"before", c.before_file}, {"after", c.after_file}};
  FABPERF_JSON_FIELDS(j, c, aggregate, links, nodes, pairs, bonds, notes, failed);
  return j;
}

}  // namespace fabperf
