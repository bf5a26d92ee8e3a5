// PCIe link, NUMA and interrupt placement readers. Layout (drivers/pci/pci-sysfs.c):
//   /sys/devices/pciDDDD:BB/<root port>/[<switch ports>/...]/<function>/
//     {current,max}_link_{speed,width}  "8.0 GT/s PCIe", "8" (speed "Unknown" when not trained)
//     numa_node, local_cpulist, msi_irqs/<N>, irq, config, physfn (an SR-IOV VF), net/<if>,
//     infiniband/<dev>/ports/<n>/{rate,link_layer}
//   /proc/interrupts, /proc/irq/N/{effective_affinity_list,smp_affinity_list}
// The function's parent directory is the port at the other end of its link (the slot); every
// function under that port shares the link. Ancestors further up are switch ports and root ports:
// the narrowest of their links bounds the device too (the kernel's pcie_bandwidth_available()).
#include <fabperf/core/fields.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/sysinfo/pcie.hpp>
#include <fabperf/sysinfo/rdma_sysfs.hpp>
#include "sysinfo/file_read.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

namespace fs = std::filesystem;

namespace fabperf {
namespace {

using sysfs::read_line;
using sysfs::sorted_entries;

bool is_pci_address(const std::string& name) {
  static const std::regex re("^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]$");
  return std::regex_match(name, re);
}

// "8.0 GT/s PCIe", "8 GT/s", "2.5 GT/s": the leading number; 0 for "Unknown".
double parse_speed(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() && v > 0 && v < 1000 ? v : 0.0;
}

int parse_width(std::string text) {
  if (!text.empty() && (text.front() == 'x' || text.front() == 'X')) text.erase(text.begin());
  const int v = sysfs::to_int(text, 0);
  return v > 0 && v <= 64 ? v : 0;
}

PcieLinkState read_state(const fs::path& dir, const char* which) {
  return {parse_speed(read_line(dir / (std::string(which) + "_link_speed"))),
          parse_width(read_line(dir / (std::string(which) + "_link_width")))};
}

bool has_link_files(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / "current_link_speed", ec);
}

std::optional<std::set<int>> cpu_set(const std::string& list) {
  const auto v = sysfs::to_cpus(list);
  return v.empty() ? std::nullopt : std::optional(std::set<int>(v.begin(), v.end()));
}

// Max_Payload_Size from the PCI Express capability's Device Control register. Unprivileged
// readers get only the first 64 bytes of config space, where that capability rarely is: 0.
int read_max_payload(const fs::path& config) {
  const std::string raw = sysfs::read_all(config);
  const std::vector<unsigned char> c(raw.begin(), raw.end());
  if (c.size() < 0x40 || !(c[0x06] & 0x10)) return 0;  // Status: capabilities list present
  std::size_t pos = c[0x34] & 0xfc;
  for (int hops = 0; hops < 48 && pos >= 0x40 && pos + 10 <= c.size(); ++hops) {
    if (c[pos] == 0x10) {
      const unsigned devctl = c[pos + 8] | (c[pos + 9] << 8);
      const int mps = 128 << ((devctl >> 5) & 7);
      return mps <= 4096 ? mps : 0;
    }
    pos = c[pos + 1] & 0xfc;
  }
  return 0;
}

void add_ports(const fs::path& fn, std::vector<PciePort>& out) {
  // Interfaces sit in the function's net/, or in its virtio device's (virtioN/net/).
  std::vector<fs::path> nets{fn / "net"};
  for (const auto& e : sorted_entries(fn)) {
    if (e.rfind("virtio", 0) == 0) nets.push_back(fn / e / "net");
  }
  for (const auto& dir : nets) {
    for (const auto& n : sorted_entries(dir)) {
      // IPoIB rides an InfiniBand port counted below (ARPHRD_INFINIBAND).
      if (read_line(dir / n / "type") == "32") continue;
      out.push_back({n, sysfs::read_speed(dir / n / "speed")});
    }
  }
  // InfiniBand ports have no interface; RoCE ports are counted by theirs.
  for (const auto& d : sorted_entries(fn / "infiniband")) {
    for (const auto& p : sorted_entries(fn / "infiniband" / d / "ports")) {
      const fs::path base = fn / "infiniband" / d / "ports" / p;
      if (read_line(base / "link_layer") != "InfiniBand") continue;
      const double g = parse_rdma_rate(read_line(base / "rate")).gbps;
      out.push_back({fmt::format("{}:{}", d, p), g > 0 ? static_cast<std::int64_t>(std::llround(g * 1000)) : -1});
    }
  }
}

IrqPlacement read_irqs(const fs::path& fn, const std::string& root) {
  IrqPlacement p;
  p.local_cpus = read_line(fn / "local_cpulist");
  std::vector<std::uint64_t> irqs;
  for (const auto& n : sorted_entries(fn / "msi_irqs")) {
    if (const auto v = sysfs::to_u64(n); v && *v > 0 && *v <= INT_MAX) irqs.push_back(*v);
  }
  if (irqs.empty()) {
    if (const int legacy = sysfs::read_int(fn / "irq", 0); legacy > 0)
      irqs.push_back(static_cast<std::uint64_t>(legacy));
  }
  const auto local = cpu_set(p.local_cpus);
  // /proc/interrupts: the CPU columns of the header, then per IRQ number its per-CPU counts.
  const auto lines = split_list(sysfs::read_all(root + "/proc/interrupts"), '\n');
  std::vector<int> cpus;
  for (const auto& c : sysfs::words(lines.front())) {
    if (c.rfind("CPU", 0) == 0) cpus.push_back(std::atoi(c.c_str() + 3));
  }
  if (local && !cpus.empty()) {
    p.all_cpus_local = std::all_of(cpus.begin(), cpus.end(), [&](int c) { return local->count(c) > 0; });
  }
  for (std::size_t li = 1; li < lines.size(); ++li) {
    const auto w = sysfs::words(lines[li]);  // "N:", then the count on each CPU
    if (w.empty() || w[0].back() != ':') continue;
    const auto irq = sysfs::to_u64(w[0].substr(0, w[0].size() - 1));
    if (!irq || std::find(irqs.begin(), irqs.end(), *irq) == irqs.end()) continue;  // NMI:, LOC:, others' IRQs
    ++p.irqs;
    for (std::size_t i = 0; i < cpus.size() && i + 1 < w.size(); ++i) {
      const auto x = sysfs::to_u64(w[i + 1]);
      if (!x) break;
      p.served += *x;
      if (local && local->count(cpus[i])) p.served_local += *x;
    }
    if (!local) continue;
    // smp_affinity_list is where the interrupt may go, effective_affinity_list where it goes
    // now; a changed affinity takes effect at the IRQ's next interrupt, so either set holding no
    // local CPU sends it off the node.
    const std::string base = root + "/proc/irq/" + std::to_string(*irq);
    const auto off_node = [&](const char* f) {
      const auto a = cpu_set(read_line(base + f));
      return a && std::none_of(a->begin(), a->end(), [&](int c) { return local->count(c) > 0; });
    };
    if (off_node("/smp_affinity_list") || off_node("/effective_affinity_list")) ++p.remote_affinity;
  }
  return p;
}

// "x4 of x8, Gen3", "Gen2 of Gen3, x8", "x4 Gen2 of x8 Gen3".
std::string below_text(const PcieLinkState& cur, const PcieLinkState& max) {
  const bool narrow = cur.width < max.width;
  const bool slow = cur.gts + 1e-9 < max.gts;
  const int gc = pcie_generation(cur.gts), gm = pcie_generation(max.gts);
  if (narrow && slow) return fmt::format("x{} Gen{} of x{} Gen{}", cur.width, gc, max.width, gm);
  if (narrow) return fmt::format("x{} of x{}, Gen{}", cur.width, max.width, gc);
  return fmt::format("Gen{} of Gen{}, x{}", gc, gm, cur.width);
}

}  // namespace

double pcie_line_code(double gts) {
  if (gts <= 0) return 0;
  if (gts <= 5.0 + 1e-9) return 8.0 / 10.0;
  if (gts < 64.0 - 1e-9) return 128.0 / 130.0;
  return 236.0 / 256.0;
}

int pcie_generation(double gts) {
  static const double rates[] = {2.5, 5, 8, 16, 32, 64};
  for (int i = 0; i < 6; ++i) {
    if (std::fabs(gts - rates[i]) < 0.05) return i + 1;
  }
  return 0;
}

double pcie_raw_gbps(const PcieLinkState& s) {
  return s.width > 0 ? s.gts * s.width * pcie_line_code(s.gts) : 0.0;
}

double pcie_usable_gbps(const PcieLinkState& s, int max_payload) {
  const double mps = max_payload > 0 ? max_payload : kPcieAssumedPayload;
  return pcie_raw_gbps(s) * mps / (mps + kPcieTlpOverhead);
}

PcieLinkState pcie_effective_link(const PcieInfo& p) {
  if (!p.limit_at.empty() && pcie_raw_gbps(p.limit) > 0 && pcie_raw_gbps(p.limit) < pcie_raw_gbps(p.link))
    return p.limit;
  return p.link;
}

double pcie_ceiling_gbps(const PcieInfo& p) {
  return pcie_usable_gbps(pcie_effective_link(p), p.max_payload);
}

std::int64_t pcie_ports_mbps(const PcieInfo& p) {
  std::int64_t s = 0;
  for (const auto& x : p.ports) s += x.speed_mbps > 0 ? x.speed_mbps : 0;
  return s;
}

std::string pcie_link_text(const PcieLinkState& s) {
  if (s.width <= 0 || s.gts <= 0) return "?";
  const int g = pcie_generation(s.gts);
  return g > 0 ? fmt::format("x{} Gen{} ({:g} GT/s)", s.width, g, s.gts) : fmt::format("x{} {:g} GT/s", s.width, s.gts);
}

std::string pcie_ports_text(const PcieInfo& p) {
  std::vector<std::string> known;  // Gbit/s
  for (const auto& x : p.ports) {
    if (x.speed_mbps > 0) known.push_back(fmt::format("{:g}", static_cast<double>(x.speed_mbps) / 1000.0));
  }
  if (known.empty()) return "";
  if (std::ranges::count(known, known.front()) == std::ssize(known))
    return fmt::format("{} x {} Gbit/s", known.size(), known.front());
  return fmt::format("{} Gbit/s", fmt::join(known, "+"));
}

std::string pcie_link_key(const PcieInfo& p) {
  return p.port.empty() ? p.address : p.port;
}

std::vector<LinkFinding> pcie_link_findings(const PcieInfo& p, const std::string& who) {
  std::vector<LinkFinding> out;
  const double ceiling = pcie_ceiling_gbps(p);
  const std::int64_t ports = pcie_ports_mbps(p);
  const std::string ports_text = pcie_ports_text(p);
  const std::string limited = p.limit_at.empty() || pcie_effective_link(p) == p.link
                                  ? ""
                                  : fmt::format(", limited to {} at {}", pcie_link_text(p.limit), p.limit_at);
  const bool below = p.link.width > 0 && p.max.width > 0 && p.link.gts > 0 && p.max.gts > 0 &&
                     (p.link.width < p.max.width || p.link.gts + 1e-9 < p.max.gts);
  if (below) {
    const bool slot_short = p.port_max.width > 0 && p.port_max.gts > 0 &&
                            (p.port_max.width < p.max.width || p.port_max.gts + 1e-9 < p.max.gts);
    out.push_back(
        {fmt::format("{}: PCIe {}: {:.1f} Gbit/s usable{} ({}{})", who, below_text(p.link, p.max), ceiling,
                     ports_text.empty() ? "" : " for " + ports_text + " of ports", p.address, limited),
         slot_short
             ? fmt::format("the slot's port {} supports only {}: move the card to a slot of {}", p.port,
                           pcie_link_text(p.port_max), pcie_link_text(p.max))
             : fmt::format("both ends support {}: reseat the card, check the riser and the slot's link settings in "
                           "the firmware (lspci -vv -s {}: LnkCap vs LnkSta)",
                           pcie_link_text(p.max), p.address),
         "error"});
  } else if (ports > 0 && ceiling > 0 && ceiling * 1000.0 < static_cast<double>(ports)) {
    out.push_back({fmt::format("{}: PCIe {} ({}{}): {:.1f} Gbit/s usable for {} of ports ({:.1f} Gbit/s)", who,
                               pcie_link_text(pcie_effective_link(p)), p.address, limited, ceiling, ports_text,
                               static_cast<double>(ports) / 1000.0),
                   fmt::format("together these ports cannot move more than {:.1f} Gbit/s each way: judge them one at a "
                               "time, or use a wider or faster slot (and card)",
                               ceiling),
                   "warning"});
  }
  return out;
}

std::vector<LinkFinding> pcie_irq_findings(const PcieInfo& p, const std::string& who) {
  std::vector<LinkFinding> out;
  const auto& q = p.irq;
  if (p.numa_node >= 0 && !q.local_cpus.empty() && !q.all_cpus_local && q.irqs > 0) {
    constexpr std::uint64_t kMinServed = 100;  // fewer interrupts than this say nothing yet
    std::string what;
    if (q.served >= kMinServed && 2 * q.served_local < q.served) {
      what = fmt::format(
          "{}: {:.0f}% of the interrupts of its {} IRQs were served by CPUs outside NUMA node {} (local "
          "CPUs {})",
          who, 100.0 * static_cast<double>(q.served - q.served_local) / static_cast<double>(q.served), q.irqs,
          p.numa_node, q.local_cpus);
    } else if (q.served < kMinServed && 2 * q.remote_affinity > q.irqs) {
      what = fmt::format("{}: {} of its {} IRQs are set to CPUs outside NUMA node {} (local CPUs {})", who,
                         q.remote_affinity, q.irqs, p.numa_node, q.local_cpus);
    }
    if (!what.empty()) {
      out.push_back(
          {what,
           fmt::format("move them to the node's CPUs: for N in $(ls /sys/bus/pci/devices/{}/msi_irqs); do echo {} "
                       "> /proc/irq/$N/smp_affinity_list; done (or irqbalance), and keep the test's threads "
                       "there (--cpus {})",
                       p.address, q.local_cpus, q.local_cpus),
           "warning"});
    }
  }
  return out;
}

std::optional<PcieInfo> read_pcie(const std::string& device, const std::string& root) {
  std::error_code ec;
  fs::path dir = fs::canonical(root + device, ec);
  if (ec) return std::nullopt;
  const fs::path top = fs::canonical(root.empty() ? "/" : root, ec);
  if (ec) return std::nullopt;
  // A captured tree's links must stay inside it.
  const auto rel = dir.lexically_relative(top);
  if (rel.empty() || *rel.begin() == "..") return std::nullopt;
  // A virtio interface's device is the virtio device; the PCI function is its parent. Nothing
  // else is climbed: a USB NIC's ancestors lead to its host controller, not to its own link.
  if (dir.filename().string().rfind("virtio", 0) == 0) dir = dir.parent_path();
  if (!is_pci_address(dir.filename().string())) return std::nullopt;
  PcieInfo p;
  p.address = dir.filename().string();
  p.link = read_state(dir, "current");
  p.max = read_state(dir, "max");
  p.numa_node = std::max(-1, sysfs::read_int(dir / "numa_node", -1));
  p.max_payload = read_max_payload(dir / "config");
  const fs::path parent = dir.parent_path();
  const bool has_port = is_pci_address(parent.filename().string());
  if (has_port) {
    p.port = parent.filename().string();
    if (has_link_files(parent)) p.port_max = read_state(parent, "max");
    // Every function under the port shares the link; a VF's ports are its PF's.
    for (const auto& f : sorted_entries(parent)) {
      if (!is_pci_address(f) || fs::exists(parent / f / "physfn", ec)) continue;
      add_ports(parent / f, p.ports);
    }
    // Links further up (a switch's uplink) bound the device too.
    const double own = pcie_raw_gbps(p.link);
    for (fs::path up = parent.parent_path(); is_pci_address(up.filename().string()); up = up.parent_path()) {
      if (!has_link_files(up)) continue;
      const PcieLinkState s = read_state(up, "current");
      const double bw = pcie_raw_gbps(s);
      if (bw > 0 && own > 0 && bw < own && (p.limit_at.empty() || bw < pcie_raw_gbps(p.limit))) {
        p.limit_at = up.filename().string();
        p.limit = s;
      }
    }
  } else {
    add_ports(dir, p.ports);
  }
  p.irq = read_irqs(dir, root);
  return p;
}

// ---- JSON: the keys are the field names, with the derived figures beside them ---------------

// null when unknown; the generation is derived, and not read back.
static nlohmann::json to_json(const PcieLinkState& s) {
  if (s.width <= 0 || s.gts <= 0) return nullptr;
  return {{"gts", s.gts}, {"width", s.width}, {"generation", pcie_generation(s.gts)}};
}
static PcieLinkState pcie_state_field(const Fields& f, const char* name) {
  if (f.get(name).is_null()) return {};
  const Fields g(f.get(name), f.ctx(name));
  return {g.num("gts", 0, 1000), static_cast<int>(g.u64("width", 0, 64))};
}

static void fields(auto& v, PciePort& x) {
  v("name", x.name, 64);
  v.opt("speed_mbps", x.speed_mbps, &sysfs::mbps_field);
}

static void fields(auto& v, IrqPlacement& q) {
  v("irqs", q.irqs, 0, 1 << 20);
  v("served", q.served, 0, UINT64_MAX);
  v("served_local", q.served_local, 0, UINT64_MAX);
  v("remote_affinity", q.remote_affinity, 0, 1 << 20);
  v("local_cpus", q.local_cpus, 4096);
  v("all_cpus_local", q.all_cpus_local);
}

static IrqPlacement pcie_irq_field(const nlohmann::json& j) {
  return JsonIn::decode<IrqPlacement>(j, "pcie.irq");
}

// Older agents send fewer fields: only the address is required.
static void fields(auto& v, PcieInfo& p) {
  v("address", p.address, 64);
  v.opt("port", p.port, 64);
  v.opt("link", p.link, &pcie_state_field);
  v.opt("max", p.max, &pcie_state_field);
  v.opt("port_max", p.port_max, &pcie_state_field);
  v.opt("limit_at", p.limit_at, 64);
  v.opt("limit", p.limit, &pcie_state_field);
  v.opt("max_payload", p.max_payload, 0, 4096);
  v.opt("numa_node", p.numa_node, -1, 4096);
  v.opt("ports", p.ports, 256);
  v.opt("irq", p.irq, &pcie_irq_field);
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LinkFinding, level, what, fix)

nlohmann::json to_json(const PcieInfo& p) {
  nlohmann::json j = JsonOut::encode(p);
  for (auto& x : j["ports"]) {
    if (x["speed_mbps"] <= 0) x["speed_mbps"] = nullptr;  // unknown
  }
  std::string who;
  for (const auto& x : p.ports) who += (who.empty() ? "" : "+") + x.name;
  // The link's findings name every port on it; the interrupts are this function's own.
  auto findings = pcie_link_findings(p, who.empty() ? p.address : who);
  for (auto& f : pcie_irq_findings(p, p.address)) findings.push_back(std::move(f));
  j["ports_speed_mbps"] = pcie_ports_mbps(p);
  j["raw_gbps"] = pcie_raw_gbps(pcie_effective_link(p));
  j["usable_gbps"] = pcie_ceiling_gbps(p);
  j["findings"] = findings;
  return j;
}

PcieInfo pcie_from_json(const nlohmann::json& j) {
  return JsonIn::decode<PcieInfo>(j, "pcie");
}

}  // namespace fabperf
