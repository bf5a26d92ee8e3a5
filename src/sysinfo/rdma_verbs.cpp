// The one thing sysfs does not say about an RDMA port, its active MTU, asked of libibverbs.
// Built only with rdma-core (rdma_sysfs.cpp has the sysfs-only fallback).
#include <fabperf/sysinfo/rdma_sysfs.hpp>

#include <infiniband/verbs.h>

#include <algorithm>

namespace fabperf {

std::vector<RdmaDevice> read_local_rdma_devices() {
  auto devs = read_rdma_devices("");
  if (devs.empty()) return devs;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return devs;
  for (int i = 0; i < n; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    auto it = std::find_if(devs.begin(), devs.end(), [&](const RdmaDevice& d) { return d.name == name; });
    if (it == devs.end()) continue;
    ibv_context* c = ibv_open_device(list[i]);
    if (!c) continue;  // not ours to open (permissions): the sysfs estimate stays
    for (auto& p : it->ports) {
      ibv_port_attr pa{};
      if (ibv_query_port(c, static_cast<std::uint8_t>(p.port), &pa) != 0) continue;
      p.active_mtu = 128 << static_cast<int>(pa.active_mtu);
      p.mtu_source = "verbs";
    }
    ibv_close_device(c);
  }
  ibv_free_device_list(list);
  return devs;
}

}  // namespace fabperf
