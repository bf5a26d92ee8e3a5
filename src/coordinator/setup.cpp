// The test's set-up: --socksize auto from the agents' links, SETUP_SERVER then SETUP_CLIENT (and
// the RDMA queue pairs exchanged through the control channel), and the common start.
#include <fabperf/core/error.hpp>
#include <fabperf/core/units.hpp>

#include "coordinator/coordinator_internal.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <iterator>

namespace fabperf {

std::uint64_t socksize_from_bdp(std::int64_t speed_mbps, std::int64_t rtt_ns) {
  if (speed_mbps <= 0) return 0;
  constexpr std::uint64_t kMin = 256u << 10, kGrain = 64u << 10;
  const double bdp =
      static_cast<double>(speed_mbps) * 1e6 / 8.0 * static_cast<double>(std::max<std::int64_t>(rtt_ns, 0)) / 1e9;
  const double want = 2.0 * bdp;
  if (want >= static_cast<double>(limits::kMaxSocksize)) return limits::kMaxSocksize;
  std::uint64_t size = static_cast<std::uint64_t>(std::ceil(want / static_cast<double>(kGrain))) * kGrain;
  return std::clamp<std::uint64_t>(size, kMin, limits::kMaxSocksize);
}

namespace coord {

using namespace std::chrono_literals;
using proto::MsgType;

// --socksize auto: the slowest data interface of any node (from each agent's inventory) times
// the round trip between a client and a server, estimated as the largest client plus the
// largest server round trip of the control connections (the coordinator sits between them or
// on one of them, so this errs on the large side).
asio::awaitable<void> Coordinator::auto_socksize(RunRecord& rec) {
  std::int64_t speed = -1;  // the slowest link's; 0 once one reports none (the product is unknown)
  std::string slowest;      // "eth0 (address) on host:port"
  co_await phase("link inventory for --socksize auto", [&](Node& n) -> asio::awaitable<void> {
    const auto reply = proto::parse_links(co_await request(n, MsgType::links_request, MsgType::links));
    const std::vector<std::string> addrs = n.hp.links.empty() ? std::vector<std::string>{n.rec.address} : n.hp.links;
    for (const auto& a : addrs) {
      std::int64_t s = -1;
      std::string name = "?";
      for (const auto& l : reply.links) {
        for (const auto& cidr : l.addresses) {
          if (cidr.substr(0, cidr.find('/')) == a) {
            s = l.speed_mbps;
            name = l.name;
          }
        }
      }
      if (speed == 0) continue;
      const std::string what = fmt::format("{} ({}) on {}", name, a, n.rec.name);
      if (s <= 0) {
        speed = 0;
        slowest = what + " reports no speed";
      } else if (speed < 0 || s < speed) {
        speed = s;
        slowest = what;
      }
    }
  });
  std::int64_t rtt_c = 0, rtt_s = 0;
  for (const auto& n : nodes_) {
    auto& r = n.rec.is_client ? rtt_c : rtt_s;
    r = std::max(r, n.rec.clock.rtt_ns);
  }
  const std::int64_t rtt = rtt_c + rtt_s;
  const std::uint64_t size = socksize_from_bdp(speed, rtt);
  if (size == 0) {
    rec.socksize_basis = fmt::format("socksize auto: link speed unknown ({}): left to the OS (autotuning)", slowest);
    co_return;
  }
  rec.spec = rec.spec.with_auto_socksize(size);
  rec.socksize_basis =
      fmt::format("socksize auto: {} = 2 x BDP ({} Mb/s, slowest link {}, x round trip {:.0f} us) (min 256K, max 100M)",
                  format_size(size), speed, slowest, static_cast<double>(rtt) / 1e3);
}

// rdma_cc: each server learns which clients to create queue pairs for.
asio::awaitable<void> Coordinator::setup_servers(const RunRecord& rec, const proto::Token& token, bool rdma_cc) {
  const TestSpec& spec = rec.spec;
  // The client nodes loading each server node.
  std::vector<std::vector<std::uint32_t>> clients(nodes_.size());
  for (std::size_t k = 0; k < nodes_.size(); ++k) {
    if (!nodes_[k].rec.is_client) continue;
    for (const std::size_t sn : servers_of(k)) clients[sn].push_back(nodes_[k].rec.index);
  }
  co_await phase(
      "server set-up",
      [&](Node& n) -> asio::awaitable<void> {
        const std::size_t at = static_cast<std::size_t>(&n - nodes_.data());
        proto::SetupServer m{rec.test_id, token, spec, n.rec.index};
        // Each client also opens one delay-probe connection to every server (unless --delay-probe off).
        m.expect_connections = static_cast<std::uint32_t>(clients[at].size()) *
                               (spec.connections_per_pair() + (spec.delay_probe().count() != 0 ? 1 : 0));
        m.any_address = !n.hp.links.empty();
        if (rdma_cc) {
          m.rdma_clients = clients[at];
          m.link_addrs = n.hp.links;
        }
        auto ok = proto::parse_setup_server_ok(
            co_await setup_exchange(n, MsgType::setup_server, proto::to_json(m), MsgType::setup_server_ok, 30s));
        if (!rdma_cc && ok.data_port == 0)
          throw ProtocolError(fmt::format("agent {}: SETUP_SERVER_OK.data_port: 0", n.rec.name));
        if (rdma_cc) {
          const std::size_t want = clients[at].size() * spec.connections_per_pair();
          if (ok.rdma.size() != want) {
            throw ProtocolError(fmt::format("agent {}: SETUP_SERVER_OK.rdma: {} queue pairs, expected {}", n.rec.name,
                                            ok.rdma.size(), want));
          }
          for (const auto& e : ok.rdma) {
            if (e.node != n.rec.index) {
              throw ProtocolError(
                  fmt::format("agent {}: SETUP_SERVER_OK.rdma: an endpoint of node {}, not of this node {}", n.rec.name,
                              e.node, n.rec.index));
            }
          }
          n.rdma_server_eps = std::move(ok.rdma);
        }
        n.data_port = ok.data_port;
        n.rec.setup_warnings = ok.warnings;
      },
      [](const Node& n) { return n.rec.is_server; });
}

asio::awaitable<void> Coordinator::setup_clients(const RunRecord& rec, const proto::Token& token, bool rdma_cc) {
  // At least this many clients set up at once, however many connections each one opens.
  constexpr std::size_t kMinSetupWindow = 16;
  // Each client set-up opens per_pair connections to a server; the window bounds what one server
  // takes at once (CoordinatorTiming::setup_connections).
  const std::size_t per_pair = rec.spec.connections_per_pair() + (rec.spec.delay_probe().count() != 0 ? 1 : 0);
  co_await phase(
      "client set-up",
      [&](Node& n) -> asio::awaitable<void> {
        proto::SetupClient m{rec.test_id, token, rec.spec, n.rec.index};
        for (const std::size_t sn : servers_of(static_cast<std::size_t>(&n - nodes_.data()))) {
          const Node& t = nodes_[sn];
          std::vector<proto::RdmaEndpoint> eps;
          std::ranges::copy_if(t.rdma_server_eps, std::back_inserter(eps),
                               [&](const auto& e) { return e.peer == n.rec.index; });
          m.targets.push_back({t.rec.index, t.rec.address, t.data_port, t.hp.links, std::move(eps)});
        }
        m.source_addrs = n.hp.links;
        m.bind_devs = req_.bind_devs;
        // Opening many connections takes a while on big fabrics; the agent keeps heartbeating.
        auto ok = proto::parse_setup_client_ok(
            co_await setup_exchange(n, MsgType::setup_client, proto::to_json(m), MsgType::setup_client_ok, 120s));
        if (rdma_cc) {
          for (const auto& e : ok.rdma) {
            if (e.node != n.rec.index || e.peer >= nodes_.size() || !nodes_[e.peer].rec.is_server) {
              throw ProtocolError(
                  fmt::format("agent {}: SETUP_CLIENT_OK.rdma: endpoint of node {} for node {} does not fit this test",
                              n.rec.name, e.node, e.peer));
            }
          }
          n.rdma_client_eps = std::move(ok.rdma);
        }
        for (const auto& w : ok.warnings) {
          if (std::ranges::find(n.rec.setup_warnings, w) == n.rec.setup_warnings.end())
            n.rec.setup_warnings.push_back(w);
        }
      },
      [](const Node& n) { return n.rec.is_client; }, std::max(kMinSetupWindow, t_.setup_connections / per_pair));
}

// The clients' queue pairs are at RTS; each server brings its own up against them.
asio::awaitable<void> Coordinator::connect_rdma(const RunRecord& rec) {
  co_await phase(
      "RDMA queue pair set-up",
      [&](Node& n) -> asio::awaitable<void> {
        proto::RdmaConnect m{rec.test_id, {}};
        for (const auto& c : nodes_) {
          std::ranges::copy_if(c.rdma_client_eps, std::back_inserter(m.endpoints),
                               [&](const auto& e) { return e.peer == n.rec.index; });
        }
        if (m.endpoints.size() != n.rdma_server_eps.size()) {
          throw ProtocolError(fmt::format("agent {}: its clients returned {} RDMA queue pairs for its {}", n.rec.name,
                                          m.endpoints.size(), n.rdma_server_eps.size()));
        }
        n.conn->send(MsgType::rdma_connect, proto::to_json(m));
        const auto ok = proto::parse_rdma_connect_ok(co_await expect(n, MsgType::rdma_connect_ok, 30s, t_.frame));
        if (ok.queue_pairs != m.endpoints.size()) {
          throw ProtocolError(fmt::format("agent {}: RDMA_CONNECT_OK.queue_pairs: {}, expected {}", n.rec.name,
                                          ok.queue_pairs, m.endpoints.size()));
        }
      },
      [](const Node& n) { return n.rec.is_server && !n.rdma_server_eps.empty(); });
}

// Sends every agent START with the test's instants on its own clock.
Window Coordinator::start_test(const RunRecord& rec) {
  const TestSpec& spec = rec.spec;
  // A common start far enough ahead that every START arrives first: four round trips, and 2 ms
  // an agent (1,024 agents on 2 cores took over 2 s to read theirs after a 0.3 s lead).
  std::int64_t max_rtt = 0;
  for (const auto& n : nodes_) max_rtt = std::max(max_rtt, n.rec.clock.rtt_ns);
  const std::int64_t start = mono_now_ns() + std::max({std::int64_t{300'000'000}, 4 * max_rtt,
                                                       static_cast<std::int64_t>(nodes_.size()) * 2'000'000});
  const std::int64_t open = start + spec.warmup().count();
  const std::int64_t close = start + spec.time().count() - spec.cooldown().count();
  const std::int64_t end = start + spec.time().count();
  for (auto& n : nodes_) {
    const std::int64_t off = n.rec.clock.offset_ns;
    n.conn->send(MsgType::start,
                 proto::to_json(proto::Start{start + off, open + off, close + off, end + off, req_.interval.count()}));
  }
  running_ = true;
  if (req_.sink) {
    RunRecord header = rec;
    for (const auto& n : nodes_) header.nodes.push_back(n.rec);
    req_.sink->started(header);
  }
  return {start, end};
}

}  // namespace coord
}  // namespace fabperf
