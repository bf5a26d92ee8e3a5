// PCIe links behind a node's test interfaces: the ports' traffic against the link's usable
// bandwidth, and which limit (the slot, the node's CPU) bounded the node. Also the `fabperf
// links` view of every PCIe link. Pure: the figures come from the result and the inventory.
#include <fabperf/report/report.hpp>
#include <fabperf/sysinfo/pcie.hpp>

#include "report/text_table.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <iterator>
#include <map>

namespace fabperf {

std::vector<PcieSlotReport> pcie_slot_reports(const AgentResult& a, const std::vector<LinkReport>& links,
                                              const NodeReport& node, std::vector<std::string>& findings) {
  std::vector<PcieSlotReport> out;
  std::map<std::string, std::size_t> by_key;
  for (const auto& l : a.links) {
    if (!l.info.pcie) continue;
    const auto lr = std::ranges::find(links, l.info.name, &LinkReport::name);
    if (lr == links.end()) continue;
    const PcieInfo& p = *l.info.pcie;
    auto [it, fresh] = by_key.try_emplace(pcie_link_key(p), out.size());
    auto& s = fresh ? out.emplace_back() : out[it->second];
    if (fresh) {
      s.address = p.address;
      s.link = pcie_link_text(pcie_effective_link(p));
      s.ports_speed_mbps = pcie_ports_mbps(p);
      s.usable_gbps = pcie_ceiling_gbps(p);
    }
    s.ports.push_back(l.info.name);
    s.tx_gbps += lr->tx_mb_per_s * 8.0 / 1e3;
    s.rx_gbps += lr->rx_mb_per_s * 8.0 / 1e3;
  }
  bool any_at_ceiling = false;
  for (auto& s : out) {
    if (s.usable_gbps <= 0) continue;
    s.used_pct = 100.0 * std::max(s.tx_gbps, s.rx_gbps) / s.usable_gbps;
    s.at_ceiling = s.used_pct >= kPcieCeilingPct;
    any_at_ceiling = any_at_ceiling || s.at_ceiling;
  }
  for (auto& s : out) {
    const std::string ports = fmt::format("{}", fmt::join(s.ports, "+"));
    const std::string dir = s.tx_gbps >= s.rx_gbps ? "sent" : "received";
    const std::string of_ports =
        s.ports_speed_mbps > 0 ? fmt::format(" ({} Gbit/s of ports)", static_cast<double>(s.ports_speed_mbps) / 1e3)
                               : "";
    if (s.at_ceiling) {
      s.bound_by = node.host_limited ? "slot or host" : "slot";
      std::string carried = fmt::format(
          "node {}: {} {} {:.1f} Gbit/s, {:.0f}% of its PCIe link's {:.1f} Gbit/s usable ({} at {})", node.name, ports,
          dir, std::max(s.tx_gbps, s.rx_gbps), s.used_pct, s.usable_gbps, s.link, s.address);
      carried += node.host_limited ? fmt::format(
                                         ", while fabperf thread {} was {:.0f}% busy: the slot "
                                         "or this node's CPU bounded it, not the network links",
                                         node.busiest_thread, node.busiest_thread_pct)
                                   : ": the slot bounded this node, not the network links";
      findings.push_back(carried + of_ports);
    } else if (node.host_limited && !any_at_ceiling && s.usable_gbps > 0) {
      s.bound_by = "host";
      findings.push_back(fmt::format(
          "node {}: its PCIe link ({} at {}) carried {:.0f}% of its {:.1f} Gbit/s usable: the "
          "CPU (fabperf thread {} at {:.0f}%), not the slot, bounded this node",
          node.name, s.link, s.address, s.used_pct, s.usable_gbps, node.busiest_thread, node.busiest_thread_pct));
    }
  }
  return out;
}

std::string render_pcie_inventory_text(const std::vector<LinkInfo>& links, const std::vector<RdmaDevice>& rdma) {
  struct Fn {
    std::string who;  // the interface or RDMA device
    const PcieInfo* p;
  };
  std::vector<std::pair<std::string, std::vector<Fn>>> groups;  // by link, in the order first seen
  auto add = [&](const std::string& who, const PcieInfo& p) {
    auto g = std::ranges::find(groups, pcie_link_key(p), &std::pair<std::string, std::vector<Fn>>::first);
    if (g == groups.end()) g = groups.insert(g, {pcie_link_key(p), {}});
    // One line per function: a second port of it (mlx4), or its RDMA device, adds nothing new.
    if (std::ranges::none_of(g->second, [&](const Fn& f) { return f.p->address == p.address; }))
      g->second.push_back({who, &p});
  };
  for (const auto& l : links) {
    if (l.pcie) add(l.name, *l.pcie);
  }
  for (const auto& d : rdma) {
    if (d.pcie) add(d.name, *d.pcie);
  }
  if (groups.empty()) return "";
  const auto state = [](const PcieLinkState& s) {
    return s.width > 0 && s.gts > 0 ? pcie_link_text(s) : std::string("-");
  };
  std::string out = fmt::format("\n{:<14} {:<18} {:<18} {:<18} {:>4} {:>14}  {}\n", "PCIe device", "link", "card max",
                                "slot max", "numa", "usable Gbit/s", "ports");
  std::string notes;
  for (const auto& [key, g] : groups) {
    const PcieInfo& p = *g.front().p;
    // A loop, not views::transform: clang cannot compile that view over libstdc++ 12's ranges.
    std::vector<std::string> names;
    for (const auto& x : p.ports) names.push_back(x.name);
    std::string ports = fmt::format("{}", fmt::join(names, " "));
    const std::string speeds = pcie_ports_text(p);
    if (!speeds.empty())
      ports += fmt::format(": {} ({:g} Gbit/s)", speeds, static_cast<double>(pcie_ports_mbps(p)) / 1e3);
    const double usable = pcie_ceiling_gbps(p);
    out += fmt::format("{:<14} {:<18} {:<18} {:<18} {:>4} {:>14}  {}\n", p.address, state(p.link), state(p.max),
                       p.port.empty() ? "-" : state(p.port_max), p.numa_node >= 0 ? std::to_string(p.numa_node) : "-",
                       usable > 0 ? fmt::format("{:.1f}", usable) : "-", text::or_dash(ports));
    if (!p.port.empty()) {
      notes +=
          fmt::format("  {}: port {}{}; max payload {} B{}\n", p.address, p.port,
                      p.limit_at.empty() ? "" : fmt::format(", narrower link {} at {}", state(p.limit), p.limit_at),
                      p.max_payload > 0 ? p.max_payload : kPcieAssumedPayload, p.max_payload > 0 ? "" : " (assumed)");
    }
    for (const auto& f : g) {
      const auto& q = f.p->irq;
      if (q.irqs == 0) continue;
      std::string where =
          q.local_cpus.empty() ? "its local CPUs unknown"
          : q.served > 0
              ? fmt::format("{:.0f}% on its local CPUs {}",
                            100.0 * static_cast<double>(q.served_local) / static_cast<double>(q.served), q.local_cpus)
              : "its local CPUs " + q.local_cpus;
      if (q.remote_affinity > 0) where += fmt::format("; {} set to other CPUs", q.remote_affinity);
      notes += fmt::format("  {} ({}): {} IRQs, {} interrupts, {}\n", f.who, f.p->address, q.irqs, q.served, where);
    }
    auto findings = pcie_link_findings(p, p.ports.empty() ? p.address : fmt::format("{}", fmt::join(names, "+")));
    for (const auto& fn : g) std::ranges::copy(pcie_irq_findings(*fn.p, fn.who), std::back_inserter(findings));
    for (const auto& f : findings) notes += fmt::format("  {:<7} {}  -> fix: {}\n", f.level, f.what, f.fix);
  }
  return out + notes;
}

}  // namespace fabperf
