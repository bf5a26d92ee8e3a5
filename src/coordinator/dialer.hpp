// The coordinator's seam to its transport. run_test() reaches agents over TCP (with TLS when
// keyed); the state machine tests reach scripted agents over in-memory connections
// (tests/unit/test_coordinator.cpp) through the same Coordinator, with deadlines short enough
// that a stall or a loss is decided in a fraction of a second.
#pragma once

#include "net/asio.hpp"
#include "proto/conn.hpp"

#include <chrono>
#include <memory>
#include <string>

#include <fabperf/coordinator/coordinator.hpp>

namespace fabperf {

// An agent reached: the connection is ready for HELLO (TLS done when keyed).
struct Dialed {
  std::shared_ptr<proto::ControlConn> conn;
  std::string address;   // numeric address of the agent
  std::string endpoint;  // address:port: two names for one agent are told apart by it
};

class Dialer {
 public:
  virtual ~Dialer() = default;
  // Throws Error naming the agent (`name`) and what failed: resolving, connecting, the key.
  virtual asio::awaitable<Dialed> dial(const HostPort& hp, const std::string& name) = 0;
};

// How long the coordinator waits; the defaults are the product's (coordinator.cpp says why).
struct CoordinatorTiming {
  std::chrono::milliseconds frame{5000};           // a frame, once its first byte arrived
  std::chrono::milliseconds idle{5000};            // silence (agents send a heartbeat every second)
  std::chrono::milliseconds cleaning_wait{15000};  // an agent still releasing its previous test
  std::chrono::milliseconds result_drain{5000};    // after the end: the agent joins and samples
  std::chrono::milliseconds result_grace{10000};   // then its RESULT's transfer on a loaded host
  std::chrono::milliseconds drain_max{60000};      // an agent still draining (RunContext::kMaxDrainNs)
  std::chrono::milliseconds result_frame{15000};   // a RESULT frame, the largest there is
  std::chrono::milliseconds answer{60000};         // an answer to a request, heartbeats or not
  // How much set-up runs at once. An agent's pre-authentication deadline (5 s) runs from its
  // accept, and a server's data handshake deadline (5 s) from each connection's: a thousand TLS
  // handshakes, or 1,020 clients' data connections at each of 4 servers, begun together on one
  // 2-core host were not all done in time (bench-scale); 256 agents, and 256 connections at each
  // server, at once were.
  std::size_t dial_window{256};        // agents dialled at once
  std::size_t setup_connections{256};  // data connections one server takes at once (>= 16 clients)
};

// run_test() with the transport and the deadlines given.
RunRecord run_test(const RunRequest& request, Dialer& dialer, const CoordinatorTiming& timing);

}  // namespace fabperf
