// Named counter readers (counters.hpp): the ethtool statistics ioctls, the root qdisc over
// rtnetlink, the MIB files and softnet_stat.
#include <fabperf/core/fd.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/sysinfo/counters.hpp>
#include "sysinfo/file_read.hpp"

#include <linux/ethtool.h>
#include <linux/gen_stats.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <algorithm>
#include <array>
#include <cstring>

namespace fabperf {
namespace {

bool ethtool_ioctl(int fd, const std::string& ifname, void* data) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  ifr.ifr_data = static_cast<char*>(data);
  return ::ioctl(fd, SIOCETHTOOL, &ifr) == 0;
}

}  // namespace

void sysfs::fill_from_ethtool(LinkInfo& l) {
  const UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return;
  ethtool_drvinfo info{};
  info.cmd = ETHTOOL_GDRVINFO;
  if (l.driver.empty() && ethtool_ioctl(s.get(), l.name, &info)) l.driver = info.driver;
  ethtool_cmd cmd{};
  cmd.cmd = ETHTOOL_GSET;
  if (ethtool_ioctl(s.get(), l.name, &cmd)) {
    const std::uint32_t sp = ethtool_cmd_speed(&cmd);
    if (l.speed_mbps < 0 && sp != 0 && sp != static_cast<std::uint32_t>(SPEED_UNKNOWN)) l.speed_mbps = sp;
    const char* duplex = cmd.duplex == DUPLEX_FULL ? "full" : cmd.duplex == DUPLEX_HALF ? "half" : nullptr;
    if (duplex && (l.duplex.empty() || l.duplex == "unknown")) l.duplex = duplex;
  }
}

std::optional<CounterValues> read_ethtool_stats(const std::string& ifname) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return std::nullopt;
  const UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return std::nullopt;
  // How many statistics: sset_info answers with one u32 per set bit of the mask, after the
  // header (a flexible array: the buffer is u64-aligned raw storage).
  std::array<std::uint64_t, (sizeof(ethtool_sset_info) + sizeof(std::uint32_t)) / 8 + 1> ibuf{};
  auto* info = reinterpret_cast<ethtool_sset_info*>(ibuf.data());
  info->cmd = ETHTOOL_GSSET_INFO;
  info->sset_mask = 1ULL << ETH_SS_STATS;
  if (!ethtool_ioctl(s.get(), ifname, info) || !(info->sset_mask & (1ULL << ETH_SS_STATS))) return std::nullopt;
  const std::uint32_t n = info->data[0];
  if (n == 0 || n > 65536) return std::nullopt;
  // The kernel fills as many entries as the driver has *now*; a driver that grew between the
  // calls (queues added) would write past a buffer sized for the old count, so both buffers get
  // room to spare and the answer's own count is checked against it.
  const std::uint32_t cap = n * 2 + 64;
  std::vector<std::uint64_t> sbuf((sizeof(ethtool_gstrings) + std::size_t{cap} * ETH_GSTRING_LEN) / 8 + 1);
  auto* strings = reinterpret_cast<ethtool_gstrings*>(sbuf.data());
  strings->cmd = ETHTOOL_GSTRINGS;
  strings->string_set = ETH_SS_STATS;
  strings->len = n;
  if (!ethtool_ioctl(s.get(), ifname, strings) || strings->len > cap) return std::nullopt;
  std::vector<std::uint64_t> vbuf(sizeof(ethtool_stats) / 8 + cap + 1);
  auto* stats = reinterpret_cast<ethtool_stats*>(vbuf.data());
  stats->cmd = ETHTOOL_GSTATS;
  stats->n_stats = n;
  if (!ethtool_ioctl(s.get(), ifname, stats) || stats->n_stats > cap) return std::nullopt;
  const std::uint32_t m = std::min(strings->len, stats->n_stats);
  CounterValues out;
  out.reserve(m);
  for (std::uint32_t i = 0; i < m; ++i) {
    const char* name = reinterpret_cast<const char*>(strings->data) + std::size_t{i} * ETH_GSTRING_LEN;
    out.emplace_back(std::string(name, strnlen(name, ETH_GSTRING_LEN)), stats->data[i]);
  }
  return out;
}

namespace {

// What the root qdisc of an interface says: its queue counters, its kind and, for a token bucket
// (tbf) or htb, its rate. One RTM_GETQDISC dump (and for htb one RTM_GETTCLASS dump).
struct RootQdisc {
  CounterValues counters;
  std::string kind;
  std::uint64_t rate_bytes_per_s{0};
};

// The T at buf[off] (netlink data is only 4-byte aligned).
template <typename T>
T load(const std::vector<char>& buf, std::size_t off) {
  T v{};
  std::memcpy(&v, buf.data() + off, sizeof v);
  return v;
}

// Calls f(type, offset, length) for each rtattr in buf[from, to).
template <typename F>
void each_attr(const std::vector<char>& buf, std::size_t from, std::size_t to, F&& f) {
  for (std::size_t a = from; a + sizeof(rtattr) <= to;) {
    const auto at = load<rtattr>(buf, a);
    if (at.rta_len < sizeof(rtattr) || a + at.rta_len > to) return;
    f(at.rta_type, a + RTA_LENGTH(0), at.rta_len - RTA_LENGTH(0));
    a += RTA_ALIGN(at.rta_len);
  }
}

// One rtnetlink dump of traffic control objects (RTM_GETQDISC, RTM_GETTCLASS) on one interface:
// f(tcmsg, offset of its attributes, end) for each. False when the kernel could not be asked.
template <typename F>
bool tc_dump(std::uint16_t type, unsigned ifindex, std::vector<char>& buf, F&& f) {
  const UniqueFd s(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!s.valid()) return false;
  timeval tv{0, 200'000};  // a dump of this host's qdiscs; never wait long for the kernel
  ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct {
    nlmsghdr nh;
    tcmsg tc;
  } req{};
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
  req.nh.nlmsg_type = type;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.nh.nlmsg_seq = 1;
  req.tc.tcm_family = AF_UNSPEC;
  req.tc.tcm_ifindex = static_cast<int>(ifindex);  // newer kernels filter on it; older dump all
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(s.get(), &req, req.nh.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    return false;
  for (;;) {
    const ssize_t len = ::recv(s.get(), buf.data(), buf.size(), 0);
    if (len <= 0) return true;
    std::size_t off = 0;
    while (off + sizeof(nlmsghdr) <= static_cast<std::size_t>(len)) {
      const auto nh = load<nlmsghdr>(buf, off);
      if (nh.nlmsg_len < sizeof(nlmsghdr) || off + nh.nlmsg_len > static_cast<std::size_t>(len)) return true;
      if (nh.nlmsg_type == NLMSG_DONE || nh.nlmsg_type == NLMSG_ERROR) return true;
      const std::size_t body = off + NLMSG_ALIGN(sizeof(nlmsghdr));
      const std::size_t end = off + nh.nlmsg_len;
      off += NLMSG_ALIGN(nh.nlmsg_len);
      // The answers are RTM_NEWQDISC / RTM_NEWTCLASS, two below their RTM_GET* requests.
      if (nh.nlmsg_type != type - 2 || body + sizeof(tcmsg) > end) continue;
      const auto tc = load<tcmsg>(buf, body);
      if (tc.tcm_ifindex == static_cast<int>(ifindex)) f(tc, body + NLMSG_ALIGN(sizeof(tcmsg)), end);
    }
  }
}

RootQdisc read_root_qdisc(const std::string& ifname) {
  RootQdisc out;
  const unsigned ifindex = if_nametoindex(ifname.c_str());
  if (ifindex == 0) return out;
  std::vector<char> buf(32768);
  bool found = false;
  std::uint64_t rate64 = 0;
  tc_dump(RTM_GETQDISC, ifindex, buf, [&](const tcmsg& tc, std::size_t from, std::size_t end) {
    if (tc.tcm_parent != TC_H_ROOT || found) return;
    found = true;
    each_attr(buf, from, end, [&](unsigned type, std::size_t at, std::size_t n) {
      if (type == TCA_KIND) {
        out.kind.assign(buf.data() + at, strnlen(buf.data() + at, n));
      } else if (type == TCA_OPTIONS) {  // tbf's: its rate (32-bit bytes/s, or the 64-bit one)
        each_attr(buf, at, at + n, [&](unsigned t, std::size_t o, std::size_t m) {
          if (t == TCA_TBF_PARMS && m >= sizeof(tc_tbf_qopt))
            out.rate_bytes_per_s = load<tc_tbf_qopt>(buf, o).rate.rate;
          else if (t == TCA_TBF_RATE64 && m >= sizeof rate64)
            rate64 = load<std::uint64_t>(buf, o);
        });
      } else if (type == TCA_STATS2) {  // nests TCA_STATS_QUEUE (struct gnet_stats_queue)
        each_attr(buf, at, at + n, [&](unsigned t, std::size_t o, std::size_t m) {
          if (t != TCA_STATS_QUEUE || m < sizeof(gnet_stats_queue)) return;
          const auto q = load<gnet_stats_queue>(buf, o);
          out.counters = {{"qdisc.drops", q.drops}, {"qdisc.overlimits", q.overlimits}, {"qdisc.requeues", q.requeues}};
        });
      }
    });
  });
  if (out.kind != "tbf") out.rate_bytes_per_s = 0;
  if (out.kind == "tbf" && rate64 > 0) out.rate_bytes_per_s = rate64;
  if (out.kind != "htb") return out;
  // htb keeps its rates on classes: no flow passes faster than the highest ceil of a top class.
  tc_dump(RTM_GETTCLASS, ifindex, buf, [&](const tcmsg& tc, std::size_t from, std::size_t end) {
    if (tc.tcm_parent != TC_H_ROOT) return;
    std::uint64_t ceil = 0;
    each_attr(buf, from, end, [&](unsigned type, std::size_t at, std::size_t n) {
      if (type != TCA_OPTIONS) return;
      each_attr(buf, at, at + n, [&](unsigned t, std::size_t o, std::size_t m) {
        if (t == TCA_HTB_PARMS && m >= sizeof(tc_htb_opt))
          ceil = std::max<std::uint64_t>(ceil, load<tc_htb_opt>(buf, o).ceil.rate);
        else if (t == TCA_HTB_CEIL64 && m >= sizeof(std::uint64_t))
          ceil = std::max(ceil, load<std::uint64_t>(buf, o));
      });
    });
    out.rate_bytes_per_s = std::max(out.rate_bytes_per_s, ceil);
  });
  return out;
}

}  // namespace

CounterValues read_qdisc_counters(const std::string& ifname) {
  return read_root_qdisc(ifname).counters;
}

std::int64_t read_shaped_mbps(const std::string& ifname) {
  const auto q = read_root_qdisc(ifname);
  if (q.rate_bytes_per_s == 0) return -1;
  return static_cast<std::int64_t>(q.rate_bytes_per_s * 8 / 1'000'000);
}

const CounterValues::value_type* find_counter(const CounterValues& in, std::size_t at, std::string_view name) {
  if (at < in.size() && in[at].first == name) return &in[at];
  const auto it = std::ranges::find(in, name, &CounterValues::value_type::first);
  return it == in.end() ? nullptr : &*it;
}

std::size_t counter_cells(const std::vector<CounterSample>& samples) {
  std::size_t n = 0;
  for (const auto& s : samples) n += s.values.size();
  return n;
}

CounterValues read_link_named_counters(const std::string& ifname) {
  CounterValues out = read_ethtool_stats(ifname).value_or(CounterValues{});
  for (auto& kv : read_qdisc_counters(ifname)) out.push_back(std::move(kv));
  if (ifname.find('/') == std::string::npos) {
    if (auto v = sysfs::read_u64("/sys/class/net/" + ifname + "/carrier_down_count"))
      out.emplace_back("if.carrier_down_count", *v);
  }
  return out;
}

CounterValues parse_proc_net_mib(std::string_view text) {
  CounterValues out;
  const auto lines = split_list(text, '\n');
  for (std::size_t i = 0; i + 1 < lines.size(); i += 2) {
    const auto names = sysfs::words(lines[i]), values = sysfs::words(lines[i + 1]);
    if (names.empty() || values.empty() || names[0] != values[0] || names[0].back() != ':') continue;
    const std::string section = names[0].substr(0, names[0].size() - 1);
    for (std::size_t k = 1; k < std::min(names.size(), values.size()); ++k) {
      // A negative value (Tcp.MaxConn -1) or a field that is not a number is not a counter.
      if (const auto v = sysfs::to_u64(values[k])) out.emplace_back(section + "." + names[k], *v);
    }
  }
  return out;
}

CounterValues parse_softnet_stat(std::string_view text) {
  std::uint64_t dropped = 0, squeezed = 0;
  bool any = false;
  for (const auto& line : split_list(text, '\n')) {
    const auto w = sysfs::words(line);  // processed, dropped, time squeezed, ...
    if (w.size() < 3) continue;
    try {
      dropped += std::stoull(w[1], nullptr, 16);
      squeezed += std::stoull(w[2], nullptr, 16);
      any = true;
    } catch (...) {
      continue;
    }
  }
  if (!any) return {};
  return {{"softnet.dropped", dropped}, {"softnet.time_squeeze", squeezed}};
}

CounterValues read_host_net_counters(const std::string& root) {
  static const auto kKept = sysfs::words(
      "Tcp.RetransSegs Tcp.InErrs Tcp.OutRsts TcpExt.TCPTimeouts TcpExt.TCPLostRetransmit TcpExt.TCPFastRetrans "
      "TcpExt.TCPSlowStartRetrans TcpExt.TCPSpuriousRTOs TcpExt.TCPDeliveredCE TcpExt.ListenDrops "
      "TcpExt.ListenOverflows TcpExt.TCPBacklogDrop TcpExt.TCPRcvQDrop TcpExt.TCPOFODrop TcpExt.TCPZeroWindowDrop "
      "IpExt.InCEPkts IpExt.InECT0Pkts IpExt.InECT1Pkts Udp.InErrors Udp.RcvbufErrors Udp.SndbufErrors");
  CounterValues all = parse_proc_net_mib(sysfs::read_all(root + "/proc/net/snmp"));
  for (auto& kv : parse_proc_net_mib(sysfs::read_all(root + "/proc/net/netstat"))) all.push_back(std::move(kv));
  CounterValues out;
  for (const auto& name : kKept) {
    const auto it = std::find_if(all.begin(), all.end(), [&](const auto& kv) { return kv.first == name; });
    if (it != all.end()) out.push_back(*it);
  }
  for (auto& kv : parse_softnet_stat(sysfs::read_all(root + "/proc/net/softnet_stat"))) out.push_back(std::move(kv));
  return out;
}

}  // namespace fabperf
