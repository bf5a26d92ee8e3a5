// Traffic patterns as pure functions: node count and parameters in, a sequence of steps out.
#include <fabperf/core/error.hpp>
#include <fabperf/plan/plan.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cmath>

namespace fabperf::plan {

// The names of Pattern's values, in its order.
constexpr std::array<std::string_view, 9> kPatternNames{"bipartite", "pairs",  "each-vs-rest", "halves",    "all-pairs",
                                                        "ring",      "incast", "broadcast",    "all-to-all"};
static_assert(kPatternNames.size() == static_cast<std::size_t>(Pattern::all_to_all) + 1);

std::string_view to_string(Pattern p) {
  return kPatternNames.at(static_cast<std::size_t>(p));
}

Pattern parse_pattern(std::string_view s) {
  const auto it = std::find(kPatternNames.begin(), kPatternNames.end(), s);
  if (it == kPatternNames.end())
    throw UsageError(fmt::format("unknown pattern '{}' (one of {})", s, fmt::join(kPatternNames, ", ")));
  return static_cast<Pattern>(it - kPatternNames.begin());
}

namespace {

std::uint32_t idx(std::size_t i) {
  return static_cast<std::uint32_t>(i);
}

// One step: every ordered pair (c, v) of n nodes, c != v, that keep(c, v) accepts, in row order.
template <typename Keep>
Step flows_where(std::size_t n, Keep keep) {
  Step s;
  for (std::size_t c = 0; c < n; ++c) {
    for (std::size_t v = 0; v < n; ++v) {
      if (c != v && keep(c, v)) s.flows.push_back({idx(c), idx(v)});
    }
  }
  return s;
}

std::vector<Step> all_pairs(std::size_t n, const PatternParams& p) {
  std::vector<Step> out;
  if (p.concurrent_pairs < 1) throw UsageError("pattern all-pairs: concurrent-pairs must be at least 1");
  if (p.concurrent_pairs > n / 2) {
    throw UsageError(fmt::format("pattern all-pairs: concurrent-pairs {} is more than {} nodes allow disjointly ({})",
                                 p.concurrent_pairs, n, n / 2));
  }
  if (p.concurrent_pairs == 1) {
    // Every ordered pair alone, in row order: the matrix as mpiGraph draws it.
    for (const auto& f : flows_where(n, [](auto, auto) { return true; }).flows) out.push_back({{f}});
    return out;
  }
  // Concurrent pairs: a round-robin tournament (the circle method). With M = n rounded up to
  // even (odd n: a phantom node gives each round's partner of it a bye), round r pairs the
  // fixed node M-1 with r and (r+i) with (r-i) mod M-1, so every round is M/2 disjoint pairs
  // and the M-1 rounds meet every unordered pair once. Each round runs in both orientations:
  // 2(M-1) orientations of M/2 pairs cover every ordered pair exactly once, and a node is in
  // at most one pair of a step, so concurrent pairs never share a NIC. A round with more
  // pairs than concurrent-pairs is cut into steps of that many.
  const std::size_t m = n + n % 2;
  const std::size_t phantom = n % 2 == 1 ? n : m;  // the bye's index; m means "none"
  for (std::size_t r = 0; r + 1 < m; ++r) {
    std::vector<Flow> round;
    const auto add = [&](std::size_t x, std::size_t y) {
      if (x == phantom || y == phantom) return;
      round.push_back({idx(x), idx(y)});
    };
    add(r, m - 1);
    for (std::size_t i = 1; i < m / 2; ++i) add((r + i) % (m - 1), (r + (m - 1) - i) % (m - 1));
    for (const bool reversed : {false, true}) {
      for (std::size_t start = 0; start < round.size(); start += p.concurrent_pairs) {
        Step s;
        for (std::size_t j = start; j < std::min(round.size(), start + p.concurrent_pairs); ++j) {
          const auto& f = round[j];
          s.flows.push_back(reversed ? Flow{f.server, f.client} : f);
        }
        out.push_back(std::move(s));
      }
    }
  }
  return out;
}

}  // namespace

std::vector<Step> make_steps(std::size_t n, const PatternParams& p) {
  if (p.pattern == Pattern::bipartite) {
    if (p.clients.empty() || p.servers.empty()) {
      throw UsageError("pattern bipartite: needs at least one client and one server");
    }
    Step s;
    for (const auto c : p.clients) {
      for (const auto v : p.servers) {
        if (c >= n || v >= n) throw UsageError("pattern bipartite: node index out of range");
        if (c == v) throw UsageError("pattern bipartite: a node cannot be both a client and a server");
        s.flows.push_back({c, v});
      }
    }
    return {s};
  }
  if (p.pattern == Pattern::pairs) {
    if (p.pairs.empty()) throw UsageError("pattern pairs: the pair list is empty");
    for (auto f = p.pairs.begin(); f != p.pairs.end(); ++f) {
      if (f->client >= n || f->server >= n) throw UsageError("pattern pairs: node index out of range");
      if (f->client == f->server) throw UsageError("pattern pairs: a node cannot load itself");
      if (std::find(p.pairs.begin(), f, *f) != f) throw UsageError("pattern pairs: a pair is listed twice");
    }
    return {{p.pairs}};
  }
  if (n < 2) throw UsageError(fmt::format("pattern {}: needs at least 2 nodes, got {}", to_string(p.pattern), n));
  switch (p.pattern) {
    case Pattern::each_vs_rest: {
      std::vector<Step> out;
      for (std::size_t c = 0; c < n; ++c) out.push_back(flows_where(n, [&](std::size_t x, auto) { return x == c; }));
      return out;
    }
    case Pattern::halves:
      return {flows_where(n, [&](std::size_t c, std::size_t v) { return c < n / 2 && v >= n / 2; })};
    case Pattern::all_pairs: return all_pairs(n, p);
    case Pattern::ring:
      if (p.k < 1 || p.k >= n) throw UsageError(fmt::format("pattern ring: k {} must be within 1..{}", p.k, n - 1));
      return {flows_where(n, [&](std::size_t c, std::size_t v) { return v == (c + p.k) % n; })};
    case Pattern::incast:
    case Pattern::broadcast:
      if (p.target >= n)
        throw UsageError(fmt::format("pattern {}: target index {} out of range", to_string(p.pattern), p.target));
      return {flows_where(
          n, [&](std::size_t c, std::size_t v) { return (p.pattern == Pattern::incast ? v : c) == p.target; })};
    default: return {flows_where(n, [](auto, auto) { return true; })};  // all-to-all
  }
}

nlohmann::json step_figures(Pattern p, std::size_t n, const ResultDoc& result) {
  using nlohmann::json;
  if (n < 2) return nullptr;
  const double nd = static_cast<double>(n);
  const double aggregate = result.aggregate.mb_per_s;
  if (p == Pattern::all_to_all) {
    // nccl-tests AlltoAll: algbw = S / t for S bytes per rank, (n-1)/n of which leave the rank;
    // busbw = algbw (n-1)/n. The operation ends with its slowest rank, so busbw is the slowest
    // node's send rate: what each rank's link carried.
    if (result.nodes.empty()) return nullptr;
    double slowest = result.nodes.front().tx_mb_per_s, sum = 0;
    for (const auto& node : result.nodes) {
      slowest = std::min(slowest, node.tx_mb_per_s);
      sum += node.tx_mb_per_s;
    }
    return {{"kind", "bus_bandwidth"},
            {"definition", "nccl-tests alltoall: busbw = algbw x (n-1)/n, from the slowest rank"},
            {"ranks", n},
            {"algbw_mb_per_s", slowest * nd / (nd - 1)},
            {"busbw_mb_per_s", slowest},
            {"mean_rank_mb_per_s", sum / static_cast<double>(result.nodes.size())}};
  }
  if (p == Pattern::incast) {
    // nccl-tests Gather to one root: busbw = algbw (n-1)/n, and the root receives (n-1)/n of
    // the S bytes gathered: busbw is what the target's link carried in the test's direction.
    double target = 0;
    for (const auto& node : result.nodes) {
      if (node.role.find("server") != std::string::npos) {
        target = std::max(node.rx_mb_per_s, node.tx_mb_per_s);
      }
    }
    return {{"kind", "bus_bandwidth"},
            {"definition", "nccl-tests gather: busbw = algbw x (n-1)/n at the root"},
            {"ranks", n},
            {"algbw_mb_per_s", target * nd / (nd - 1)},
            {"busbw_mb_per_s", target}};
  }
  if (p == Pattern::halves) {
    // Bisection bandwidth: everything that crossed the cut between the halves, one direction.
    const double half = std::floor(nd / 2);
    return {{"kind", "bisection_bandwidth"},
            {"definition", "payload across the cut between the halves, one direction"},
            {"bisection_mb_per_s", aggregate},
            {"per_node_mb_per_s", aggregate / half},
            {"nodes_per_half", half}};
  }
  return nullptr;
}

std::string render_step_figures(const nlohmann::json& f) {
  if (!f.is_object()) return "";
  if (f.value("kind", "") == "bus_bandwidth") {
    return fmt::format("busbw {:.0f} MB/s, algbw {:.0f} MB/s ({} ranks)", f.at("busbw_mb_per_s").get<double>(),
                       f.at("algbw_mb_per_s").get<double>(), f.at("ranks").get<std::size_t>());
  }
  return fmt::format("bisection {:.0f} MB/s ({:.0f} MB/s per node of a half)", f.at("bisection_mb_per_s").get<double>(),
                     f.at("per_node_mb_per_s").get<double>());
}

}  // namespace fabperf::plan
