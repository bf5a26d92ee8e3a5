// The coordinator: connects to the agents, estimates their clock offsets, assigns roles, starts
// every flow at one instant and collects raw results into a RunRecord (report.hpp computes).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <fabperf/core/error.hpp>
#include <fabperf/core/spec.hpp>
#include <fabperf/proto/auth.hpp>
#include <fabperf/proto/proto.hpp>
#include <fabperf/report/report.hpp>
#include <fabperf/report/result_stream.hpp>

namespace fabperf {

struct RunRequest {
  TestSpec spec = TestSpec::make({});
  std::vector<HostPort> servers;
  std::vector<HostPort> clients;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::nanoseconds interval{std::chrono::seconds(1)};
  std::string coordinator_name{"fabperf"};
  // Shared key; empty: only agents without a key (loopback or --insecure) are usable.
  auth::Key key;
  // Who loads whom, as (index into clients, index into servers). Empty: every client loads every
  // server (nsdperf's bipartite). Given (pattern steps): each client opens connections only to its
  // own servers, so concurrent disjoint pairs never cross. An agent listed both as a server and as
  // a client (equal HostPort) becomes one node with both roles (ring, all-to-all).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
  // --bind-dev: per-link devices for client flows ("auto": the device of each link address).
  std::vector<std::string> bind_devs;
  // Not null: results go to it as they arrive, and run_test's RunRecord carries no node results.
  ResultStream* sink{nullptr};
  // Called about once a second while the test runs (coordinator thread; must not throw): the
  // seconds since the start, the test's length and what the nodes received over the last second.
  std::function<void(double elapsed_s, double total_s, double mb_per_s)> progress;
};

// What a terminal shows while a test runs: "4.0 of 10.0 s, 2341 MB/s now".
std::string progress_text(double elapsed_s, double total_s, double mb_per_s);

// h's index in v, appended when new: each host once per role, in the order it first appears.
std::uint32_t slot_of(std::vector<std::uint32_t>& v, std::uint32_t h);
// Fills req.clients, req.servers and req.pairs from (client, server) pairs of host numbers: each
// host once per role, in the order it first appears; endpoint(h) is host h's address.
void set_host_pairs(RunRequest& req, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& host_pairs,
                    const std::function<HostPort(std::uint32_t)>& endpoint);

// SIGINT/SIGTERM before the test started: nothing was measured (a plan stops, not "failed").
class Interrupted : public Error {
 public:
  explicit Interrupted(const std::string& message) : Error(ExitCode::infrastructure, message) {}
};

// --socksize auto: twice the bandwidth-delay product (TCP needs about that much buffer to keep a
// window of one BDP in flight: the kernel keeps part of each buffer for bookkeeping), at least
// 256 KiB, rounded up to 64 KiB, at most limits::kMaxSocksize. 0 when the speed is unknown.
std::uint64_t socksize_from_bdp(std::int64_t speed_mbps, std::int64_t rtt_ns);

// Throws Error(infrastructure) when the test cannot start (agent unreachable, busy, set-up
// failed): every agent already contacted is released first. Once the test has started it always
// returns a RunRecord; nodes lost on the way are marked in it. SIGINT/SIGTERM during the test
// stops it early and still returns what was measured.
RunRecord run_test(const RunRequest& request);

// Administration outside a test: connect to agents (in parallel, authenticated as for a run) and
// ask each one thing. One entry per agent, in the order given; `error` names the agent and the
// problem when it could not be reached or refused.
struct AgentQuery {
  std::vector<HostPort> agents;
  std::chrono::milliseconds connect_timeout{5000};
  std::string coordinator_name{"fabperf"};
  auth::Key key;
};
// The agent's LINKS reply (rdma empty from agents that predate RDMA inventory).
struct AgentLinks : proto::LinksReply {
  std::string agent;  // as given (host:port)
  std::string error;  // empty on success
};
std::vector<AgentLinks> fetch_links(const AgentQuery& query);
// Tells each agent to exit cleanly (SHUTDOWN); the error is set where it refused or was unreachable.
struct AgentShutdown {
  std::string agent;
  std::string error;
};
std::vector<AgentShutdown> shutdown_agents(const AgentQuery& query, const std::string& reason);

}  // namespace fabperf
