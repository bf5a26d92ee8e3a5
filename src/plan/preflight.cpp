// Pre-flight: what a short all-to-all probe test says about the fabric before hours of testing.
// Every finding names the node (or pair, or link) and the fix.
#include <fabperf/coordinator/coordinator.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/core/stats.hpp>
#include <fabperf/core/units.hpp>
#include <fabperf/plan/plan.hpp>
#include <fabperf/plan/plan_run.hpp>
#include <fabperf/sysinfo/bonding.hpp>
#include <fabperf/sysinfo/pcie.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <ostream>
#include <set>

namespace fabperf::plan {
namespace {

// IPv4 + TCP headers and the timestamp option: MSS = MTU - 52 on Linux by default.
constexpr int kTcpIpOverhead = 52;
// Room for IPv6 headers (20 more) and other options before an MSS counts as too small.
constexpr int kMssSlack = 40;

// One value across the fabric: `odd` names each link whose value differs from the one most links
// share (a tie: the first in text order); when none does, `ok` says so.
template <typename V, typename Odd, typename Ok>
void one_value(const std::map<std::string, V>& by_link, std::vector<Finding>& out, Odd odd, Ok ok) {
  std::map<std::string, int> counts;
  for (const auto& [sub, v] : by_link) ++counts[std::to_string(v)];
  if (counts.empty()) return;
  const std::string common =
      std::ranges::max_element(counts, {}, &std::map<std::string, int>::value_type::second)->first;
  const std::size_t before = out.size();
  for (const auto& [sub, v] : by_link) {
    if (std::to_string(v) != common) out.push_back(odd(sub, v, common));
  }
  if (out.size() == before) out.push_back({"ok", "", ok(common), ""});
}

// What the links say beyond their own findings: each node's smallest test MTU (for the MSS check)
// and the negotiated speeds (for the speed check, which follows it).
struct LinkFacts {
  std::map<std::uint32_t, int> min_mtu;  // per node index, over its test links
  std::map<std::string, std::int64_t> link_speed;
  std::vector<std::string> unknown_speed;
};

LinkFacts link_findings(const Report& report, const std::map<std::string, std::string>& names,
                        std::vector<Finding>& out) {
  // MTU per test interface: one value across the fabric.
  LinkFacts f;
  std::map<std::string, int> node_mtu;        // "n1/eth0" -> mtu
  std::map<std::string, double> probe_share;  // node -> its probe rate / its links' nominal rate
  for (const auto& n : report.nodes) {
    double nominal_mb = 0;  // stays 0 when a link's rate is unknown
    bool known = !n.links.empty();
    for (const auto& l : n.links) {
      const std::string sub = label_of(names, n.name) + "/" + l.name;
      // A shaper on the host holds the link below what it negotiated: the fabric is not the limit.
      std::int64_t nominal = l.speed_mbps;
      if (l.shaped_mbps > 0 && (l.speed_mbps <= 0 || l.shaped_mbps < l.speed_mbps)) {
        nominal = l.shaped_mbps;
        out.push_back(
            {"warning", sub,
             fmt::format("a shaping root qdisc (tbf, htb) holds it to {} Mbit/s{}", l.shaped_mbps,
                         l.speed_mbps > 0 ? fmt::format(", below the negotiated {} Mb/s", l.speed_mbps) : ""),
             fmt::format("on {}: tc qdisc show dev {} (tc qdisc del dev {} root, unless it is meant to be there)",
                         label_of(names, n.name), l.name, l.name)});
      }
      // A bond's members are links of their own: the bond itself would count them twice.
      if (l.kind != "bond") {
        known = known && nominal > 0;
        nominal_mb += static_cast<double>(std::max<std::int64_t>(nominal, 0)) / 8.0;
      }
      node_mtu[sub] = l.mtu;
      auto& m = f.min_mtu[n.index];
      m = m == 0 ? l.mtu : std::min(m, l.mtu);
      if (l.speed_mbps > 0) {
        f.link_speed[sub] = l.speed_mbps;
      } else {
        f.unknown_speed.push_back(sub);
      }
    }
    if (known && nominal_mb > 0)
      probe_share[label_of(names, n.name)] = std::max(n.tx_mb_per_s, n.rx_mb_per_s) / nominal_mb;
  }
  // The probe against each node's nominal rate. A short probe rarely fills a fast link, so only a
  // node far below the others (half the median share) is a warning: a host-side limit, a busy CPU,
  // a slow path.
  if (probe_share.size() >= 2) {
    std::vector<double> shares;
    std::string line;
    for (const auto& [who, sh] : probe_share) {
      shares.push_back(sh);
      line += fmt::format("{}{} {:.0f}%", line.empty() ? "" : ", ", who, 100 * sh);
    }
    const double med = stats::median(shares);
    out.push_back({"ok", "", "probe rate against each node's nominal link rate: " + line, ""});
    for (const auto& [who, sh] : probe_share) {
      if (sh < 0.5 * med) {
        out.push_back(
            {"warning", who,
             fmt::format("the probe moved {:.0f}% of its links' nominal rate, the other nodes a median {:.0f}%",
                         100 * sh, 100 * med),
             "look for a rate limit on the host (tc qdisc), a busy CPU or a slower path to it"});
      }
    }
  }
  one_value(
      node_mtu, out,
      [](const std::string& sub, int mtu, const std::string& common) -> Finding {
        const auto slash = sub.find('/');
        return {"error", sub, fmt::format("MTU {} while the other test interfaces use {}", mtu, common),
                fmt::format("on {}: ip link set dev {} mtu {} (and the switch port to match)", sub.substr(0, slash),
                            sub.substr(slash + 1), common)};
      },
      [&](const std::string& common) {
        return fmt::format("every test interface has MTU {} ({} interfaces)", common, node_mtu.size());
      });
  return f;
}

void speed_findings(const LinkFacts& f, std::vector<Finding>& out) {
  // Link speeds: equal across the fabric, outliers named.
  one_value(
      f.link_speed, out,
      [](const std::string& sub, std::int64_t sp, const std::string& common) -> Finding {
        return {"warning", sub,
                fmt::format("negotiated speed {} Mb/s while most test links run at {} Mb/s", sp, common),
                "check the cable, transceiver and switch port (ethtool shows the negotiated speed)"};
      },
      [](const std::string& common) { return fmt::format("every test link negotiated {} Mb/s", common); });
  if (!f.unknown_speed.empty()) {
    out.push_back(
        {"warning", "",
         fmt::format("link speed unknown (virtual or loopback interfaces): {}", fmt::join(f.unknown_speed, ", ")),
         "efficiency KPIs cannot be judged on these links"});
  }
}

void socket_limit_findings(const RunRecord& probe, const std::map<std::string, std::string>& names,
                           const PreflightLimits& lim, std::vector<Finding>& out) {
  // Socket buffer limits against the plan's socksize.
  for (const auto& n : probe.nodes) {
    if (!n.result || lim.socksize == 0) continue;
    const auto& sl = n.result->socket_limits;
    const std::string who = label_of(names, n.name);
    for (const auto& [name, v] : {std::pair<const char*, std::uint64_t>{"net.core.rmem_max", sl.rmem_max},
                                  std::pair<const char*, std::uint64_t>{"net.core.wmem_max", sl.wmem_max}}) {
      if (v < lim.socksize) {
        out.push_back({"error", who,
                       fmt::format("{} is {} but the plan asks for socksize {}: the kernel would clamp the buffers",
                                   name, v, format_size(lim.socksize)),
                       fmt::format("on {}: sysctl -w {}={}", who, name, lim.socksize)});
      }
    }
  }
}

void clock_findings(const RunRecord& probe, const std::map<std::string, std::string>& names, const PreflightLimits& lim,
                    std::vector<Finding>& out) {
  // Wall clocks (Spectrum Scale itself needs them within 2 s of each other).
  std::vector<std::pair<double, std::string>> offsets;  // (offset, node)
  for (const auto& n : probe.nodes) {
    if (!n.wall_offset_s) continue;
    const auto& [o, who] = offsets.emplace_back(*n.wall_offset_s, label_of(names, n.name));
    if (std::fabs(o) > lim.clock_warn_s) {
      out.push_back(
          {"warning", who,
           fmt::format("wall clock {:+.3f} s from the coordinator's (threshold {} s; Spectrum Scale needs < 2 s)", o,
                       lim.clock_warn_s),
           "run chrony or ntpd against the same time source on every node"});
    }
  }
  if (offsets.empty()) return;
  const auto [min, max] = std::ranges::minmax_element(offsets, {}, &std::pair<double, std::string>::first);
  const auto& [lo, lo_n] = *min;
  const auto& [hi, hi_n] = *max;
  if (hi - lo > lim.clock_warn_s) {
    out.push_back({"warning", lo_n + "," + hi_n,
                   fmt::format("wall clocks differ by {:.3f} s between {} and {}", hi - lo, lo_n, hi_n),
                   "synchronise the clocks (chrony/ntpd) before running"});
  } else {
    out.push_back({"ok", "", fmt::format("wall clocks agree within {:.3f} s", hi - lo), ""});
  }
}

// Findings of every agent that reported: judge(result, who, out) returns how many things it judged;
// when there were some and none was found wanting, one "ok" finding with ok_text(that many).
template <typename Judge, typename Ok>
std::vector<Finding> per_agent(const RunRecord& probe, const std::map<std::string, std::string>& names, Judge judge,
                               Ok ok_text) {
  std::vector<Finding> out;
  std::size_t judged = 0;
  for (const auto& n : probe.nodes) {
    if (n.result) judged += judge(*n.result, label_of(names, n.name), out);
  }
  if (judged > 0 && out.empty()) out.push_back({"ok", "", ok_text(judged), ""});
  return out;
}

}  // namespace

std::vector<Finding> preflight_findings(const RunRecord& probe, const Report& report,
                                        const std::map<std::string, std::string>& names, const PreflightLimits& lim) {
  std::vector<Finding> out;
  std::map<std::uint32_t, std::string> by_index;
  for (const auto& n : report.nodes) by_index[n.index] = label_of(names, n.name);
  const auto pair_name = [&](std::uint32_t from, std::uint32_t to) { return by_index[from] + "->" + by_index[to]; };

  // Agents that answered but lost or failed during the probe.
  for (const auto& n : report.nodes) {
    if (n.status != NodeStatus::ok) {
      out.push_back({"error", label_of(names, n.name),
                     fmt::format("agent {} during the probe: {}", to_string(n.status), n.error),
                     "check the agent's log and that it stays running ('fabperf agent')"});
    }
  }
  // Data connections: every pair must have moved data.
  for (const auto& c : report.connections) {
    if (!c.error.empty()) {
      out.push_back({"error", pair_name(c.node, c.peer), "data connection failed: " + c.error,
                     "open the agents' data ports between these hosts (firewall, routes)"});
    }
  }
  // Set-up fails when a data connection cannot be opened, so a pair here is connected; one that
  // moved nothing in the window is stalled rather than blocked.
  std::set<std::pair<std::uint32_t, std::uint32_t>> idle;
  for (const auto& p : report.pairs) {
    if (p.tput.bytes > 0) continue;
    idle.insert({p.client, p.server});
    out.push_back(
        {"warning", pair_name(p.client, p.server),
         "connected, but moved no data in the probe window (an overloaded host, or a path that drops data after "
         "the handshake)",
         "check the hosts' load, and firewalls or routes that treat data differently from new connections"});
  }
  if (!report.pairs.empty() && idle.empty()) {
    out.push_back({"ok", "",
                   fmt::format("all {} ordered pairs opened a data connection and moved data", report.pairs.size()),
                   ""});
  }

  const LinkFacts facts = link_findings(report, names, out);
  // MSS per pair against the smaller MTU of its two ends.
  std::size_t mss_ok = 0;
  for (const auto& p : report.pairs) {
    const auto mtu_of = [&](std::uint32_t i) {  // a node without a known MTU does not bound the pair
      const auto it = facts.min_mtu.find(i);
      return it != facts.min_mtu.end() && it->second != 0 ? it->second : 65536;
    };
    const int mtu = std::min(mtu_of(p.client), mtu_of(p.server));
    // The MSS of a connection that sent nothing is not the negotiated one.
    if (p.snd_mss == 0 || mtu == 0 || idle.count({p.client, p.server})) continue;
    const int expect = mtu - kTcpIpOverhead;
    if (static_cast<int>(p.snd_mss) + kMssSlack < expect) {
      out.push_back(
          {"error", pair_name(p.client, p.server),
           fmt::format(
               "probe connection MSS {} but the interfaces' MTU {} allows about {}: a smaller MTU somewhere on the "
               "path (switch port, router) or MSS clamping",
               p.snd_mss, mtu, expect),
           "set the same MTU on every hop between these hosts"});
    } else {
      ++mss_ok;
    }
  }
  if (mss_ok > 0 && mss_ok + idle.size() == report.pairs.size()) {
    out.push_back(
        {"ok", "", fmt::format("MSS of every probe connection matches its interfaces' MTU ({} pairs)", mss_ok), ""});
  }
  speed_findings(facts, out);
  socket_limit_findings(probe, names, lim, out);
  clock_findings(probe, names, lim, out);
  // Bonds: every agent's, with the fix. The report repeats them among its own findings.
  const auto bonds = preflight_bond_findings(probe, names);
  out.insert(out.end(), bonds.begin(), bonds.end());
  const auto pcie = preflight_pcie_findings(probe, names);
  out.insert(out.end(), pcie.begin(), pcie.end());
  // Whatever else the report found (jumbo mismatch, setup warnings, clamps) is worth seeing too.
  for (const auto& f : report.findings) {
    const bool dup = std::ranges::any_of(bonds, [&](const Finding& b) { return f.find(b.what) != std::string::npos; });
    if (!dup) out.push_back({"warning", "", f, ""});
  }
  return out;
}

std::string agent_error_fix(std::string_view error) {
  static const std::pair<const char*, const char*> kFixes[] = {
      {"does not resolve", "check the host's name or address in the plan (DNS, /etc/hosts)"},
      {"requires a key", "give this coordinator the agents' key: --key-file FILE or FABPERF_KEY_FILE"},
      {"key mismatch", "use one key everywhere: copy the agents' key file to this host (fabperf keygen makes one)"},
      {"the agent has no key", "start the agent with --key-file and the same key as this coordinator"},
      {"certificate instead of the shared key", "this address answers with a TLS service that is not a fabperf agent"},
      {"relay, port forward or NAT", "dial the agent's own address, not a forwarded one"},
      {"agent busy", "wait until the other coordinator's test ends (or stop it there)"},
      {"Connection refused", "start 'fabperf agent --key-file KEY' there (port 6668 unless --listen says otherwise)"},
      {"timed out", "the host is down, or a firewall drops its port 6668"},
  };
  for (const auto& [needle, fix] : kFixes) {
    if (error.find(needle) != std::string_view::npos) return fix;
  }
  return "start 'fabperf agent' there with the same key, and open its port (6668) and data ports";
}

std::vector<Finding> preflight_bond_findings(const RunRecord& probe, const std::map<std::string, std::string>& names) {
  const auto judge = [](const AgentResult& r, const std::string& who, std::vector<Finding>& out) {
    for (const auto& b : r.bonds) {
      // The peers this node's probe flows reach through the bond (layer2 hashing needs several).
      std::set<std::string> peers;
      for (const auto& f : r.flows) {
        if (f.iface == b.at_open.name && f.op != FlowOp::probe) peers.insert(f.remote.substr(0, f.remote.rfind(':')));
      }
      for (const auto& c : bond_checks(b.at_open, static_cast<int>(peers.size()))) {
        out.push_back({c.level, who + "/" + b.at_open.name, c.what, fmt::format("on {}: {}", who, c.fix)});
      }
    }
    return r.bonds.size();
  };
  return per_agent(probe, names, judge, [](std::size_t bonds) {
    return fmt::format(
        "{} bond(s) on the test interfaces pass the bond checks (members up, one speed, MTU as the "
        "bond, LACP partner and one aggregator where 802.3ad)",
        bonds);
  });
}

std::vector<Finding> preflight_pcie_findings(const RunRecord& probe, const std::map<std::string, std::string>& names) {
  const auto judge = [](const AgentResult& r, const std::string& who, std::vector<Finding>& out) {
    // One link may carry several test interfaces (a dual-port card): judged once, named by them.
    std::vector<std::pair<const PcieInfo*, std::string>> groups;
    for (const auto& l : r.links) {
      if (!l.info.pcie) continue;
      const auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) {
        return pcie_link_key(*x.first) == pcie_link_key(*l.info.pcie);
      });
      if (g == groups.end()) {
        groups.emplace_back(&*l.info.pcie, l.info.name);
      } else {
        g->second += "+" + l.info.name;
      }
      for (const auto& f : pcie_irq_findings(*l.info.pcie, l.info.name)) out.push_back({f.level, who, f.what, f.fix});
    }
    for (const auto& [p, ifaces] : groups) {
      for (const auto& f : pcie_link_findings(*p, ifaces)) out.push_back({f.level, who, f.what, f.fix});
    }
    return groups.size();
  };
  return per_agent(probe, names, judge, [](std::size_t links) {
    return fmt::format(
        "{} PCIe link(s) behind the test interfaces trained at their cards' maximum, carry their "
        "ports' speeds, and their interrupts are served on their NUMA nodes",
        links);
  });
}

std::string render_findings(const std::vector<Finding>& f) {
  std::string out;
  for (const auto& x : f) {
    out += fmt::format("  {:<7} {}{}{}\n", x.level, x.node.empty() ? "" : x.node + ": ", x.what,
                       x.fix.empty() ? "" : "  -> fix: " + x.fix);
  }
  return out;
}

int run_preflight(const Plan& p, const auth::Key& key, std::chrono::milliseconds connect_timeout, bool quiet,
                  std::ostream& os) {
  // The probe's settings: stream writes, one connection per pair and link (connection c of a pair
  // uses link c mod L, so every link is probed), short.
  SpecParams sp;
  sp.test = TestKind::write;
  sp.mode = Mode::stream;
  // Long enough that every flow is running inside the window even on a busy host.
  sp.time = std::chrono::milliseconds(1000);
  sp.warmup = std::chrono::milliseconds(300);
  sp.cooldown = std::chrono::milliseconds(100);
  sp.buffsize = 256 * 1024;
  sp.socksize = 0;
  for (const auto& t : p.tests) sp.socksize = std::max(*sp.socksize, t.spec.socksize());
  sp.parallel = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(p.hosts.front().hp.links.size()));
  RunRequest req;
  req.spec = TestSpec::make(sp);
  req.key = key;
  req.connect_timeout = connect_timeout;
  req.interval = std::chrono::milliseconds(100);
  for (std::uint32_t i = 0; i < p.hosts.size(); ++i) {
    req.servers.push_back(p.hosts[i].hp);
    req.clients.push_back(p.hosts[i].hp);
    for (std::uint32_t j = 0; j < p.hosts.size(); ++j) {
      if (i != j) req.pairs.emplace_back(i, j);
    }
  }
  const auto names = node_names(p);
  if (!quiet)
    os << fmt::format("preflight: {} hosts, probe of every ordered pair ({} s)\n", p.hosts.size(),
                      std::chrono::duration<double>(req.spec.time()).count());
  RunRecord rec;
  try {
    rec = run_test(req);
  } catch (const Interrupted&) {
    os << "preflight: interrupted\n";
    return static_cast<int>(ExitCode::infrastructure);
  } catch (const Error& e) {
    // The message names the agent; say which plan host that is, and how to fix it.
    std::string who;
    for (const auto& [addr, name] : names) {
      if (std::string(e.what()).find(addr) != std::string::npos) who += (who.empty() ? "" : ", ") + name;
    }
    os << render_findings({{"error", who, e.what(), agent_error_fix(e.what())}});
    os << "preflight: FAILED (fix the above, or run with --no-preflight)\n";
    return static_cast<int>(ExitCode::infrastructure);
  }
  const Report rep = compute_report(rec);
  const auto findings = preflight_findings(rec, rep, names, {*sp.socksize, p.clock_warn_s});
  const auto count = [&](std::string_view level) { return std::ranges::count(findings, level, &Finding::level); };
  const auto errors = count("error"), warnings = count("warning");
  if (!quiet || errors > 0) os << render_findings(findings);
  if (rec.interrupted) {
    os << "preflight: interrupted\n";
    return static_cast<int>(ExitCode::infrastructure);
  }
  if (errors > 0) {
    os << fmt::format("preflight: FAILED, {} errors, {} warnings (fix them, or run with --no-preflight)\n", errors,
                      warnings);
    return static_cast<int>(ExitCode::infrastructure);
  }
  if (!quiet) os << fmt::format("preflight: ok ({} warnings)\n", warnings);
  return 0;
}

}  // namespace fabperf::plan
