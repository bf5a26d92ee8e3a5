#include <fabperf/core/stats.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/report/report.hpp>

#include "report/text_table.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <functional>

namespace fabperf {
namespace {

using namespace text;  // the table and its number formats

// One bar a point, the largest full height; value: a member pointer or a function of the point.
template <class F>
std::string spark(const std::vector<IntervalPoint>& pts, F value) {
  static constexpr const char* kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  double mx = 0;
  for (const auto& p : pts) mx = std::max(mx, std::invoke(value, p));
  std::string s;
  for (const auto& p : pts) {
    const double v = std::invoke(value, p);
    const int i = mx > 0 ? std::clamp(static_cast<int>(v / mx * 7.999), 0, 7) : 0;
    s += kBars[i];
  }
  return s;
}
std::string spark_total(const std::vector<IntervalPoint>& pts) {
  return spark(pts, [](const IntervalPoint& p) { return p.tx_mb_per_s + p.rx_mb_per_s; });
}

// The busier direction's payload / wire ratio and the verdict ("-" when not audited).
std::string wire_check(const WireAudit& a) {
  if (a.verdict != "ok" && a.verdict != "payload above wire") return "-";
  const bool tx_busier = a.wire_tx_bytes >= a.wire_rx_bytes;
  const auto ratio = tx_busier ? a.tx_ratio : a.rx_ratio;
  return fmt::format("{} {}", ratio ? fmt::format("{:.3f}", *ratio) : std::string("-"),
                     a.verdict == "ok" ? "ok" : "OVER");
}

// What the wire saw: the dips with the counters that rose in them, then the top movers per
// category over the test (compute_report built both; docs/counters.md).
std::string render_counters_text(const Report& r) {
  std::string dips;
  for (const auto& n : r.nodes) {
    if (!n.counters) continue;
    for (const auto& d : n.counters->dips) dips += fmt::format("  {} {}\n", n.name, d.text);
  }
  std::string movers;
  for (const auto& c : r.counter_movers) {
    movers += fmt::format("  {:<16} {:>14}:", describe(c.category), format_count(c.total));
    for (std::size_t i = 0; i < c.top.size(); ++i) {
      movers +=
          fmt::format("{} {} +{}", i ? "," : "", c.top[i].source + " " + c.top[i].name, format_count(c.top[i].delta));
    }
    movers += "\n";
  }
  if (dips.empty() && movers.empty()) return "";
  std::string out =
      fmt::format("Counters (intervals more than {:.0f}% below their link's median, and what rose in them)\n", kDipPct);
  out += dips.empty() ? "  no interval fell that far\n" : dips;
  if (!movers.empty()) out += "  top movers per category over the window (sum of every counter in it):\n" + movers;
  return out + "\n";
}

// What ran, how long, how it sent, and how far the hosts' clocks can be trusted.
std::string header_text(const Report& r) {
  const auto& s = r.spec;
  const double t = static_cast<double>(s.time().count()) / 1e9;
  const double w0 = static_cast<double>(s.warmup().count()) / 1e9;
  const double w1 = t - static_cast<double>(s.cooldown().count()) / 1e9;
  std::string out =
      fmt::format("fabperf {}: test {} ({} mode, {}), {} client(s) -> {} server(s)\n", r.fabperf_version,
                  to_string(s.test()), to_string(s.mode()), to_string(s.transport()), r.clients, r.servers);
  out += fmt::format("  time {:g} s, measured {:g}..{:g} s; buffsize {}, socksize {}, threads {}, parallel {}\n", t, w0,
                     w1, format_size(s.buffsize()), s.socksize() ? format_size(s.socksize()) : "OS default",
                     s.threads(), s.parallel());
  if (!r.socksize_basis.empty()) out += "  " + r.socksize_basis + "\n";
  if (s.transport() == Transport::tcp) {
    out += fmt::format("  send method {}{}\n",
                       s.send_method() == SendMethod::automatic
                           ? "auto (each sending agent tried write and sendfile in the warm-up)"
                       : s.zerocopy() ? "zerocopy (MSG_ZEROCOPY)"
                                      : std::string(to_string(s.send_method())),
                       s.skip_rx_copy() ? "; receivers skip the copy (MSG_TRUNC)" : "");
  }
  return out + fmt::format("  clocks aligned to within {} us (largest offset uncertainty)\n\n",
                           us(r.max_clock_uncertainty_us));
}

std::string nodes_text(const Report& r) {
  Table nodes({col::node, col::role, col::status, col::tx_mb_per_s, col::rx_mb_per_s, col::cpu_busy_pct,
               col::retrans_segs, col::clock_offset_us, col::clock_uncertainty_us});
  std::string chosen;
  for (const auto& n : r.nodes) {
    const bool have = n.status == NodeStatus::ok || n.window_s > 0;
    nodes.add({n.name, n.role, std::string(to_string(n.status)) + (n.aborted ? "*" : ""),
               have ? f1(n.tx_mb_per_s) : "-", have ? f1(n.rx_mb_per_s) : "-", have ? f0(n.cpu_busy_pct) : "-",
               count_or_dash(n.retrans_segs), f0(n.clock_offset_us), us(n.clock_uncertainty_us)});
    for (const auto& tr : n.trials) chosen += fmt::format("  {}: {}\n", n.name, tr.summary);
  }
  return "Nodes\n" + nodes.str() + "\n" +
         (chosen.empty() ? "" : "Chosen by measurement on each host\n" + chosen + "\n");
}

std::string pairs_text(const Report& r) {
  Table pairs({"client", "server", col::mb_per_s, col::msg_per_s, "conns", col::retrans, col::rtt_us, col::snd_mss});
  for (const auto& p : r.pairs) {
    pairs.add({node_name(r, p.client) + (p.measured_by == "server" ? " (by server)" : ""), node_name(r, p.server),
               f1(p.tput.mb_per_s), f0(p.tput.msg_per_s), std::to_string(p.connections), std::to_string(p.retrans),
               positive_or_dash(p.rtt_us), positive_or_dash(p.snd_mss)});
  }
  return "Pairs (client -> server)\n" + pairs.str() + "\n";
}

// Block latency and network delay share one table; the delay pings are too few for a p99.9.
std::string latency_table(const Report& r, bool delay) {
  std::vector<Head> head{"client", col::count, col::mean_us, col::p50_us, col::p90_us, col::p99_us, col::max_us};
  if (!delay) head.insert(head.end() - 1, col::p999_us);
  Table t(head);
  auto row = [&](const std::string& name, const LatencySummary& l) {
    std::vector<std::string> v{
        name, std::to_string(l.count), us(l.mean_us), us(l.p50_us), us(l.p90_us), us(l.p99_us), us(l.max_us)};
    if (!delay) v.insert(v.end() - 1, us(l.p999_us));
    t.add(std::move(v));
  };
  for (const auto& n : r.nodes) {
    if (const auto& l = delay ? n.delay : n.latency) row(n.name, *l);
  }
  if (!delay && r.clients > 1) row("all", *r.latency);
  return t.str() + "\n";
}

std::string intervals_text(const Report& r) {
  if (std::ranges::none_of(r.nodes, [](const NodeReport& n) { return n.intervals.size() > 1; })) return "";
  Table iv({col::node, "min", "avg", "max", "tx", "rx"});
  for (const auto& n : r.nodes) {
    if (n.intervals.empty()) continue;
    std::vector<double> v;
    for (const auto& p : n.intervals) v.push_back(p.tx_mb_per_s + p.rx_mb_per_s);
    const auto [mn, mx] = std::ranges::minmax(v);
    iv.add({n.name, f1(mn), f1(stats::mean(v)), f1(mx), spark(n.intervals, &IntervalPoint::tx_mb_per_s),
            spark(n.intervals, &IntervalPoint::rx_mb_per_s)});
  }
  return "Over time (per interval, tx+rx MB/s: min / avg / max)\n" + iv.str() + "\n";
}

std::string links_text(const Report& r) {
  if (std::ranges::all_of(r.nodes, [](const NodeReport& n) { return n.links.empty(); })) return "";
  Table lt({col::node, col::link, col::kind, col::speed_mbps, col::mtu, col::tx_mb_per_s, col::rx_mb_per_s,
            col::payload_mb_per_s, col::utilization_pct, col::efficiency_pct, col::wire_check, col::errors, col::drops,
            "tx+rx over time"});
  for (const auto& n : r.nodes) {
    for (const auto& l : n.links) {
      lt.add({n.name, l.name + (l.vanished ? " (gone)" : "") + (l.jumbo_mismatch ? " (!mtu)" : ""), l.kind,
              positive_or_dash(l.speed_mbps), std::to_string(l.mtu), f1(l.tx_mb_per_s), f1(l.rx_mb_per_s),
              f1(std::max(l.payload_tx_mb_per_s, l.payload_rx_mb_per_s)), f1_or_dash(l.utilization_pct),
              f1_or_dash(l.efficiency_pct), wire_check(l.wire_audit), std::to_string(l.tx_errors + l.rx_errors),
              std::to_string(l.tx_dropped + l.rx_dropped), spark_total(l.intervals)});
    }
  }
  return "Links (interface counters over the window; payload = fabperf's bytes that arrived; wire check = "
         "payload / interface bytes, busier direction)\n" +
         lt.str() + "\n";
}

std::string connections_text(const Report& r) {
  Table conns(
      {col::node, "role", "op", "local", "remote", col::mb_per_s, col::retrans, col::rtt_us, col::snd_mss, "error"});
  for (const auto& c : r.connections) {
    conns.add({node_name(r, c.node), std::string(to_string(c.role)), std::string(to_string(c.op)), c.local, c.remote,
               f1(c.mb_per_s), std::to_string(c.retrans_window), c.tcp.valid ? std::to_string(c.tcp.rtt_us) : "-",
               c.tcp.valid ? std::to_string(c.tcp.snd_mss) : "-", c.error});
  }
  return "Connections\n" + conns.str() + "\n";
}

}  // namespace

std::string render_summary_line(const Report& r) {
  const auto& s = r.spec;
  const double t = static_cast<double>(s.time().count()) / 1e9;
  std::string line = fmt::format("{}-{} {} {:.0f} MB/sec ({:.0f} msg/sec), cli {:.0f}% srv {:.0f}%, time {:g}, buff {}",
                                 r.clients, r.servers, to_string(s.test()), r.aggregate.mb_per_s, r.aggregate.msg_per_s,
                                 r.cli_cpu_pct, r.srv_cpu_pct, t, s.buffsize());
  if (s.socksize() != 0) line += fmt::format(", sock {}", s.socksize());
  if (s.threads() != 4) line += fmt::format(", th {}", s.threads());
  if (s.parallel() != 1) line += fmt::format(", parallel {}", s.parallel());
  return line;
}

std::string render_text(const Report& r, bool verbose) {
  std::string out = header_text(r) + nodes_text(r) + pairs_text(r);
  if (r.latency) out += "Block latency (rpc round trip, window only)\n" + latency_table(r, false);
  if (r.delay) {
    out += fmt::format("Network delay ({:g} ms pings to every server during the test, window only)\n",
                       std::chrono::duration<double, std::milli>(r.spec.delay_probe()).count()) +
           latency_table(r, true);
  }
  out += intervals_text(r) + links_text(r) + render_bonds_text(r) + render_rdma_ports_text(r) + render_counters_text(r);
  if (verbose) out += connections_text(r);
  if (!r.findings.empty()) {
    out += "Findings\n";
    for (const auto& f : r.findings) out += "  ! " + f + "\n";
    out += "\n";
  }
  out += fmt::format("aggregate {:.1f} MB/s ({:.2f} Gbit/s, {:.0f} msg/s){}\n", r.aggregate.mb_per_s,
                     r.aggregate.gbit_per_s, r.aggregate.msg_per_s, r.complete ? "" : "  [INCOMPLETE: see findings]");
  return out + render_summary_line(r) + "\n";
}

std::string render_rdma_ports_text(const Report& r) {
  if (std::ranges::all_of(r.nodes, [](const NodeReport& n) { return n.rdma_ports.empty(); })) return "";
  std::string out =
      "RDMA ports (port counters over the window; data counters count 4-byte words, shown as bytes; payload = "
      "fabperf's bytes on this node's queue pairs, data pkts = those bytes in MTU-sized packets)\n";
  Table t({col::node, col::rdma_port, col::link_layer, col::rate, col::active_mtu, col::tx_mb_per_s, col::rx_mb_per_s,
           col::tx_packets, col::rx_packets, col::payload_mb_per_s, col::data_packets, col::error_counters});
  std::string details;
  for (const auto& n : r.nodes) {
    for (const auto& p : n.rdma_ports) {
      std::uint64_t errs = 0;
      for (const auto& d : p.counters) errs += d.error ? d.delta : 0;
      const double w = n.window_s > 0 ? n.window_s : p.window_s;
      t.add({n.name, p.port, or_dash(p.link_layer), or_dash(p.rate), positive_or_dash(p.active_mtu),
             f1_or_dash(p.tx_mb_per_s), f1_or_dash(p.rx_mb_per_s), count_or_dash(p.tx_packets),
             count_or_dash(p.rx_packets), f1(mb_per_s(std::max(p.payload_tx_bytes, p.payload_rx_bytes), w)),
             std::to_string(std::max(p.data_packets_tx, p.data_packets_rx)),
             p.have_counters ? std::to_string(errs) : "-"});
      std::string nonzero;
      for (const auto& d : p.counters) {
        if (d.delta > 0)
          nonzero += fmt::format("{}{} +{}", nonzero.empty() ? "" : ", ", d.name.substr(d.name.find('/') + 1), d.delta);
      }
      details += fmt::format("  {} {}: {}\n", n.name, p.port,
                             !p.have_counters     ? std::string("no counter samples")
                             : p.counters.empty() ? std::string("no readable counters")
                             : nonzero.empty()    ? std::string("every counter unchanged")
                                                  : nonzero);
      if (!p.unreadable.empty()) details += fmt::format("    not readable: {}\n", fmt::join(p.unreadable, ", "));
    }
  }
  return out + t.str() + details + "\n";
}

std::string render_bonds_text(const Report& r) {
  std::string out;
  for (const auto& n : r.nodes) {
    for (const auto& b : n.bonds) {
      out += fmt::format("Bond {} on {}: {}{}, {} member(s), {} peer address(es)\n", b.name, n.name,
                         b.mode.empty() ? "unknown mode" : b.mode, b.hash_policy.empty() ? "" : " " + b.hash_policy,
                         b.members.size(), b.peers);
      Table t({col::member, col::speed_mbps, col::mii_status, col::link_failures, col::tx_mb_per_s, col::rx_mb_per_s,
               col::tx_share_pct, col::rx_share_pct, col::predicted_flows, col::predicted_tx_share_pct,
               "tx+rx over time"});
      for (const auto& m : b.members) {
        t.add({m.name, positive_or_dash(m.speed_mbps),
               m.state_open == m.state_close ? m.state_open : m.state_open + "->" + m.state_close,
               std::to_string(m.link_failures), f1(m.tx_mb_per_s), f1(m.rx_mb_per_s), f1(m.tx_share_pct),
               f1(m.rx_share_pct), count_or_dash(m.predicted_flows), f1_or_dash(m.predicted_tx_share_pct),
               spark_total(m.intervals)});
      }
      out += t.str();
      out += fmt::format("  bond total: tx {:.1f} MB/s, rx {:.1f} MB/s", b.tx_mb_per_s, b.rx_mb_per_s);
      if (b.member_speed_sum_mbps > 0) {
        out += fmt::format(" of {:.0f} Mb/s in members ({:.1f}% used; best TCP goodput {:.1f} MB/s)",
                           b.member_speed_sum_mbps, b.capacity_used_pct, b.best_goodput_mb_per_s);
      }
      out += fmt::format(
          "\n  balance: tx Jain {:.2f} ({:.1f} of {} links used, max/min {}), rx Jain {:.2f} ({:.1f} of {} "
          "links used, max/min {})\n",
          b.tx_jain, b.tx_members_used, b.members.size(), b.tx_max_min > 0 ? f1(b.tx_max_min) : "inf", b.rx_jain,
          b.rx_members_used, b.members.size(), b.rx_max_min > 0 ? f1(b.rx_max_min) : "inf");
      if (!b.prediction.empty()) out += "  hash prediction: " + b.prediction + "\n";
      if (!b.flows.empty()) {
        out += "  flows (local -> remote: member by the kernel's hash):\n";
        for (const auto& f : b.flows) {
          out += fmt::format("    {} -> {}: {}\n", f.local, f.remote, or_dash(f.member, "?"));
        }
      }
      for (const auto& note : b.notes) out += "  * " + note + "\n";
      out += "\n";
    }
  }
  return out;
}

}  // namespace fabperf
