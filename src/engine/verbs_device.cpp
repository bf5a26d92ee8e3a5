// Device selection for the RDMA engine. Without rdma_cm the port and GID are chosen by matching
// the address the test uses on each node against each port's RoCE v2 GIDs, so multi-GID RoCE
// ports work without --gid-index.
#include "engine/verbs_internal.hpp"
#include "net/sockaddr.hpp"

#include <fabperf/core/fd.hpp>
#include <fabperf/core/units.hpp>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace fabperf::verbs {
namespace {

// The GID a RoCE port holds for this IP address (IPv4 as ::ffff:a.b.c.d).
ibv_gid gid_for(const sockaddr_storage& ss) {
  ibv_gid g{};
  if (ss.ss_family == AF_INET) {
    g.raw[10] = 0xff;
    g.raw[11] = 0xff;
    std::memcpy(g.raw + 12, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, 4);
  } else {
    const auto& a6 = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
    std::memcpy(g.raw, &a6, 16);
  }
  return g;
}

// Device selection: DEV[:PORT][,...] from --rdma-device.
struct DevSel {
  std::string name;
  int port{0};  // 0 = every port
};
std::vector<DevSel> parse_device_list(const std::string& text) {
  std::vector<DevSel> out;
  auto items = split_list(text, ',');
  if (items.size() > 1 && items.back().empty()) items.pop_back();  // a trailing comma ends the list
  for (const auto& item : items) {
    const auto colon = item.find(':');
    DevSel d{item.substr(0, colon)};
    if (colon != std::string::npos) {
      d.port = static_cast<int>(parse_int(item.substr(colon + 1), "--rdma-device port", 1, 255));
    }
    if (d.name.empty()) throw UsageError(fmt::format("--rdma-device '{}': empty device name", text));
    out.push_back(d);
  }
  return out;
}

Error no_device_error() {
  return Error(ExitCode::infrastructure,
               "no RDMA device found (ibv_get_device_list: none under /sys/class/infiniband; load a driver or add "
               "Soft-RoCE with 'rdma link add rxe0 type rxe netdev IF')");
}

// An opened port as a Device, with its protection domain and the one registered buffer (2 x --buffsize).
std::unique_ptr<Device> port_device(ibv_context* ctx, std::uint8_t port, const ibv_port_attr& pa, int rd_atom,
                                    const TestSpec& spec) {
  auto d = std::make_unique<Device>();
  d->name = ibv_get_device_name(ctx->device);
  d->label = fmt::format("{}:{}", d->name, port);
  d->ctx = ctx;
  d->port = port;
  d->infiniband = pa.link_layer == IBV_LINK_LAYER_INFINIBAND;
  d->lid = pa.lid;
  d->mtu = pa.active_mtu;
  d->max_rd_atomic = static_cast<std::uint32_t>(std::clamp(rd_atom, 1, 16));
  d->pd = verbs_made(PdPtr(ibv_alloc_pd(ctx)), "ibv_alloc_pd", d->label);
  d->block = spec.buffsize();
  d->buf = aligned_buffer(2 * d->block);
  if (!d->buf) {
    throw Error(ExitCode::infrastructure,
                fmt::format("allocating {} for RDMA buffers failed", format_size(2 * d->block)));
  }
  fill_pattern({d->buf.get(), 2 * d->block}, 2 * d->block);
  d->mr = verbs_made(MrPtr(ibv_reg_mr(d->pd.get(), d->buf.get(), 2 * d->block,
                                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)),
                     "ibv_reg_mr", d->label);
  return d;
}

}  // namespace

VerbsError verbs_fail(const char* call, const std::string& dev, int err) {
  return VerbsError(call, dev, err, fmt::format("{}: {} on {}", call, errno_text(err), dev));
}

std::string gid_text(std::span<const std::uint8_t, 16> g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.data(), buf, sizeof buf);
  return buf;
}

sockaddr_storage numeric_sockaddr(const std::string& host, std::uint16_t port, const char* what) {
  return net::resolve(host, port, AI_NUMERICHOST, AF_UNSPEC, what, host).ss;
}

// The address this connection uses on this node, whose GID picks the RDMA port. A connected UDP
// socket sends nothing.
sockaddr_storage local_address_towards(const std::string& host, const std::string& source) {
  const sockaddr_storage dst = numeric_sockaddr(host, 4791, "resolve RDMA peer address");
  auto must = [](int rc, const char* what, const std::string& object) {
    if (rc < 0) throw SystemError(what, object, errno);
  };
  const UniqueFd sock(::socket(dst.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const int fd = sock.get();
  must(fd, "socket", host);
  const socklen_t dlen = dst.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (!source.empty()) {
    const sockaddr_storage src = numeric_sockaddr(source, 0, "resolve source address");
    must(::bind(fd, reinterpret_cast<const sockaddr*>(&src), dlen), "bind source address", source);
  }
  must(::connect(fd, reinterpret_cast<const sockaddr*>(&dst), dlen), "find the local address towards", host);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  must(::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len), "getsockname towards", host);
  return local;
}

void check_devices_present(const TestSpec& spec) {
  int n = 0;
  const DeviceListPtr list(ibv_get_device_list(&n));
  if (n == 0) throw no_device_error();
  if (!spec.rdma_device().empty()) (void)parse_device_list(spec.rdma_device());
}

std::unique_ptr<Device> open_device(const TestSpec& spec, const sockaddr_storage& local) {
  int n = 0;
  const DeviceListPtr list(ibv_get_device_list(&n));
  if (!list || n == 0) throw no_device_error();
  std::vector<DevSel> want;
  if (!spec.rdma_device().empty()) want = parse_device_list(spec.rdma_device());
  std::vector<std::string> names(static_cast<std::size_t>(n));
  std::ranges::transform(list.get(), list.get() + n, names.begin(), ibv_get_device_name);
  for (const auto& w : want) {
    if (std::ranges::find(names, w.name) == names.end()) {
      throw Error(ExitCode::infrastructure,
                  fmt::format("--rdma-device {}: no such RDMA device (found: {})", w.name, fmt::join(names, ", ")));
    }
  }
  const ibv_gid want_gid = gid_for(local);
  const std::string addr = net::numeric_host(local);
  std::vector<std::string> looked;
  std::string problem;
  for (int i = 0; i < n; ++i) {
    const std::string name = names[static_cast<std::size_t>(i)];
    const auto wanted = std::ranges::find(want, name, &DevSel::name);
    if (!want.empty() && wanted == want.end()) continue;
    const int only_port = wanted == want.end() ? 0 : wanted->port;
    ContextPtr c(ibv_open_device(list.get()[i]));
    if (!c) {
      problem = verbs_fail("ibv_open_device", name, errno).what();
      looked.push_back(name + " (cannot open)");
      continue;
    }
    ibv_device_attr da{};
    if (ibv_query_device(c.get(), &da) != 0) {
      problem = verbs_fail("ibv_query_device", name, errno).what();
      continue;
    }
    for (int p = 1; p <= da.phys_port_cnt; ++p) {
      if (only_port != 0 && p != only_port) continue;
      const std::string label = fmt::format("{}:{}", name, p);
      ibv_port_attr pa{};
      if (ibv_query_port(c.get(), static_cast<std::uint8_t>(p), &pa) != 0) {
        looked.push_back(label + " (" + verbs_fail("ibv_query_port", label, errno).what() + ")");
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        looked.push_back(fmt::format("{} ({})", label, ibv_port_state_str(pa.state)));
        continue;
      }
      // --gid-index's GID, an InfiniBand port's first, else the RoCE v2 one of the address.
      auto gid_entry = [&](int g, ibv_gid_entry& e) {
        return ibv_query_gid_ex(c.get(), static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(g), &e, 0) == 0;
      };
      int chosen = -1;
      ibv_gid_entry entry{};
      std::vector<std::string> gids;
      if (spec.gid_index() >= 0) {
        if (spec.gid_index() >= pa.gid_tbl_len || !gid_entry(spec.gid_index(), entry)) {
          throw Error(ExitCode::infrastructure,
                      fmt::format("--gid-index {}: {} has no GID at that index (table size {})", spec.gid_index(),
                                  label, pa.gid_tbl_len));
        }
        chosen = spec.gid_index();
      } else if (pa.link_layer == IBV_LINK_LAYER_INFINIBAND) {
        ibv_query_gid(c.get(), static_cast<std::uint8_t>(p), 0, &entry.gid);
        chosen = 0;
      } else {
        for (int g = 0; g < pa.gid_tbl_len && chosen < 0; ++g) {
          if (!gid_entry(g, entry)) continue;
          const bool v2 = entry.gid_type == IBV_GID_TYPE_ROCE_V2;
          gids.push_back(fmt::format("{}={}{}", g, gid_text(entry.gid.raw), v2 ? "/v2" : "/v1"));
          if (v2 && std::memcmp(entry.gid.raw, want_gid.raw, 16) == 0) chosen = g;
        }
      }
      if (chosen < 0) {
        looked.push_back(fmt::format("{} [GIDs {}]", label, fmt::join(gids, " ")));
        continue;
      }
      auto d = port_device(c.get(), static_cast<std::uint8_t>(p), pa, da.max_qp_rd_atom, spec);
      d->owned_ctx = std::move(c);
      d->gid_index = chosen;
      d->gid = entry.gid;
      d->key = addr;
      return d;
    }
  }
  throw Error(ExitCode::infrastructure,
              fmt::format("no active RDMA port has a RoCE v2 GID for {} (looked at: {}{}){}", addr,
                          looked.empty() ? std::string("no port") : fmt::format("{}", fmt::join(looked, "; ")),
                          spec.rdma_device().empty() ? "" : ", --rdma-device " + spec.rdma_device(),
                          problem.empty() ? std::string() : "; " + problem));
}

std::unique_ptr<Device> open_cm_device(ibv_context* ctx, std::uint8_t port, const TestSpec& spec) {
  const std::string label = fmt::format("{}:{}", ibv_get_device_name(ctx->device), port);
  ibv_device_attr da{};
  verbs_check(ibv_query_device(ctx, &da), "ibv_query_device", label);
  ibv_port_attr pa{};
  verbs_check(ibv_query_port(ctx, port, &pa), "ibv_query_port", label);
  // rdma_cm passes these as the connection's responder resources and initiator depth.
  auto d = port_device(ctx, port, pa, std::min(da.max_qp_rd_atom, da.max_qp_init_rd_atom), spec);
  d->key = "cm:" + d->label;
  return d;
}

}  // namespace fabperf::verbs
