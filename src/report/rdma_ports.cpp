// RDMA port counters over the window: deltas of every readable counter, data bytes (the IB PMA
// counts 4-byte words), packets, and what fabperf's own blocks need on the wire, so a reader can
// check the port against the tool (compute first; the renderers only format).
#include <fabperf/core/units.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/sysinfo/rdma_sysfs.hpp>

#include "report/text_table.hpp"

#include <fmt/format.h>
#include <algorithm>

#include "report/result_json.hpp"

namespace fabperf {

std::uint64_t rdma_header_bytes(const std::string& link_layer) {
  if (link_layer == "InfiniBand") return 8 + 12 + 4 + 2;
  return 14 + 20 + 8 + 12 + 4 + 4;
}

RdmaPortReport rdma_port_report(const RdmaPortResult& p, const AgentResult& a, std::uint64_t block_size,
                                const std::string& node, std::vector<std::string>& findings) {
  RdmaPortReport r;
  r.port = fmt::format("{}:{}", p.device, p.info.port);
  r.link_layer = p.info.link_layer;
  r.rate = p.info.rate;
  r.netdev = p.info.netdev;
  r.active_mtu = p.info.active_mtu;
  r.header_bytes_per_packet = rdma_header_bytes(r.link_layer);
  for (const auto& f : a.flows) {
    if (f.rdma_port != r.port) continue;
    r.payload_tx_bytes += f.tx_delivered_window;
    r.payload_rx_bytes += f.rx_bytes_window;
  }
  if (r.active_mtu > 0 && block_size > 0) {
    const std::uint64_t mtu = static_cast<std::uint64_t>(r.active_mtu);
    const std::uint64_t per_block = (block_size + mtu - 1) / mtu;
    // Whole blocks, and the partial one's packets (a window edge can cut a block's count).
    auto packets = [&](std::uint64_t bytes) {
      return bytes / block_size * per_block + (bytes % block_size + mtu - 1) / mtu;
    };
    r.data_packets_tx = packets(r.payload_tx_bytes);
    r.data_packets_rx = packets(r.payload_rx_bytes);
  }
  const RdmaPortSample* s0 = nullptr;
  const RdmaPortSample* s1 = nullptr;
  for (const auto& s : p.samples) {
    if (!s.counters.present) continue;
    if (!s0) s0 = &s;
    s1 = &s;
  }
  if (!p.samples.empty() && !p.samples.back().counters.present) {
    findings.push_back(fmt::format("RDMA port {} on {} disappeared during the test", r.port, node));
  }
  if (!s0 || s0 == s1) return r;
  r.have_counters = true;
  r.window_s = static_cast<double>(s1->t_ns - s0->t_ns) / 1e9;
  r.unreadable = s1->counters.unreadable;
  std::vector<std::string> grew;
  each_counter_pair(
      s0->counters.values, s1->counters.values, [&](const std::string& k, std::uint64_t v0, std::uint64_t v1) {
        // A counter reset mid-window reads as no growth.
        const auto& d = r.counters.emplace_back(RdmaCounterDelta{k, v1 >= v0 ? v1 - v0 : 0, is_rdma_error_counter(k)});
        if (d.error && d.delta > 0) grew.push_back(fmt::format("{} +{}", k.substr(k.find('/') + 1), d.delta));
      });
  auto delta_of = [&](std::string_view key) -> std::int64_t {
    const auto d = std::ranges::find(r.counters, key, &RdmaCounterDelta::name);
    return d == r.counters.end() ? -1 : static_cast<std::int64_t>(d->delta);
  };
  const std::int64_t xw = delta_of("counters/port_xmit_data"), rw = delta_of("counters/port_rcv_data");
  if (xw >= 0) r.tx_bytes = xw * 4;
  if (rw >= 0) r.rx_bytes = rw * 4;
  r.tx_packets = delta_of("counters/port_xmit_packets");
  r.rx_packets = delta_of("counters/port_rcv_packets");
  if (r.tx_packets < 0) r.tx_packets = delta_of("hw_counters/sent_pkts");
  if (r.rx_packets < 0) r.rx_packets = delta_of("hw_counters/rcvd_pkts");
  if (r.tx_bytes >= 0) r.tx_mb_per_s = mb_per_s(static_cast<std::uint64_t>(r.tx_bytes), r.window_s);
  if (r.rx_bytes >= 0) r.rx_mb_per_s = mb_per_s(static_cast<std::uint64_t>(r.rx_bytes), r.window_s);
  if (r.tx_bytes >= 0 && r.payload_tx_bytes > 0) {
    r.tx_bytes_per_payload = static_cast<double>(r.tx_bytes) / static_cast<double>(r.payload_tx_bytes);
  }
  if (!grew.empty()) {
    findings.push_back(fmt::format("RDMA port {} on {}: error counters grew during the window: {}", r.port, node,
                                   fmt::join(grew, ", ")));
  }
  return r;
}

std::string render_rdma_inventory_text(const std::vector<RdmaDevice>& devices) {
  if (devices.empty()) return "";
  std::string out = fmt::format("\n{:<12} {:>4} {:<8} {:<9} {:<10} {:<22} {:>5} {:<10} {}\n", "RDMA device", "port",
                                "state", "phys", "layer", "rate", "mtu", "netdev", "lid");
  std::string gids;
  bool estimated = false;
  for (const auto& d : devices) {
    if (d.ports.empty()) out += fmt::format("{:<12} (no ports)\n", d.name);
    for (const auto& p : d.ports) {
      const bool ib = p.link_layer == "InfiniBand";
      estimated = estimated || p.mtu_source == "netdev";
      out += fmt::format("{:<12} {:>4} {:<8} {:<9} {:<10} {:<22} {:>5} {:<10} {}\n", d.name, p.port,
                         text::or_dash(p.state), text::or_dash(p.phys_state), text::or_dash(p.link_layer),
                         text::or_dash(p.rate),
                         p.active_mtu > 0 ? std::to_string(p.active_mtu) + (p.mtu_source == "netdev" ? "*" : "") : "-",
                         text::or_dash(p.netdev), ib ? fmt::format("{:#x}", p.lid) : "-");
      gids +=
          fmt::format("  {}:{} GID table ({} of {} entries in use)\n", d.name, p.port, p.gids.size(), p.gid_table_len);
      for (const auto& g : p.gids) {
        gids +=
            fmt::format("    {:>4} {:<40} {:<8} {}\n", g.index, g.gid, text::or_dash(g.type), text::or_dash(g.netdev));
      }
    }
  }
  if (estimated) out += "  * MTU derived from the interface MTU (sysfs has none; this build cannot ask libibverbs)\n";
  return out + gids;
}

nlohmann::json rdma_ports_json(const std::vector<RdmaPortReport>& ports) {
  using nlohmann::json;
  return jsonu::array_json(ports, [](const RdmaPortReport& p) {
    json j = {{json_key(col::rdma_port), p.port}, {"counters", json::object()}, {"error_counters", json::object()}};
    for (const auto& d : p.counters) {
      j["counters"][d.name] = d.delta;
      if (d.error && d.delta > 0) j["error_counters"][d.name] = d.delta;
    }
    FABPERF_JSON_FIELDS(j, p, link_layer, rate, netdev, active_mtu, window_s, have_counters, unreadable,
                        payload_tx_bytes, payload_rx_bytes, data_packets_tx, data_packets_rx, header_bytes_per_packet);
    // null where the port has no such counter (-1).
    FABPERF_FIELDS(([&j](const char* key, const auto& x, int) { j[key] = jsonu::nonneg(x); }), 0, p, tx_bytes, rx_bytes,
                   tx_packets, rx_packets, tx_mb_per_s, rx_mb_per_s, tx_bytes_per_payload);
    return j;
  });
}

}  // namespace fabperf
