// `fabperf compare` for bonds: the same bond before and after a change of mode (ALB vs LACP),
// member shares, aggregate and balance side by side, and a verdict in plain words.
#include <fabperf/report/compare.hpp>

#include "report/match.hpp"

#include "report/text_table.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

namespace fabperf {

namespace {

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

}  // namespace fabperf
