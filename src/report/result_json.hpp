// The pieces of a `fabperf.result` document (render_json.cpp): render_json() assembles them in
// memory; ResultStream (result_stream.cpp) writes them to the file as nodes' results arrive.
// Together the header and summary objects hold every top-level key but nodes, pairs and
// connections.
#pragma once

#include <fabperf/report/report.hpp>

#include <nlohmann/json.hpp>

namespace fabperf {

nlohmann::json node_json(const NodeReport& n);
nlohmann::json pair_json(const PairReport& p);
nlohmann::json connection_json(const ConnReport& c);
// What is known before any result: schema, versions, test id, start time, settings, role counts.
nlohmann::json result_header_json(const Report& r);
// What needs every node: complete, interrupted, aggregate, CPU, latency, verify, findings, summary.
nlohmann::json result_summary_json(const Report& r);

}  // namespace fabperf
