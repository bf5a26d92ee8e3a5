#include <fabperf/core/error.hpp>
#include <fabperf/report/compare.hpp>
#include <fabperf/report/report.hpp>
#include "report/json_read.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

namespace fabperf {

using nlohmann::json;

std::string_view to_string(LinkVerdict v) {
  switch (v) {
    case LinkVerdict::as_expected: return "improved as expected";
    case LinkVerdict::less_than_expected: return "improved less than expected";
    case LinkVerdict::improved: return "improved";
    case LinkVerdict::no_change: return "no change";
    case LinkVerdict::regressed: return "regressed";
    case LinkVerdict::missing: return "missing in one run";
  }
  return "?";
}

std::optional<Expectation> LinkExpectations::for_link(const std::string& node, const std::string& link,
                                                      std::int64_t before_speed, std::int64_t after_speed) const {
  // A run's nodes are "host:port"; the user may name the host alone.
  const auto path = [&link](std::string_view n) {
    std::string p(n);
    p += '/';
    p += link;
    return p;
  };
  const std::string full = path(node), by_host = path(std::string_view(node).substr(0, node.rfind(':')));
  for (const auto& [name, pct] : links) {
    if (name == link || name == full || name == by_host)
      return Expectation{pct, fmt::format("--expect {}={:+g}%", name, pct)};
  }
  switch (rest) {
    case Rest::none: return std::nullopt;
    case Rest::unchanged: return Expectation{0, "--expect-rest unchanged"};
    case Rest::speeds:
      if (before_speed <= 0 || after_speed <= 0) return std::nullopt;
      return Expectation{100.0 * (static_cast<double>(after_speed) / static_cast<double>(before_speed) - 1.0),
                         fmt::format("speed {} -> {} Mb/s", before_speed, after_speed)};
  }
  return std::nullopt;
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

std::pair<std::string, double> parse_link_expectation(const std::string& text) {
  const auto eq = text.rfind('=');
  if (eq == 0 || eq == std::string::npos) {
    throw UsageError(fmt::format("--expect '{}': expected LINK=PCT, e.g. h4/eth0=+150% or eth0=0", text));
  }
  return {text.substr(0, eq), parse_percent(text.substr(eq + 1), "expect " + text.substr(0, eq), -100, 10000)};
}

LinkExpectations parse_expectations(const std::vector<std::string>& links, const std::string& rest,
                                    const std::string& gain) {
  LinkExpectations e;
  for (const auto& l : links) e.links.push_back(parse_link_expectation(l));
  if (rest == "unchanged") {
    e.rest = LinkExpectations::Rest::unchanged;
  } else if (rest == "speeds") {
    e.rest = LinkExpectations::Rest::speeds;
  } else if (!rest.empty()) {
    throw UsageError(fmt::format("--expect-rest '{}': expected 'unchanged' or 'speeds'", rest));
  }
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
using json_read::num;

// Tolerances: a change inside the noise band is "no change"; an expected gain is met when the
// measured gain is within 5 percentage points (or the noise, if larger) of it.
constexpr double kMinNoiseBandPct = 3.0;
constexpr double kExpectTolerancePct = 5.0;

double change(double before, double after) {
  return before > 0 ? 100.0 * (after / before - 1.0) : 0.0;
}

// Coefficient of variation (%) of the per-interval tx+rx rates; the first interval is dropped
// when there are several (shapers' bursts inflate it).
double noise_pct(const json& intervals) {
  std::vector<double> v;
  for (const auto& p : intervals) v.push_back(num(p, "tx_mb_per_s") + num(p, "rx_mb_per_s"));
  if (v.size() > 2) v.erase(v.begin());
  if (v.size() < 2) return 0.0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= static_cast<double>(v.size() - 1);
  return mean > 0 ? 100.0 * std::sqrt(var) / mean : 0.0;
}

void check_schema(const json& j, const std::string& file) {
  if (!j.is_object() || j.value("schema", "") != kResultSchema) {
    throw UsageError(fmt::format("compare: {}: not a fabperf result (schema '{}')", file, kResultSchema));
  }
  if (!j.contains("schema_version") || !j["schema_version"].is_number_integer()) {
    throw UsageError(fmt::format("compare: {}: missing schema_version", file));
  }
  const int v = j["schema_version"].get<int>();
  if (v < kOldestResultSchemaVersion || v > kResultSchemaVersion) {
    throw UsageError(fmt::format("compare: {}: schema_version {}, this fabperf reads versions {} to {}", file, v,
                                 kOldestResultSchemaVersion, kResultSchemaVersion));
  }
  for (const char* k : {"aggregate", "nodes", "pairs"}) {
    if (!j.contains(k)) throw UsageError(fmt::format("compare: {}: missing '{}'", file, k));
  }
  if (!j["nodes"].is_array() || !j["pairs"].is_array() || !j["aggregate"].is_object()) {
    throw UsageError(fmt::format("compare: {}: 'nodes', 'pairs' or 'aggregate' has the wrong type", file));
  }
}

std::map<std::uint64_t, std::string> node_names(const json& j) {
  std::map<std::uint64_t, std::string> m;
  for (const auto& n : j["nodes"]) m[n.value("index", 0u)] = n.value("node", "");
  return m;
}

double link_payload(const json& l) {
  return std::max(num(l, "payload_tx_mb_per_s"), num(l, "payload_rx_mb_per_s"));
}

std::int64_t link_speed(const json& l) {
  const auto it = l.find("speed_mbps");
  return it != l.end() && it->is_number() ? it->get<std::int64_t>() : std::int64_t{-1};
}

// One link's verdict: its change against both runs' noise and against what was expected of it
// (`after` null: the link is missing after).
LinkDelta judge_link(const std::pair<std::string, std::string>& key, const json& l, const json* after,
                     const CompareOptions& opts) {
  LinkDelta d;
  d.node = key.first;
  d.link = key.second;
  d.before_mb = link_payload(l);
  d.before_speed = link_speed(l);
  d.noise_before_pct = noise_pct(l.value("intervals", json::array()));
  if (after == nullptr) {
    d.verdict = LinkVerdict::missing;
    d.fails = true;
    return d;
  }
  const json& x = *after;
  d.after_mb = link_payload(x);
  d.after_speed = link_speed(x);
  d.noise_after_pct = noise_pct(x.value("intervals", json::array()));
  d.change_pct = change(d.before_mb, d.after_mb);
  const auto expected = opts.expect.for_link(d.node, d.link, d.before_speed, d.after_speed);
  if (expected) {
    d.predicted_pct = expected->pct;
    d.expectation = expected->reason;
  } else if (opts.expect.gain_pct) {
    d.predicted_pct = *opts.expect.gain_pct;
    d.expectation = fmt::format("--expect-gain {:g}", *opts.expect.gain_pct);
  } else if (d.before_speed > 0 && d.after_speed > 0 && d.before_speed != d.after_speed) {
    d.predicted_pct = 100.0 * (static_cast<double>(d.after_speed) / static_cast<double>(d.before_speed) - 1.0);
  }
  const double band = std::max(kMinNoiseBandPct, 2.0 * std::max(d.noise_before_pct, d.noise_after_pct));
  if (d.change_pct < -band) {
    d.verdict = LinkVerdict::regressed;
  } else if (d.change_pct <= band) {
    d.verdict = LinkVerdict::no_change;
  } else if (!d.predicted_pct) {
    d.verdict = LinkVerdict::improved;
  } else if (d.change_pct >= *d.predicted_pct - std::max(kExpectTolerancePct, band)) {
    d.verdict = LinkVerdict::as_expected;
  } else {
    d.verdict = LinkVerdict::less_than_expected;
  }
  // An expectation is met by the verdict it names: unchanged by "no change" (a port that gained
  // when it should not have is as much news as one that did not), a gain by "as expected".
  const bool stated = expected || opts.expect.gain_pct;
  const bool met = d.predicted_pct && std::abs(*d.predicted_pct) <= band ? d.verdict == LinkVerdict::no_change
                                                                         : d.verdict == LinkVerdict::as_expected;
  d.fails = d.verdict == LinkVerdict::regressed || (stated && !met);
  return d;
}

}  // namespace

Comparison compare_results(const json& b, const json& a, const std::string& bf, const std::string& af,
                           const CompareOptions& opts) {
  check_schema(b, bf);
  check_schema(a, af);
  Comparison c;
  if (b["schema_version"] != a["schema_version"]) {
    // Version 1 counted what the sender wrote, version 2 what arrived: over short windows on slow
    // links the first can read higher by what sat in socket buffers.
    c.notes.push_back(
        fmt::format("{} has schema version {}, {} has {}: version 1 counted what senders wrote, later "
                    "versions what arrived; short windows on slow links read higher in version 1",
                    bf, b["schema_version"].dump(), af, a["schema_version"].dump()));
  }
  c.before_file = bf;
  c.after_file = af;
  c.aggregate = {"aggregate", num(b["aggregate"], "mb_per_s"), num(a["aggregate"], "mb_per_s"), 0, true};
  c.aggregate.change_pct = change(c.aggregate.before, c.aggregate.after);

  // Nodes.
  std::map<std::string, const json*> bn, an;
  for (const auto& n : b["nodes"]) bn[n.value("node", "")] = &n;
  for (const auto& n : a["nodes"]) an[n.value("node", "")] = &n;
  std::size_t common = 0;
  for (const auto& [name, n] : bn) {
    const auto it = an.find(name);
    Delta d{name, num(*n, "tx_mb_per_s") + num(*n, "rx_mb_per_s"), 0, 0, it != an.end()};
    if (d.matched) {
      ++common;
      d.after = num(*it->second, "tx_mb_per_s") + num(*it->second, "rx_mb_per_s");
      d.change_pct = change(d.before, d.after);
    }
    c.nodes.push_back(d);
  }
  for (const auto& [name, n] : an) {
    if (!bn.count(name)) c.nodes.push_back({name, 0, num(*n, "tx_mb_per_s") + num(*n, "rx_mb_per_s"), 0, false});
  }
  if (common == 0) {
    throw UsageError(
        fmt::format("compare: {} and {} have no node in common: they are results of unrelated runs", bf, af));
  }
  if (b.contains("settings") && a.contains("settings") && b["settings"].is_object() && a["settings"].is_object()) {
    for (const char* k : {"test", "mode", "transport", "buffsize", "parallel", "threads"}) {
      if (b["settings"].value(k, json()) != a["settings"].value(k, json())) {
        c.notes.push_back(fmt::format("settings differ: {} {} -> {}: changes may come from that, not the fabric", k,
                                      b["settings"].value(k, json()).dump(), a["settings"].value(k, json()).dump()));
      }
    }
  }

  // Pairs, by node names.
  const auto bnames = node_names(b), anames = node_names(a);
  auto pair_key = [](const std::map<std::uint64_t, std::string>& names, const json& p) {
    const auto ci = names.find(p.value("client", 0u));
    const auto si = names.find(p.value("server", 0u));
    return (ci != names.end() ? ci->second : "?") + " -> " + (si != names.end() ? si->second : "?");
  };
  std::map<std::string, double> bp, ap;
  for (const auto& p : b["pairs"]) bp[pair_key(bnames, p)] = num(p, "mb_per_s");
  for (const auto& p : a["pairs"]) ap[pair_key(anames, p)] = num(p, "mb_per_s");
  for (const auto& [k, v] : bp) {
    const auto it = ap.find(k);
    c.pairs.push_back(
        {k, v, it != ap.end() ? it->second : 0, it != ap.end() ? change(v, it->second) : 0, it != ap.end()});
  }
  for (const auto& [k, v] : ap) {
    if (!bp.count(k)) c.pairs.push_back({k, 0, v, 0, false});
  }

  // Links, by (node, link).
  auto links_of = [](const json& doc) {
    std::map<std::pair<std::string, std::string>, const json*> m;
    for (const auto& n : doc["nodes"]) {
      if (!n.contains("links") || !n["links"].is_array()) continue;
      for (const auto& l : n["links"]) {
        if (l.value("kind", "") == "loopback") continue;
        m[{n.value("node", ""), l.value("link", "")}] = &l;
      }
    }
    return m;
  };
  const auto bl = links_of(b), al = links_of(a);
  for (const auto& [key, l] : bl) {
    const auto it = al.find(key);
    c.links.push_back(judge_link(key, *l, it == al.end() ? nullptr : it->second, opts));
  }
  for (const auto& [key, l] : al) {
    if (!bl.count(key)) {
      LinkDelta d;
      d.node = key.first;
      d.link = key.second;
      d.after_mb = link_payload(*l);
      d.after_speed = link_speed(*l);
      d.verdict = LinkVerdict::missing;
      d.fails = true;  // a port that appeared is news too; either side missing fails
      c.links.push_back(d);
    }
  }
  c.bonds = compare_bonds(b, a);
  if (c.links.empty()) c.notes.push_back("no non-loopback links in the results: nothing to judge per link");
  c.failed = std::any_of(c.links.begin(), c.links.end(), [](const LinkDelta& d) { return d.fails; });
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
      const std::string speeds = d.before_speed > 0 || d.after_speed > 0
                                     ? fmt::format("{}->{}", d.before_speed > 0 ? std::to_string(d.before_speed) : "-",
                                                   d.after_speed > 0 ? std::to_string(d.after_speed) : "-")
                                     : "-";
      out += fmt::format("  {:<18} {:<8} {:>9.1f} {:>9.1f} {:>8} {:>13} {:>9} {:>9}  {}{}\n", d.node, d.link,
                         d.before_mb, d.after_mb, d.verdict == LinkVerdict::missing ? "-" : pct(d.change_pct), speeds,
                         d.predicted_pct ? pct(*d.predicted_pct) : "-",
                         fmt::format("{:.1f}/{:.1f}%", d.noise_before_pct, d.noise_after_pct), to_string(d.verdict),
                         d.fails ? "  <-- FAIL" : "");
    }
    for (const auto& d : c.links) {
      if (!d.expectation.empty())
        out += fmt::format("  {} {}: expected {:+.1f}% ({})\n", d.node, d.link, *d.predicted_pct, d.expectation);
    }
    out += "\n";
  }
  out += render_bond_deltas_text(c.bonds);
  out += "Nodes (tx+rx MB/s)\n";
  for (const auto& d : c.nodes) {
    out += d.matched ? fmt::format("  {:<24} {:>9.1f} -> {:>9.1f}  {}\n", d.name, d.before, d.after, pct(d.change_pct))
                     : fmt::format("  {:<24} only in {}\n", d.name, d.before > 0 ? "before" : "after");
  }
  out += "\nPairs (MB/s)\n";
  for (const auto& d : c.pairs) {
    out += d.matched ? fmt::format("  {:<40} {:>9.1f} -> {:>9.1f}  {}\n", d.name, d.before, d.after, pct(d.change_pct))
                     : fmt::format("  {:<40} only in {}\n", d.name, d.before > 0 ? "before" : "after");
  }
  out += fmt::format("\naggregate {:.1f} -> {:.1f} MB/s ({})\n", c.aggregate.before, c.aggregate.after,
                     pct(c.aggregate.change_pct));
  for (const auto& n : c.notes) out += "note: " + n + "\n";
  out += c.failed ? "verdict: FAIL (a link regressed, missed what was expected of it, or is missing in one run)\n"
                  : "verdict: PASS\n";
  return out;
}

json render_comparison_json(const Comparison& c) {
  auto delta = [](const Delta& d) {
    return json{{"name", d.name},
                {"before_mb_per_s", d.before},
                {"after_mb_per_s", d.after},
                {"change_pct", d.change_pct},
                {"matched", d.matched}};
  };
  json links = json::array(), nodes = json::array(), pairs = json::array();
  for (const auto& d : c.links) {
    links.push_back({{"node", d.node},
                     {"link", d.link},
                     {"before_mb_per_s", d.before_mb},
                     {"after_mb_per_s", d.after_mb},
                     {"change_pct", d.change_pct},
                     {"before_speed_mbps", d.before_speed},
                     {"after_speed_mbps", d.after_speed},
                     {"expected_pct", d.predicted_pct ? json(*d.predicted_pct) : json(nullptr)},
                     {"expectation", d.expectation.empty() ? json(nullptr) : json(d.expectation)},
                     {"noise_before_pct", d.noise_before_pct},
                     {"noise_after_pct", d.noise_after_pct},
                     {"verdict", to_string(d.verdict)},
                     {"fails", d.fails}});
  }
  for (const auto& d : c.nodes) nodes.push_back(delta(d));
  for (const auto& d : c.pairs) pairs.push_back(delta(d));
  return {
      {"schema", "fabperf.compare"},        {"schema_version", 1}, {"before", c.before_file}, {"after", c.after_file},
      {"aggregate", delta(c.aggregate)},    {"links", links},      {"nodes", nodes},          {"pairs", pairs},
      {"bonds", bond_deltas_json(c.bonds)}, {"notes", c.notes},    {"failed", c.failed}};
}

}  // namespace fabperf
