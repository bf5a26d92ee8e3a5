// --spread-ports: each connection's source port chosen so that the local bond's transmit hash
// puts it on the next member (round-robin over the usable members), with the kernel's own hash
// (sysinfo/bonding). Runs on the set-up thread only.
#include "engine/tcp_internal.hpp"

#include <fabperf/sysinfo/bonding.hpp>
#include <fabperf/sysinfo/links.hpp>

#include <fmt/format.h>
#include <algorithm>

namespace fabperf {

std::optional<std::uint16_t> TcpEngine::spread_port(const std::string& src_ip, const std::string& dst_ip,
                                                    std::uint16_t dst_port, int attempt) {
  auto it = spread_.find(src_ip);
  if (it == spread_.end()) {
    Spread sp;
    const std::string iface = interface_of_address(src_ip);
    const auto bond = read_bond(iface);
    const auto policy = bond ? parse_hash_policy(bond->hash_policy) : std::nullopt;
    const int members = bond ? static_cast<int>(usable_members(*bond).size()) : 0;
    if (!bond) {
      ctx_->warn(fmt::format("--spread-ports: {} leaves on {}, which is not a bond: ports left to the kernel", src_ip,
                             iface.empty() ? "an unknown interface" : iface));
    } else if (!bond_hashes(*bond) || !policy || !policy_uses_ports(*policy)) {
      ctx_->warn(fmt::format("--spread-ports: bond {} ({}{}) does not choose members by port: ports left to the kernel",
                             bond->name, bond->mode, bond->hash_policy.empty() ? "" : ", " + bond->hash_policy));
    } else if (members < 1) {
      ctx_->warn(fmt::format("--spread-ports: bond {} has no usable member: ports left to the kernel", bond->name));
    } else {
      sp.bond = bond->name;
      sp.policy = *policy;
      sp.members = members;
    }
    it = spread_.emplace(src_ip, std::move(sp)).first;
  }
  Spread& sp = it->second;
  if (sp.bond.empty()) return std::nullopt;
  // A retry after EADDRINUSE stays on the member the first attempt aimed at.
  const int member =
      static_cast<int>((attempt == 0 ? sp.next++ : sp.next - 1) % static_cast<std::uint32_t>(sp.members));
  FlowHeaders h;
  h.src_ip = src_ip;
  h.dst_ip = dst_ip;
  h.dst_port = dst_port;
  // Below the default ephemeral range (32768-60999), so the kernel's own choices do not collide.
  const auto port = port_for_member(sp.policy, h, member, sp.members, 10000, 32767, sp.taken);
  if (port) sp.taken.push_back(*port);
  return port;
}

void TcpEngine::spread_port_taken(const std::string& src_ip, std::uint16_t port) {
  auto it = spread_.find(src_ip);
  if (it != spread_.end() &&
      std::find(it->second.taken.begin(), it->second.taken.end(), port) == it->second.taken.end()) {
    it->second.taken.push_back(port);
  }
}

}  // namespace fabperf
