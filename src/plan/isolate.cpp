// Isolation of a slow node and link by halving rounds against known-good peers
// (include/fabperf/plan/isolate.hpp). Pure: steps out, measured rates in, a trace and findings.
#include <fabperf/core/stats.hpp>
#include <fabperf/plan/isolate.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <bit>
#include <limits>
#include <set>

namespace fabperf::plan {
namespace {

// The names of these hosts, comma-separated.
std::string name_list(const std::vector<std::string>& names, const std::vector<std::uint32_t>& hosts) {
  std::string out;
  for (const auto h : hosts) out += (out.empty() ? "" : ", ") + names[h];
  return out;
}

}  // namespace

double role_mbps(const NodeReport& node, const std::string& test, bool client) {
  const bool reads = test == "read" || test == "sread";
  if (test == "rw") return node.tx_mb_per_s + node.rx_mb_per_s;
  return (client != reads) ? node.tx_mb_per_s : node.rx_mb_per_s;
}

std::size_t isolation_round_bound(std::size_t suspects) {
  return std::bit_width(std::max<std::size_t>(suspects, 1) - 1) + 1;  // ceil(log2) halvings and a confirmation
}

Suspicion find_suspects(const std::vector<StepOutcome>& steps, const std::map<std::string, std::uint32_t>& names,
                        const std::vector<std::string>& host_names, const std::string& test,
                        const std::vector<KpiCheck>& failing) {
  Suspicion s;
  std::map<std::uint32_t, std::vector<double>> as_client, as_server;
  std::set<std::uint32_t> seen, measured;  // in any step, complete or not; in a complete one
  for (const auto& st : steps) {
    // A step that lost a node proves nothing about anybody: no figure of it makes a node good.
    if (!st.result.complete) s.trace.push_back(fmt::format("  step {} left out: incomplete (a node was lost)", st.id));
    for (const auto& n : st.result.nodes) {
      const auto it = names.find(n.name);
      if (it == names.end()) continue;
      seen.insert(it->second);
      if (!st.result.complete) continue;
      measured.insert(it->second);
      if (n.role.find("client") != std::string::npos) as_client[it->second].push_back(role_mbps(n, test, true));
      if (n.role.find("server") != std::string::npos) as_server[it->second].push_back(role_mbps(n, test, false));
    }
  }
  // Each role is judged against the median of the nodes that played it, each node by the median
  // of its own steps (one slow partner does not drag a good node down); a role fewer than three
  // nodes played (incast's one target) has no median to speak of.
  std::map<std::uint32_t, std::string> why;
  const auto judge = [&](const std::map<std::uint32_t, std::vector<double>>& role, const char* what) {
    if (role.size() < 3) return;
    std::vector<double> means;
    means.reserve(role.size());
    for (const auto& [h, v] : role) means.push_back(stats::median(v));
    const double med = stats::median(means);
    if (med <= 0) return;
    for (const auto& [h, v] : role) {
      const double r = stats::median(v) / med;
      if (!s.score.count(h) || r < s.score[h]) {
        s.score[h] = r;
        why[h] = fmt::format("{} MB/s as {}, {:.2f} of the median {}", figure(stats::median(v)), what, r, figure(med));
      }
    }
  };
  judge(as_client, "client");
  judge(as_server, "server");
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const auto& [h, v] : as_client) {
    lo = std::min(lo, stats::mean(v));
    hi = std::max(hi, stats::mean(v));
  }
  if (!as_client.empty()) s.spread = hi > 0 ? lo / hi : 1;
  std::set<std::uint32_t> named;
  for (const auto& c : failing) {
    if (c.pass) continue;
    std::vector<std::string> subjects;
    if (c.scope == "pair") {
      const auto arrow = c.subject.find("->");
      if (arrow != std::string::npos) subjects = {c.subject.substr(0, arrow), c.subject.substr(arrow + 2)};
    } else if (c.scope == "link") {
      subjects = {c.subject.substr(0, c.subject.find('/'))};
    } else if (c.scope == "node") {
      subjects = {c.subject};
    }
    for (const auto& n : subjects) {
      const auto it = std::find(host_names.begin(), host_names.end(), n);
      if (it != host_names.end()) named.insert(static_cast<std::uint32_t>(it - host_names.begin()));
    }
  }
  // Ranked by distance below the median. A failing KPI names both ends of a pair and every link
  // of a node: it makes a suspect only of a node that is not clearly at the median itself.
  std::vector<std::uint32_t> unmeasured, unjudged;
  for (const auto h : seen) {
    if (!s.score.count(h)) {
      (measured.count(h) ? unjudged : unmeasured).push_back(h);
    } else if (s.score[h] < kSlowFraction || (named.count(h) && s.score[h] < kGoodFraction)) {
      s.suspects.push_back(h);
    } else if (s.score[h] >= kGoodFraction) {
      s.good.push_back(h);
    }
  }
  std::ranges::sort(s.suspects, {}, [&](auto h) { return std::pair(s.score[h], h); });
  std::ranges::sort(s.good, {}, [&](auto h) { return std::pair(-s.score[h], h); });
  const auto list = [&](const std::vector<std::uint32_t>& v) {
    return v.empty() ? std::string("none") : name_list(host_names, v);
  };
  s.trace.push_back(fmt::format("evidence: node spread {:.2f} (slowest / fastest client)", s.spread));
  for (const auto h : s.suspects) {
    s.trace.push_back(fmt::format("  suspect {}: {}{}", host_names[h], why.count(h) ? why[h] : "no rate",
                                  named.count(h) ? "; named by a failing KPI" : ""));
  }
  s.trace.push_back(fmt::format("  known good: {}", list(s.good)));
  if (!unmeasured.empty()) s.trace.push_back(fmt::format("  not measured in a complete step: {}", list(unmeasured)));
  if (!unjudged.empty()) {
    s.trace.push_back(
        fmt::format("  not judged (a role fewer than 3 nodes played, e.g. an incast's target): {}", list(unjudged)));
  }
  return s;
}

Isolator::Isolator(std::vector<std::uint32_t> suspects, std::vector<std::uint32_t> good,
                   std::vector<std::string> host_names, std::size_t max_rounds)
    : cand_(std::move(suspects)), good_(std::move(good)), names_(std::move(host_names)), max_rounds_(max_rounds) {
  if (cand_.empty()) {
    trace_.push_back("no node stands out: nothing to isolate");
    done_ = true;
  } else if (good_.size() < 3) {
    trace_.push_back(
        fmt::format("only {} known-good node(s): isolation needs 3 (a peer and a baseline pair)", good_.size()));
    done_ = true;
  }
}

std::optional<IsoRound> Isolator::next_round() {
  if (done_) return std::nullopt;
  if (cand_.empty() && !deferred_.empty()) {
    trace_.push_back(fmt::format("back to the suspects not retested yet"));
    cand_ = std::move(deferred_);
    deferred_.clear();
  }
  if (cand_.empty()) {
    done_ = true;
    return std::nullopt;
  }
  if (round_ >= max_rounds_) {
    const std::string left = name_list(names_, cand_) + (deferred_.empty() ? "" : ", " + name_list(names_, deferred_));
    trace_.push_back(fmt::format("stopped after {} rounds; not decided: {}", round_, left));
    done_ = true;
    return std::nullopt;
  }
  IsoRound r;
  r.number = ++round_;
  // One step: each suspect against its good peer, both ways at once, beside a baseline pair of two
  // other good nodes, taken from `rot` on so that no node carries every step.
  const auto add_step = [&](const std::vector<std::pair<std::uint32_t, std::uint32_t>>& tested, std::size_t rot) {
    IsoStep st;
    std::set<std::uint32_t> busy;
    for (const auto& [c, peer] : tested) {
      st.pairs.push_back({c, peer, "out", c});
      st.pairs.push_back({peer, c, "in", c});
      busy.insert({c, peer});
    }
    std::vector<std::uint32_t> free;
    for (std::size_t i = 0; i < good_.size(); ++i) {
      const auto g = good_[(rot + i) % good_.size()];
      if (!busy.count(g)) free.push_back(g);
    }
    if (free.size() >= 2) {
      st.pairs.push_back({free[0], free[1], "base", free[0]});
      st.pairs.push_back({free[1], free[0], "base", free[1]});
    }
    r.steps.push_back(std::move(st));
  };
  if (cand_.size() == 1) {
    r.kind = "confirm";
    for (std::size_t k = 0; k < std::min(kConfirmPeers, good_.size()); ++k)
      add_step({{cand_.front(), good_[k]}}, k + 1);
  } else {
    r.kind = "halving";
    const std::size_t half = (cand_.size() + 1) / 2;
    // Each tested suspect needs a good peer of its own, and two more good nodes set the baseline.
    const std::size_t per_step = std::max<std::size_t>(1, good_.size() - 2);
    for (std::size_t start = 0; start < half; start += per_step) {
      std::vector<std::pair<std::uint32_t, std::uint32_t>> tested;
      for (std::size_t i = start; i < std::min(half, start + per_step); ++i)
        tested.emplace_back(cand_[i], good_[i - start]);
      add_step(tested, per_step);
    }
  }
  current_ = r;
  return r;
}

void Isolator::record(const std::vector<std::vector<std::optional<double>>>& rates,
                      const std::map<std::uint32_t, std::string>& links) {
  if (!current_) return;
  const IsoRound r = *current_;
  current_.reset();
  std::map<std::uint32_t, std::vector<double>> out, in;
  std::map<std::uint32_t, std::vector<std::uint32_t>> peers;
  std::vector<double> base;
  for (std::size_t s = 0; s < r.steps.size() && s < rates.size(); ++s) {
    for (std::size_t k = 0; k < r.steps[s].pairs.size() && k < rates[s].size(); ++k) {
      const auto& p = r.steps[s].pairs[k];
      if (!rates[s][k]) continue;
      if (p.role == "base") base.push_back(*rates[s][k]);
      if (p.role == "out") {
        out[p.subject].push_back(*rates[s][k]);
        peers[p.subject].push_back(p.server);
      }
      if (p.role == "in") in[p.subject].push_back(*rates[s][k]);
    }
  }
  const double baseline = stats::median(base);
  const auto link_of = [&](std::uint32_t h) { return links.count(h) ? links.at(h) : std::string(); };
  const auto median_of = [](auto& by_host, std::uint32_t h) {
    return by_host.count(h) ? stats::median(by_host[h]) : 0.0;
  };
  if (base.empty()) {
    trace_.push_back(fmt::format("round {} ({}): no baseline measured (a step failed): stopping", r.number, r.kind));
    done_ = true;
    return;
  }
  if (r.kind == "confirm") {
    const auto c = cand_.front();
    IsoFinding f;
    f.node = names_[c];
    f.link = link_of(c);
    f.out_mb_per_s = median_of(out, c);
    f.in_mb_per_s = median_of(in, c);
    f.mb_per_s = std::min(f.out_mb_per_s, f.in_mb_per_s);  // both directions must keep up
    f.peers = peers[c].size();
    f.peers_median_mb_per_s = baseline;
    f.slow = f.mb_per_s < kSlowFraction * baseline;
    const std::string who = name_list(names_, peers[c]);
    const std::string subject = f.link.empty() ? f.node : f.node + " " + f.link;
    f.text = fmt::format("{}: {} MB/s against {} good peers, whose median is {}{}", subject, figure(f.mb_per_s),
                         f.peers, figure(baseline),
                         f.slow ? fmt::format(" (sending {}, receiving {}; peers {})", figure(f.out_mb_per_s),
                                              figure(f.in_mb_per_s), who)
                                : fmt::format(": keeps up on its own (peers {})", who));
    trace_.push_back(fmt::format("round {} (confirm {} against {} peers, one at a time): {}", r.number, f.node, f.peers,
                                 f.slow ? "SLOW" : "cleared"));
    findings_.push_back(f);
    if (!f.slow) good_.push_back(c);
    cand_.clear();
    return;
  }
  const std::size_t half = (cand_.size() + 1) / 2;
  std::vector<std::uint32_t> tested(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(half));
  std::vector<std::uint32_t> rest(cand_.begin() + static_cast<std::ptrdiff_t>(half), cand_.end());
  std::vector<std::pair<double, std::uint32_t>> slow;
  std::string results;
  for (const auto h : tested) {
    const double v = std::min(median_of(out, h), median_of(in, h));
    const bool is_slow = v < kSlowFraction * baseline;
    results +=
        fmt::format("{}{} {} MB/s{}", results.empty() ? "" : ", ", names_[h], figure(v), is_slow ? " SLOW" : " ok");
    if (is_slow) {
      slow.emplace_back(v, h);
    } else {
      good_.push_back(h);
    }
  }
  std::sort(slow.begin(), slow.end());
  if (!slow.empty()) {
    cand_.clear();
    for (const auto& [v, h] : slow) cand_.push_back(h);
    deferred_.insert(deferred_.end(), rest.begin(), rest.end());
  } else {
    cand_ = rest;
  }
  const std::string next = name_list(names_, cand_), later = name_list(names_, deferred_);
  trace_.push_back(
      fmt::format("round {} (halving: {} of {} suspects, each against a good peer both ways; baseline {} MB/s): "
                  "{} -> suspects: {}{}",
                  r.number, tested.size(), tested.size() + rest.size(), figure(baseline), results,
                  next.empty() ? "none" : next, later.empty() ? "" : "; later: " + later));
}

}  // namespace fabperf::plan
