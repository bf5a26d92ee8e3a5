// `fabperf links [HOST...]`: this host's network interfaces, or those of the agents named.
#include "cli/options.hpp"

#include <fabperf/core/fields.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/sysinfo/bonding.hpp>
#include <fabperf/sysinfo/links.hpp>
#include <fabperf/sysinfo/rdma_sysfs.hpp>

#include <spdlog/spdlog.h>
#include <iostream>
#include <nlohmann/json.hpp>

namespace fabperf::cli {
namespace {

void print_links_table(const std::vector<LinkInfo>& links, const SocketLimits& limits, bool all,
                       const std::vector<BondInfo>& bonds, const std::vector<RdmaDevice>& rdma) {
  std::cout << fmt::format("{:<16} {:<9} {:<10} {:<6} {:>10} {:<7} {:>6} {:<18} {}\n", "interface", "kind", "driver",
                           "state", "speed Mb/s", "duplex", "mtu", "master/members", "addresses");
  for (const auto& l : links) {
    if (!all && l.operstate == "down") continue;
    std::string rel = l.master;
    for (const auto& m : l.members) rel += (rel.empty() ? "" : "+") + m;
    if (!l.vlan_parent.empty()) rel = "vlan of " + l.vlan_parent;
    const std::string addrs = fmt::format("{}", fmt::join(l.addresses, " "));
    std::cout << fmt::format("{:<16} {:<9} {:<10} {:<6} {:>10} {:<7} {:>6} {:<18} {}\n", l.name, l.kind,
                             l.driver.empty() ? "-" : l.driver, l.operstate,
                             l.speed_mbps > 0 ? std::to_string(l.speed_mbps) : "-", l.duplex, l.mtu,
                             rel.empty() ? "-" : rel, addrs.empty() ? "-" : addrs);
  }
  std::cout << render_bond_inventory_text(bonds);
  std::cout << render_rdma_inventory_text(rdma);
  std::cout << render_pcie_inventory_text(links, rdma);
  std::cout << fmt::format("\nsocket limits: net.core.rmem_max {} wmem_max {}; tcp_rmem {} {} {}; tcp_wmem {} {} {}\n",
                           limits.rmem_max, limits.wmem_max, limits.tcp_rmem[0], limits.tcp_rmem[1], limits.tcp_rmem[2],
                           limits.tcp_wmem[0], limits.tcp_wmem[1], limits.tcp_wmem[2]);
}

nlohmann::json links_json(const std::vector<LinkInfo>& links, const SocketLimits& limits,
                          const std::vector<BondInfo>& bonds, const std::vector<RdmaDevice>& rdma) {
  nlohmann::json barr = JsonOut::put(bonds);
  for (std::size_t i = 0; i < bonds.size(); ++i) barr[i]["findings"] = bond_findings(bonds[i]);
  return {{"links", JsonOut::put(links)},
          {"bonds", barr},
          {"socket_limits", to_json(limits)},
          {"rdma", JsonOut::put(rdma)}};
}

}  // namespace

int cmd_links(int argc, char** argv) {
  cxxopts::Options o(
      "fabperf links",
      "List network interfaces: this host's, or those of the agents named (fabperf links [HOST[:PORT]...]).");
  o.add_options()("json", "print JSON instead of a table")("a,all", "include interfaces that are down")(
      "hosts", "", cxxopts::value<std::vector<std::string>>());
  add_common_options(o, kKeyFile | kConnectTimeout);
  auto r = parse_options(o, argc, argv, {"hosts"}, "[HOST[:PORT]...]");
  const bool json_out = r.count("json") > 0;
  const bool all = r.count("all") > 0;
  if (!r.count("hosts")) {
    const auto links = read_links();
    const auto limits = read_socket_limits();
    const auto rdma = read_local_rdma_devices();
    // Bonds are read only for this host: the LINKS message carries interfaces, not bond state.
    std::vector<BondInfo> bonds;
    for (const auto& l : links) {
      if (auto b = l.kind == "bond" ? read_bond(l.name) : std::nullopt) bonds.push_back(std::move(*b));
    }
    if (json_out) {
      std::cout << links_json(links, limits, bonds, rdma).dump(2) << "\n";
    } else {
      print_links_table(links, limits, all, bonds, rdma);
    }
    return 0;
  }
  // Remote inventory: each agent answers over its authenticated control connection.
  AgentQuery q;
  for (const auto& h : get<std::vector<std::string>>(r, "hosts")) {
    for (auto& hp : host_list(h, "links")) q.agents.push_back(std::move(hp));
  }
  q.connect_timeout = connect_timeout_option(r, true);
  q.key = key_option(r);
  spdlog::set_level(spdlog::level::off);  // errors are reported per host below
  const auto replies = fetch_links(q);
  int failed = 0;
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& a : replies) {
    if (!a.error.empty()) {
      ++failed;
      std::cerr << "fabperf: links: " << a.error << "\n";
      hosts.push_back({{"agent", a.agent}, {"error", a.error}});
      continue;
    }
    if (json_out) {
      auto j = links_json(a.links, a.limits, {}, a.rdma);
      j["agent"] = a.agent;
      j["hostname"] = a.hostname;
      hosts.push_back(std::move(j));
    } else {
      std::cout << fmt::format("== {} ({}) ==\n", a.agent, a.hostname);
      print_links_table(a.links, a.limits, all, {}, a.rdma);
      std::cout << "\n";
    }
  }
  if (json_out) std::cout << nlohmann::json{{"hosts", hosts}}.dump(2) << "\n";
  return failed > 0 ? static_cast<int>(ExitCode::infrastructure) : 0;
}

}  // namespace fabperf::cli
