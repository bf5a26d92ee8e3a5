// /sys/class/infiniband readers. Layout (drivers/infiniband/core/sysfs.c):
//   DEV/{node_type,fw_ver,node_guid,hca_type,board_id,parent}
//   DEV/ports/N/{state,phys_state,link_layer,rate,lid,sm_lid}
//   DEV/ports/N/gids/I, gid_attrs/types/I, gid_attrs/ndevs/I (reading an empty entry fails)
//   DEV/ports/N/counters/* (PMA counters; only drivers with a MAD interface: not Soft-RoCE)
//   DEV/ports/N/hw_counters/* (driver counters: rxe's sent_pkts, mlx5's out_of_sequence, ...)
// sysfs has no MTU file: the active MTU comes from ibv_query_port where this build has verbs.
#include <fabperf/core/build_config.hpp>
#include <fabperf/core/fields.hpp>
#include <fabperf/sysinfo/rdma_sysfs.hpp>
#include "sysinfo/file_read.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>

namespace fs = std::filesystem;

namespace fabperf {
namespace {

using sysfs::read_line;
using sysfs::read_u64;
using sysfs::sorted_entries;

// sysfs LIDs print as hex ("0x1a"); an absent file reads as "", which strtoul takes as 0.
std::uint32_t read_hex(const fs::path& p) {
  return static_cast<std::uint32_t>(std::strtoul(read_line(p).c_str(), nullptr, 0));
}

// "fe80:0000:0000:0000:5054:00ff:fe12:3456" -> "fe80::5054:ff:fe12:3456"; "" for the zero GID.
std::string gid_text(const std::string& raw) {
  in6_addr a{};
  if (inet_pton(AF_INET6, raw.c_str(), &a) != 1) return raw;
  static const in6_addr zero{};
  if (std::equal(std::begin(a.s6_addr), std::end(a.s6_addr), std::begin(zero.s6_addr))) return "";
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, &a, buf, sizeof buf);
  return buf;
}

RdmaPort read_port(const fs::path& base, int number, const std::string& root) {
  RdmaPort p;
  p.port = number;
  std::tie(p.state_num, p.state) = parse_numbered_state(read_line(base / "state"));
  std::tie(p.phys_state_num, p.phys_state) = parse_numbered_state(read_line(base / "phys_state"));
  p.link_layer = read_line(base / "link_layer");
  p.rate = read_line(base / "rate");
  const RdmaRate r = parse_rdma_rate(p.rate);
  p.rate_gbps = r.gbps;
  p.width = r.width;
  p.speed = r.speed;
  p.lid = read_hex(base / "lid");
  p.sm_lid = read_hex(base / "sm_lid");
  const bool ib = p.link_layer == "InfiniBand";
  for (const auto& name : sorted_entries(base / "gids")) {
    const auto idx = sysfs::to_u64(name);
    if (!idx) continue;
    ++p.gid_table_len;
    const std::string g = gid_text(read_line(base / "gids" / name));
    if (g.empty()) continue;
    const std::string type = read_line(base / "gid_attrs" / "types" / name);
    p.gids.push_back({static_cast<int>(*idx), g,
                      type == "RoCE v2" ? type
                      : ib              ? "IB"
                      : type.empty()    ? ""
                                        : "RoCE v1",
                      read_line(base / "gid_attrs" / "ndevs" / name)});
  }
  std::sort(p.gids.begin(), p.gids.end(), [](const RdmaGid& a, const RdmaGid& b) { return a.index < b.index; });
  if (!ib) {
    const auto g = std::find_if(p.gids.begin(), p.gids.end(), [](const RdmaGid& x) { return !x.netdev.empty(); });
    if (g != p.gids.end()) p.netdev = g->netdev;
    // No GID yet (interface without addresses): the device's own netdev link, or rxe's parent.
    if (p.netdev.empty()) p.netdev = read_line(base.parent_path().parent_path() / "parent");
    if (p.netdev.empty()) {
      const auto nets = sorted_entries(base.parent_path().parent_path() / "device" / "net");
      if (!nets.empty()) p.netdev = nets.front();
    }
    if (!p.netdev.empty()) {  // an absent mtu file reads as 0: no MTU fits
      p.active_mtu =
          roce_mtu_for_netdev_mtu(static_cast<int>(read_u64(root + "/sys/class/net/" + p.netdev + "/mtu").value_or(0)));
      if (p.active_mtu > 0) p.mtu_source = "netdev";
    }
  }
  return p;
}

}  // namespace

std::pair<int, std::string> parse_numbered_state(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return {0, text};
  return {sysfs::to_int(text.substr(0, colon), 0), sysfs::trim(std::string_view(text).substr(colon + 1))};
}

RdmaRate parse_rdma_rate(const std::string& text) {
  // "100 Gb/sec (4X EDR)": the rate and its unit, then the width and speed in parentheses.
  const auto w = sysfs::words(text, " ()");
  char* end = nullptr;
  const double gbps = w.size() >= 2 ? std::strtod(w[0].c_str(), &end) : 0;
  if (w.size() < 2 || end == w[0].c_str()) return RdmaRate{};
  const std::size_t n = text.find('(') == std::string::npos ? 2 : w.size();  // no parentheses: no width or speed
  return {gbps, n > 2 ? w[2] : "", n > 3 ? w[3] : ""};
}

int roce_mtu_for_netdev_mtu(int netdev_mtu) {
  const int room = netdev_mtu - 96;             // GRH/IP 40 + UDP 8 + BTH 12 + XRC 4 + atomic 28 + ICRC 4
  for (int mtu = 4096; mtu >= 256; mtu /= 2) {  // the IB MTUs
    if (mtu <= room) return mtu;
  }
  return 0;
}

std::optional<RdmaDevice> read_rdma_device(const std::string& name, const std::string& root) {
  const fs::path base = fs::path(root + "/sys/class/infiniband") / name;
  std::error_code ec;
  if (name.empty() || name.find('/') != std::string::npos || !fs::exists(base, ec)) return std::nullopt;
  RdmaDevice d;
  d.name = name;
  d.node_type = parse_numbered_state(read_line(base / "node_type")).second;
  d.fw_ver = read_line(base / "fw_ver");
  d.node_guid = read_line(base / "node_guid");
  d.hca_type = read_line(base / "hca_type");
  d.board_id = read_line(base / "board_id");
  d.parent = read_line(base / "parent");
  if (fs::exists(base / "device", ec)) d.pcie = read_pcie("/sys/class/infiniband/" + name + "/device", root);
  for (const auto& pn : sorted_entries(base / "ports")) {
    if (const auto n = sysfs::to_u64(pn); n && *n >= 1 && *n <= 255)
      d.ports.push_back(read_port(base / "ports" / pn, static_cast<int>(*n), root));
  }
  std::sort(d.ports.begin(), d.ports.end(), [](const RdmaPort& a, const RdmaPort& b) { return a.port < b.port; });
  return d;
}

std::vector<RdmaDevice> read_rdma_devices(const std::string& root) {
  std::vector<RdmaDevice> out;
  for (const auto& n : sorted_entries(fs::path(root + "/sys/class/infiniband"))) {
    if (auto d = read_rdma_device(n, root)) out.push_back(std::move(*d));
  }
  return out;
}

RdmaPortCounters read_rdma_port_counters(const std::string& device, int port, const std::string& root) {
  RdmaPortCounters c;
  const fs::path base = fs::path(root + "/sys/class/infiniband") / device / "ports" / std::to_string(port);
  std::error_code ec;
  if (!fs::exists(base / "state", ec)) return c;
  c.present = true;
  for (const char* group : {"counters", "hw_counters"}) {
    for (const auto& name : sorted_entries(base / group)) {
      const std::string key = std::string(group) + "/" + name;
      if (is_rdma_counter_setting(key)) continue;
      if (fs::is_directory(base / group / name, ec)) continue;
      if (auto v = read_u64(base / group / name)) {
        c.values.emplace_back(key, *v);
      } else {
        c.unreadable.push_back(key);
      }
    }
  }
  return c;
}

#if !FABPERF_HAVE_RDMA
// Without rdma-core there is nothing to ask but sysfs (rdma_verbs.cpp otherwise).
std::vector<RdmaDevice> read_local_rdma_devices() {
  return read_rdma_devices("");
}
#endif

bool is_rdma_counter_setting(const std::string& key) {
  return key == "hw_counters/lifespan";
}

bool is_rdma_error_counter(const std::string& key) {
  const auto slash = key.find('/');
  const std::string n = slash == std::string::npos ? key : key.substr(slash + 1);
  // Congestion notifications and plain traffic counts are not errors, whatever their names hold.
  for (const char* ok : {"cnp", "ecn", "np_", "rp_", "_pkts", "_packets", "_data", "rdma_sends", "rdma_recvs",
                         "xmit_wait", "unicast", "multicast", "ack_deferred"}) {
    if (n.find(ok) != std::string::npos) return false;
  }
  for (const char* bad : {"err",       "discard",   "drop",      "retry",   "rnr",     "out_of_seq", "out_of_buffer",
                          "duplicate", "downed",    "symbol",    "overrun", "timeout", "retrans",    "nak",
                          "recovery",  "integrity", "violation", "bad_",    "invalid", "restart"}) {
    if (n.find(bad) != std::string::npos) return true;
  }
  return false;
}

// The JSON keys are the field names. Tolerant of missing fields (an agent of another version may
// send fewer); strict on types.
static void fields(auto& v, RdmaGid& g) {
  v("index", g.index, 0, 1 << 20);
  v("gid", g.gid, 64);
  v.opt("type", g.type, 16);
  v.opt("netdev", g.netdev, 64);
}

static void fields(auto& v, RdmaPort& p) {
  v("port", p.port, 1, 255);
  v.opt("state", p.state, 32);
  v.opt("state_num", p.state_num, 0, 255);
  v.opt("phys_state", p.phys_state, 32);
  v.opt("phys_state_num", p.phys_state_num, 0, 255);
  v.opt("link_layer", p.link_layer, 32);
  v.opt("rate", p.rate, 64);
  v.opt("rate_gbps", p.rate_gbps, 0, 1e6);
  v.opt("width", p.width, 16);
  v.opt("speed", p.speed, 16);
  v.opt("active_mtu", p.active_mtu, 0, 1 << 20);
  v.opt("mtu_source", p.mtu_source, 16);
  v.opt("lid", p.lid, 0, UINT32_MAX);
  v.opt("sm_lid", p.sm_lid, 0, UINT32_MAX);
  v.opt("netdev", p.netdev, 64);
  v.opt("gid_table_len", p.gid_table_len, 0, 1 << 20);
  v.opt("gids", p.gids, 4096);
}

static void fields(auto& v, RdmaDevice& d) {
  v("name", d.name, 64);
  v.opt("node_type", d.node_type, 32);
  v.opt("fw_ver", d.fw_ver, 64);
  v.opt("node_guid", d.node_guid, 64);
  v.opt("hca_type", d.hca_type, 64);
  v.opt("board_id", d.board_id, 64);
  v.opt("parent", d.parent, 64);
  v.opt("ports", d.ports, 256, &rdma_port_from_json);
  v.opt("pcie", d.pcie, &sysfs::pcie_field);
}

nlohmann::json to_json(const RdmaPort& p) {
  return JsonOut::encode(p);
}
nlohmann::json to_json(const RdmaDevice& d) {
  return JsonOut::encode(d);
}
RdmaPort rdma_port_from_json(const nlohmann::json& j) {
  return JsonIn::decode<RdmaPort>(j, "rdma.port");
}
RdmaDevice rdma_device_from_json(const nlohmann::json& j) {
  return JsonIn::decode<RdmaDevice>(j, "rdma");
}

}  // namespace fabperf
