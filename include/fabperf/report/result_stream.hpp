// `fabperf run --json FILE` written while results are collected (docs/usage.md, "Written as
// collected"): started() writes the document's header and opens `nodes`; node() appends that
// node's section and flushes it, and spools the node's connections to an unlinked temporary file
// beside FILE; finish() appends `connections`, `pairs` and the summary keys. Memory holds one
// report per node and the pairs' accumulators, never the connections nor the document, and a
// coordinator killed while collecting leaves the header and every node section written so far
// (a node with a balance-alb bond is written at finish(): its notes need the peers' ARP tables).
// The finished file parses to the same JSON value as render_json(compute_report(run)) (nodes in
// index order; connections grouped by node in the order results arrived).
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fabperf/report/report.hpp>

namespace fabperf {

// Takes the results of a running test as they arrive, so the coordinator holds none of them.
// started() and node() are called on the coordinator's thread and do not throw.
class ResultStream {
 public:
  // path "": no file (the report alone, still without holding the connections); "-": stdout.
  // keep_connections: the returned Report also holds them (the verbose text table).
  ResultStream(std::string path, bool keep_connections);
  ~ResultStream();
  ResultStream(const ResultStream&) = delete;
  ResultStream& operator=(const ResultStream&) = delete;

  // The test has started: header.nodes are every node, without results.
  void started(const RunRecord& header) noexcept;
  // Once per node: its result, or why there is none (status, error).
  void node(const NodeRecord& n) noexcept;
  // After run_test returned `run` (it carries no node results when this was its sink; when
  // started() was never called, run's nodes are streamed here). Completes and closes the file,
  // and returns the report.
  Report finish(const RunRecord& run);
  // errno of the first failure writing the file (0: none). The file then stops where it failed.
  [[nodiscard]] int write_error() const { return err_; }

 private:
  void write(std::FILE* f, const std::string& text) noexcept;
  void write_node(const NodeReport& nr) noexcept;
  void fail(int err) noexcept;

  std::string path_;
  bool keep_;
  std::FILE* out_{nullptr};
  std::FILE* spool_{nullptr};  // the connections until finish(); null: they stay in memory
  std::optional<ReportBuilder> builder_;
  std::vector<ConnReport> conns_;        // kept: keep_connections, or no spool
  std::vector<std::uint32_t> deferred_;  // balance-alb nodes: written at finish()
  bool started_{false};
  bool first_node_{true};
  bool first_conn_{true};
  int err_{0};
};

}  // namespace fabperf
