// Bond figures: per-member throughput and shares from the members' own counters, balance
// (Jain's index, max/min), capacity used, and the member the kernel's hash picks for each flow.
#include <fabperf/core/error.hpp>
#include <fabperf/core/spec.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/sysinfo/bonding.hpp>
#include <fabperf/sysinfo/links.hpp>

#include "report/text_table.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace fabperf {
namespace {

// A flow's end, "198.18.0.1:40000" or "[fd00::1]:40000"; nullopt when it is neither.
std::optional<HostPort> endpoint_of(const std::string& e) {
  try {
    return parse_host_port(e, "flow endpoint");
  } catch (const Error&) {
    return std::nullopt;
  }
}

// A member's figures from its own interface counters over the window, the span every link's
// figures cover; tx and rx: its bytes over that span.
BondMemberReport member_report(const BondMember& m, const BondResult& b, const AgentResult& a, std::uint64_t& tx,
                               std::uint64_t& rx) {
  BondMemberReport mr;
  mr.name = m.name;
  mr.speed_mbps = m.speed_mbps;
  mr.state_open = m.mii_status;
  const auto& closed = b.at_close.members;
  const auto mc = std::ranges::find(closed, m.name, &BondMember::name);
  const bool stayed = mc != closed.end();
  mr.state_close = stayed ? mc->mii_status : "gone";
  mr.link_failures = stayed && mc->link_failures > m.link_failures ? mc->link_failures - m.link_failures : 0;
  const auto l = std::ranges::find_if(a.links, [&](const LinkResult& x) { return x.info.name == m.name; });
  if (l != a.links.end()) {
    CounterWindow cw = counter_window(*l);
    tx = cw.tx_bytes;
    rx = cw.rx_bytes;
    mr.tx_mb_per_s = mb_per_s(tx, cw.window_s);
    mr.rx_mb_per_s = mb_per_s(rx, cw.window_s);
    mr.intervals = std::move(cw.intervals);
  }
  if (!mr.intervals.empty()) {
    mr.first_tx_mb_per_s = mr.intervals.front().tx_mb_per_s;
    mr.first_rx_mb_per_s = mr.intervals.front().rx_mb_per_s;
    mr.last_tx_mb_per_s = mr.intervals.back().tx_mb_per_s;
    mr.last_rx_mb_per_s = mr.intervals.back().rx_mb_per_s;
  }
  return mr;
}

// The members, the bond's sums, each member's share and the balance. Returns the members' bytes
// over the window, transmit and receive.
std::pair<std::uint64_t, std::uint64_t> add_members(BondReport& br, const BondResult& b, const AgentResult& a) {
  const BondInfo& open = b.at_open;
  bool all_speeds = !open.members.empty();
  std::vector<std::uint64_t> txb, rxb;
  for (const auto& m : open.members) {
    BondMemberReport mr = member_report(m, b, a, txb.emplace_back(), rxb.emplace_back());
    all_speeds = all_speeds && m.speed_mbps > 0;
    br.member_speed_sum_mbps += static_cast<double>(std::max<std::int64_t>(0, m.speed_mbps));
    br.best_goodput_mb_per_s += best_tcp_goodput_mb_per_s(m.speed_mbps, m.mtu > 0 ? m.mtu : open.mtu);
    br.tx_mb_per_s += mr.tx_mb_per_s;
    br.rx_mb_per_s += mr.rx_mb_per_s;
    br.members.push_back(std::move(mr));
  }
  if (!all_speeds) br.member_speed_sum_mbps = br.best_goodput_mb_per_s = 0;
  // One direction: each member's share of its bytes, and the balance of the members' rates.
  const auto direction = [&br](const std::vector<std::uint64_t>& bytes, double BondMemberReport::*rate,
                               double BondMemberReport::*share, double& jain, double& used, double& max_min) {
    const std::uint64_t all = std::accumulate(bytes.begin(), bytes.end(), std::uint64_t{0});
    std::vector<double> xs;
    for (std::size_t i = 0; i < br.members.size(); ++i) {
      br.members[i].*share = all > 0 ? 100.0 * static_cast<double>(bytes[i]) / static_cast<double>(all) : 0;
      xs.push_back(br.members[i].*rate);
    }
    jain = jain_index(xs);
    used = jain * static_cast<double>(xs.size());
    const auto [lo, hi] = std::minmax_element(xs.begin(), xs.end());
    max_min = xs.empty() || *lo <= 0 ? 0.0 : *hi / *lo;
    return all;
  };
  using M = BondMemberReport;
  const auto tx_all = direction(txb, &M::tx_mb_per_s, &M::tx_share_pct, br.tx_jain, br.tx_members_used, br.tx_max_min);
  const auto rx_all = direction(rxb, &M::rx_mb_per_s, &M::rx_share_pct, br.rx_jain, br.rx_members_used, br.rx_max_min);
  if (br.member_speed_sum_mbps > 0) {
    br.capacity_used_pct = 100.0 * std::max(br.tx_mb_per_s, br.rx_mb_per_s) * 8.0 / br.member_speed_sum_mbps;
  }
  return {tx_all, rx_all};
}

// The member the kernel's hash sends the flow on; nullopt where an address the policy hashes is
// unknown (layer2 policies need the peer's ARP entry).
std::optional<int> hashed_member(HashPolicy policy, const FlowResult& f, const BondResult& b, std::size_t usable) {
  const auto src_ep = endpoint_of(f.local), dst_ep = endpoint_of(f.remote);
  if (!src_ep || !dst_ep) return std::nullopt;
  FlowHeaders h{.src_ip = src_ep->host, .dst_ip = dst_ep->host, .src_port = src_ep->port, .dst_port = dst_ep->port};
  if (policy != HashPolicy::layer34) {
    const auto src = parse_mac(b.at_open.mac);
    std::optional<Mac> dst;
    for (const auto& [ip, mac] : b.neighbors) {
      if (ip == h.dst_ip) dst = parse_mac(mac);
    }
    if (!src || !dst) return std::nullopt;
    h.src_mac = *src;
    h.dst_mac = *dst;
  }
  try {
    return predict_member(policy, h, static_cast<int>(usable));
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Each flow's member by the kernel's hash, and the predicted transmit shares against the counted
// ones. mostly_rx: the node's flows on the bond received more than they sent.
void predict_split(BondReport& br, const BondResult& b, const std::vector<const FlowResult*>& flows, bool mostly_rx,
                   const std::string& who, std::vector<std::string>& findings) {
  const BondInfo& open = b.at_open;
  const auto policy = parse_hash_policy(br.hash_policy);
  const auto usable = usable_members(open);
  br.prediction = !bond_hashes(open)
                      ? fmt::format("none: {} does not pick members by hash", br.mode.empty() ? "this mode" : br.mode)
                  : !policy ? fmt::format("none: unknown xmit_hash_policy '{}'", br.hash_policy)
                  : *policy == HashPolicy::encap34
                      ? "none: encap3+4 uses each socket's random flow hash for locally sent TCP"
                  : usable.empty() ? "none: no usable member (down or outside the active aggregator)"
                  : flows.empty()  ? "none: no test flow left on this bond"
                                   : "";
  if (!br.prediction.empty()) return;
  std::vector<std::uint64_t> pred(usable.size(), 0);
  std::vector<int> counts(usable.size(), 0);
  std::uint64_t pred_all = 0;
  bool all = true;
  for (const auto* f : flows) {
    BondFlowReport fr{f->local, f->remote, f->tx_delivered_window, -1, ""};
    if (const auto m = hashed_member(*policy, *f, b, usable.size())) {
      const auto i = static_cast<std::size_t>(*m);
      fr.member_index = *m;
      fr.member = usable[i];
      pred[i] += f->tx_delivered_window;
      pred_all += f->tx_delivered_window;
      ++counts[i];
    } else {
      all = false;
    }
    br.flows.push_back(std::move(fr));
  }
  for (auto& mr : br.members) {
    const auto i = static_cast<std::size_t>(std::ranges::find(usable, mr.name) - usable.begin());
    const bool hashed = i < usable.size();
    mr.predicted_flows = hashed ? counts[i] : 0;
    // A node that only receives sends no payload: no share to predict.
    mr.predicted_tx_share_pct = pred_all == 0 ? -1
                                : hashed      ? 100.0 * static_cast<double>(pred[i]) / static_cast<double>(pred_all)
                                              : 0;
  }
  if (!all) {
    br.prediction = "partial: some flows' peers have no known MAC (layer2 policies need the ARP entry)";
  } else if (mostly_rx || pred_all == 0) {
    br.prediction = "not compared: this node mostly receives on this bond (its transmit side carries ACKs only)";
  } else {
    // Payload shares against counter shares: headers cost every member alike, so 10 points
    // apart means a flow is on another member than the hash says.
    double worst = 0;
    for (const auto& mr : br.members) worst = std::max(worst, std::fabs(mr.predicted_tx_share_pct - mr.tx_share_pct));
    br.prediction = worst <= 10.0 ? "agrees" : "differs";
    if (worst > 10.0) {
      findings.push_back(fmt::format(
          "{}: the members' transmit shares differ from the kernel hash's prediction by up to {:.0f} points: this "
          "kernel hashes differently, or a member failed over",
          who, worst));
    }
  }
  br.notes.push_back(fmt::format("{}: {} flows -> {} split over {} (predicted), {:.1f} of {} links used (transmit)",
                                 who, flows.size(), fmt::join(counts, "/"), fmt::join(usable, "/"), br.tx_members_used,
                                 br.members.size()));
}

// Plain-language reading of the transmit split (two members or more, some bytes sent).
void tx_notes(BondReport& br, const BondInfo& open, std::size_t flows, const std::string& who) {
  const std::size_t n = br.members.size();
  const bool lb = br.mode == "balance-alb" || br.mode == "balance-tlb";
  const auto t = std::ranges::max_element(br.members, {}, &BondMemberReport::tx_share_pct);
  const auto policy = parse_hash_policy(br.hash_policy);
  if (t->tx_share_pct >= 90.0) {
    const std::string why =
        lb ? fmt::format(
                 ": {} sends to each peer address through one member at a time{}, and this test has {} peer "
                 "address(es) on the bond: more peers (addresses) spread it",
                 br.mode, open.tlb_dynamic_lb == 0 ? " (picked by the xmit hash, tlb_dynamic_lb=0)" : "", br.peers)
        : bond_hashes(open) ? fmt::format(": the hash put every flow there ({} flow(s), {} peer(s)){}", flows, br.peers,
                                          policy && policy_uses_ports(*policy)
                                              ? "; --spread-ports chooses source ports that cover every member"
                                              : "")
                            : "";
    br.notes.push_back(
        fmt::format("{}: transmit side on one member ({} {:.0f}%){}", who, t->name, t->tx_share_pct, why));
    return;
  }
  std::string split;
  for (const auto& mr : br.members)
    split += fmt::format("{}{} {:.0f}%", split.empty() ? "" : ", ", mr.name, mr.tx_share_pct);
  br.notes.push_back(fmt::format("{}: transmit {:.1f} of {} links used ({})", who, br.tx_members_used, n, split));
  // tlb_dynamic_lb=1 (the default): the kernel puts each destination's hash entry on the least
  // loaded member and clears the table every 10 s, so a lone peer's traffic moves between
  // members rather than spreading: a split that says nothing about spreading.
  if (lb && open.tlb_dynamic_lb != 0 && br.peers >= 1 && static_cast<std::size_t>(br.peers) < n) {
    br.notes.push_back(fmt::format(
        "{}: {} re-places each peer address's transmit member by load every 10 s{}; with {} peer address(es) the "
        "traffic moved between members during the test: more peers (addresses) spread it",
        who, br.mode, open.tlb_dynamic_lb == 1 ? " (tlb_dynamic_lb=1)" : "", br.peers));
  }
}

// Plain-language reading of the receive split (two members or more, some bytes received).
void rx_notes(BondReport& br, const std::string& who) {
  const auto r = std::ranges::max_element(br.members, {}, &BondMemberReport::rx_share_pct);
  if (r->rx_share_pct < 90.0) {
    br.notes.push_back(fmt::format("{}: receive {:.1f} of {} links used", who, br.rx_members_used, br.members.size()));
    return;
  }
  const std::string why =
      br.mode == "balance-alb"
          ? fmt::format(
                ": balance-alb answers each peer's ARP with one member's MAC, so everything from one peer "
                "address arrives on one member ({} peer address(es) here)",
                br.peers)
      : br.mode == "balance-tlb" ? ": balance-tlb receives on the active member only"
      : br.mode == "802.3ad" || br.mode == "balance-xor"
          ? ": the peer's (switch's) hash sends everything there; a host predicts only its own transmit side"
          : "";
  br.notes.push_back(fmt::format("{}: receive side on one member ({} {:.0f}%){}", who, r->name, r->rx_share_pct, why));
}

// A member whose state changed or whose link failed: with every member's traffic before and
// after, to tell a failover from a flap.
void member_changes(BondReport& br, const std::string& who, std::vector<std::string>& findings) {
  for (const auto& mr : br.members) {
    if (mr.link_failures == 0 && mr.state_close == mr.state_open) continue;
    std::vector<std::string> others;
    for (const auto& o : br.members) {
      if (o.name != mr.name)
        others.push_back(fmt::format("{} {:.1f} -> {:.1f} MB/s", o.name,
                                     std::max(o.first_tx_mb_per_s, o.first_rx_mb_per_s),
                                     std::max(o.last_tx_mb_per_s, o.last_rx_mb_per_s)));
    }
    const std::string text = fmt::format(
        "{}: member {} changed during the test: {} -> {}, {} new link failure(s); its traffic went {:.1f} -> {:.1f} "
        "MB/s (first/last interval), the others: {}",
        who, mr.name, mr.state_open, mr.state_close, mr.link_failures,
        std::max(mr.first_tx_mb_per_s, mr.first_rx_mb_per_s), std::max(mr.last_tx_mb_per_s, mr.last_rx_mb_per_s),
        others.empty() ? std::string("none") : fmt::format("{}", fmt::join(others, ", ")));
    findings.push_back(text);
    br.notes.push_back(text);
  }
}

}  // namespace

double jain_index(const std::vector<double>& xs) {
  double sum = 0, sq = 0;
  for (double x : xs) {
    sum += x;
    sq += x * x;
  }
  return xs.empty() || sq <= 0 ? 0.0 : sum * sum / (static_cast<double>(xs.size()) * sq);
}

BondReport bond_report(const BondResult& b, const AgentResult& a, const std::string& node,
                       std::vector<std::string>& findings) {
  BondReport br;
  const BondInfo& open = b.at_open;
  br.name = open.name;
  br.mode = open.mode;
  br.hash_policy = open.hash_policy;
  br.inventory = open;
  const std::string who = fmt::format("{} bond {} ({}{})", node, br.name, br.mode.empty() ? "unknown mode" : br.mode,
                                      br.hash_policy.empty() ? "" : " " + br.hash_policy);

  std::set<std::string> peers;
  std::uint64_t flow_tx = 0, flow_rx = 0;
  std::vector<const FlowResult*> flows;
  for (const auto& f : a.flows) {
    if (f.iface != br.name || f.op == FlowOp::probe) continue;
    flows.push_back(&f);
    if (const auto ep = endpoint_of(f.remote)) peers.insert(ep->host);
    flow_tx += f.tx_delivered_window;
    flow_rx += f.rx_bytes_window;
  }
  br.peers = static_cast<int>(peers.size());
  // The client agents already reported these before the test (node warnings): not twice.
  for (const auto& f : bond_findings(open, br.peers)) {
    if (std::find(a.warnings.begin(), a.warnings.end(), f) == a.warnings.end())
      findings.push_back(fmt::format("{}: {}", node, f));
  }
  const auto [tx_all, rx_all] = add_members(br, b, a);
  predict_split(br, b, flows, flow_tx < flow_rx, who, findings);
  if (br.members.size() >= 2 && tx_all > 0) tx_notes(br, open, flows.size(), who);
  if (br.members.size() >= 2 && rx_all > 0) rx_notes(br, who);
  member_changes(br, who, findings);
  return br;
}

void explain_alb_receive(const std::vector<NodeRecord>& nodes, Report& r) {
  for (const auto& n : nodes) {
    if (!n.result) continue;
    for (const auto& b : n.result->bonds) {
      const BondInfo& bond = b.at_open;
      if (bond.mode != "balance-alb") continue;
      std::set<std::string> mine;  // this bond's addresses the test's flows used
      for (const auto& f : n.result->flows) {
        const auto ep = f.iface == bond.name && f.op != FlowOp::probe ? endpoint_of(f.local) : std::nullopt;
        if (ep) mine.insert(ep->host);
      }
      // Each peer's ARP entry for one of these addresses is the member its traffic arrives on.
      std::set<std::string> told, members;
      for (const auto& m : nodes) {
        if (m.index == n.index || !m.result) continue;
        for (const auto& pb : m.result->bonds) {
          for (const auto& [ip, mac] : pb.neighbors) {
            if (!mine.count(ip)) continue;
            const auto x = std::ranges::find(bond.members, mac, &BondMember::perm_hwaddr);  // permanent: unique
            const std::string who = x != bond.members.end() && !mac.empty()         ? x->name
                                    : mac == bond.mac && !bond.active_slave.empty() ? bond.active_slave
                                                                                    : "MAC " + mac;
            members.insert(who);
            told.insert(fmt::format("{} -> {} (at {})", ip, who, m.name));
          }
        }
      }
      if (told.empty()) continue;
      const std::string verdict =
          members.size() > 1 ? fmt::format("{} members receive", members.size())
          : mine.size() >= 2
              ? fmt::format(
                    "every address of this bond reaches {} only, so its receive side cannot spread: the peers "
                    "learned one MAC for all of them (ARP answered before the bond had all its members, or "
                    "asked from a single peer address)",
                    *members.begin())
              : fmt::format("one address, one member ({}): more address pairs let balance-alb spread the receive side",
                            *members.begin());
      for (auto& nr : r.nodes) {
        const auto br = std::ranges::find(nr.bonds, bond.name, &BondReport::name);
        if (nr.index == n.index && br != nr.bonds.end()) {
          br->notes.push_back(fmt::format("{} bond {} (balance-alb): receive members by the peers' ARP tables: {}; {}",
                                          n.name, bond.name, fmt::join(told, ", "), verdict));
        }
      }
    }
  }
}

std::string render_bond_inventory_text(const std::vector<BondInfo>& bonds) {
  std::string out;
  for (const auto& b : bonds) {
    out += fmt::format("\nbond {}: mode {}", b.name, text::or_dash(b.mode, "?"));
    if (!b.hash_policy.empty()) out += ", xmit_hash_policy " + b.hash_policy;
    out += fmt::format(", MII {}, miimon {} ms", text::or_dash(b.mii_status, "?"), b.miimon_ms);
    if (b.arp_interval_ms > 0)
      out += fmt::format(", arp_interval {} ms ({})", b.arp_interval_ms, fmt::join(b.arp_targets, ","));
    if (b.mode == "802.3ad") {
      out += fmt::format(", lacp_rate {}, ad_select {}, active aggregator {} ({} ports), partner {}",
                         text::or_dash(b.lacp_rate, "?"), text::or_dash(b.ad_select, "?"),
                         b.active_aggregator >= 0 ? std::to_string(b.active_aggregator) : "none", b.aggregator_ports,
                         text::or_dash(b.partner_mac, "?"));
    }
    if (!b.active_slave.empty()) out += ", active " + b.active_slave;
    out += fmt::format(", mtu {}\n", b.mtu);
    out += fmt::format("  {:<16} {:<10} {:>10} {:<7} {:>8} {:>6} {:>10} {}\n", "member", "MII", "speed Mb/s", "duplex",
                       "failures", "mtu", "aggregator", "lacp actor/partner state");
    for (const auto& m : b.members) {
      out +=
          fmt::format("  {:<16} {:<10} {:>10} {:<7} {:>8} {:>6} {:>10} {}\n", m.name, text::or_dash(m.mii_status, "?"),
                      text::positive_or_dash(m.speed_mbps), m.duplex, m.link_failures, m.mtu,
                      m.aggregator_id >= 0 ? std::to_string(m.aggregator_id) : "-",
                      m.actor_port_state >= 0 ? fmt::format("{}/{}", m.actor_port_state, m.partner_port_state) : "-");
    }
    for (const auto& f : bond_findings(b)) out += "  ! " + f + "\n";
  }
  return out;
}

}  // namespace fabperf
