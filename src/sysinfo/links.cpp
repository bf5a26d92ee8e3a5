#include <fabperf/core/fields.hpp>
#include <fabperf/core/spec.hpp>
#include <fabperf/sysinfo/counters.hpp>
#include <fabperf/sysinfo/links.hpp>
#include "sysinfo/file_read.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace fabperf {
namespace {

std::string link_target_name(const std::string& path) {
  std::error_code ec;
  const auto t = fs::read_symlink(path, ec);
  return ec ? "" : t.filename().string();
}

// Calls f(interface, address text, prefix length) for each IPv4 and IPv6 address of this host.
template <typename F>
void each_address(F&& f) {
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return;
  for (auto* p = ifa; p; p = p->ifa_next) {
    const int fam = p->ifa_addr ? p->ifa_addr->sa_family : AF_UNSPEC;
    if (fam != AF_INET && fam != AF_INET6) continue;
    // The in_addr or in6_addr of an address or a netmask.
    const auto bytes = [&](const sockaddr* a) -> const unsigned char* {
      if (fam == AF_INET)
        return reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(a)->sin_addr);
      return reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr.s6_addr;
    };
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(fam, bytes(p->ifa_addr), buf, sizeof buf);
    int prefix = 0;
    for (int i = 0; p->ifa_netmask && i < (fam == AF_INET ? 4 : 16); ++i)
      prefix += __builtin_popcount(bytes(p->ifa_netmask)[i]);
    f(std::string(p->ifa_name), std::string(buf), prefix);
  }
  freeifaddrs(ifa);
}

}  // namespace

std::optional<LinkInfo> read_link(const std::string& name, const std::string& root) {
  const std::string base = root + "/sys/class/net/" + name;
  std::error_code ec;
  // Interfaces are directories (or links to them); the bonding driver adds a plain file,
  // bonding_masters, that is not one.
  if (name.empty() || name.find('/') != std::string::npos || !fs::is_directory(base, ec)) return std::nullopt;
  LinkInfo l;
  l.name = name;
  l.mtu = sysfs::read_int(base + "/mtu", 0);
  l.operstate = sysfs::read_line(base + "/operstate");
  l.mac = sysfs::read_line(base + "/address");
  l.speed_mbps = sysfs::read_speed(base + "/speed");
  l.duplex = sysfs::read_line(base + "/duplex");
  l.driver = link_target_name(base + "/device/driver");
  l.master = link_target_name(base + "/master");
  l.numa_node = sysfs::read_int(base + "/device/numa_node", -1);
  if (fs::exists(base + "/bonding", ec)) {
    l.kind = "bond";
    l.members = sysfs::words(sysfs::read_line(base + "/bonding/slaves"));
  } else if (fs::exists(base + "/bridge", ec)) {
    l.kind = "bridge";
  } else if (name == "lo" || sysfs::read_int(base + "/type", 0) == 772) {
    l.kind = "loopback";
  } else if (fs::exists(base + "/device", ec)) {
    l.kind = "physical";
    l.pcie = read_pcie("/sys/class/net/" + name + "/device", root);
    // A virtio interface's device (the virtio device) has no numa_node; its PCI function does.
    if (l.numa_node < 0 && l.pcie) l.numa_node = l.pcie->numa_node;
  } else {
    l.kind = "virtual";
  }
  // A VLAN's parent is its only lower device.
  for (const auto& fn : sysfs::sorted_entries(base)) {
    if (fn.rfind("lower_", 0) == 0 && l.kind != "bond" && l.kind != "bridge") {
      l.vlan_parent = fn.substr(6);
      l.kind = "vlan";
    }
  }
  if (root.empty()) {
    sysfs::fill_from_ethtool(l);
    if (l.driver == "veth" && l.kind == "virtual") l.kind = "veth";
    each_address([&](const std::string& ifname, const std::string& ip, int prefix) {
      if (ifname == name) l.addresses.push_back(fmt::format("{}/{}", ip, prefix));
    });
    l.shaped_mbps = read_shaped_mbps(name);
  }
  if (l.duplex.empty()) l.duplex = "unknown";
  return l;
}

std::vector<LinkInfo> read_links(const std::string& root) {
  std::vector<LinkInfo> out;
  for (const auto& n : sysfs::sorted_entries(root + "/sys/class/net")) {
    if (auto l = read_link(n, root)) out.push_back(std::move(*l));
  }
  return out;
}

LinkCounters read_link_counters(const std::string& name, const std::string& root) {
  LinkCounters c;
  const std::string base = root + "/sys/class/net/" + name + "/statistics/";
  if (::access((base + "tx_bytes").c_str(), R_OK) != 0) return c;
  c.present = true;
  for (const auto& [file, to] : kLinkCounterFiles) c.*to = sysfs::read_u64(base + file).value_or(0);
  return c;
}

SocketLimits read_socket_limits(const std::string& root) {
  SocketLimits s;
  s.rmem_max = sysfs::read_u64(root + "/proc/sys/net/core/rmem_max").value_or(0);
  s.wmem_max = sysfs::read_u64(root + "/proc/sys/net/core/wmem_max").value_or(0);
  for (const auto& [file, to] : {std::pair{"tcp_rmem", s.tcp_rmem}, std::pair{"tcp_wmem", s.tcp_wmem}}) {
    const auto w = sysfs::words(sysfs::read_line(root + "/proc/sys/net/ipv4/" + file));
    for (std::size_t i = 0; i < 3 && i < w.size(); ++i) to[i] = sysfs::to_u64(w[i]).value_or(0);
  }
  return s;
}

std::string interface_of_address(const std::string& address) {
  const std::string ip = host_of(address);
  // Compared as inet_ntop writes it, the form each_address gives.
  in6_addr a{};  // room for either family
  const int fam = inet_pton(AF_INET, ip.c_str(), &a) == 1    ? AF_INET
                  : inet_pton(AF_INET6, ip.c_str(), &a) == 1 ? AF_INET6
                                                             : AF_UNSPEC;
  if (fam == AF_UNSPEC) return "";
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(fam, &a, text, sizeof text);
  std::string found;
  each_address([&](const std::string& ifname, const std::string& addr, int) {
    if (found.empty() && addr == text) found = ifname;
  });
  return found;
}

double best_tcp_goodput_mb_per_s(std::int64_t speed_mbps, int mtu) {
  if (speed_mbps <= 0 || mtu <= 52) return 0.0;
  const double bits = static_cast<double>(speed_mbps) * 1e6;
  return bits / 8.0 * static_cast<double>(mtu - 52) / static_cast<double>(mtu + 38) / 1e6;
}

int expected_mss(int mtu) {
  return mtu > 52 ? mtu - 52 : 0;
}

// The JSON keys are the field names.
static void fields(auto& v, LinkInfo& l) {
  v("name", l.name, 64);
  v("kind", l.kind, 32);
  v("driver", l.driver, 64);
  v("operstate", l.operstate, 32);
  v("mac", l.mac, 64);
  v("addresses", l.addresses, 256, 64);
  v("mtu", l.mtu, 0, 1 << 20);
  v("speed_mbps", l.speed_mbps, &sysfs::mbps_field);
  v.opt("shaped_mbps", l.shaped_mbps, &sysfs::mbps_field);  // agents older than the qdisc reading send none
  v("duplex", l.duplex, 16);
  v("master", l.master, 64);
  v("members", l.members, 64, 64);
  v("vlan_parent", l.vlan_parent, 64);
  v("numa_node", l.numa_node, -1, 4096);
  v.opt("pcie", l.pcie, &sysfs::pcie_field);  // agents older than the PCIe inventory send none
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SocketLimits, rmem_max, wmem_max, tcp_rmem, tcp_wmem)

nlohmann::json to_json(const LinkInfo& l) {
  nlohmann::json j = JsonOut::encode(l);
  for (const char* k : {"speed_mbps", "shaped_mbps"}) {
    if (j[k] < 0) j[k] = nullptr;  // none
  }
  return j;
}

nlohmann::json to_json(const SocketLimits& s) {
  return s;
}

LinkInfo link_from_json(const nlohmann::json& j) {
  return JsonIn::decode<LinkInfo>(j, "link");
}

}  // namespace fabperf
