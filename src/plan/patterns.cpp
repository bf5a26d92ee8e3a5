// Traffic patterns as pure functions: node count and parameters in, a sequence of steps out.
#include <fabperf/error.hpp>
#include <fabperf/plan.hpp>

#include <algorithm>
#include <array>
#include <fmt/format.h>

namespace fabperf::plan {
namespace {

struct PatternName {
  Pattern p;
  std::string_view name;
  std::string_view what;
};
constexpr std::array<PatternName, 9> kPatterns{{
    {Pattern::bipartite, "bipartite", "every client loads every server at once (nsdperf's default): 1 step"},
    {Pattern::pairs, "pairs", "an explicit list of client->server pairs, all at once: 1 step"},
    {Pattern::each_vs_rest, "each-vs-rest",
     "each node alone as the client of all the others, one after another (IBM readiness per-node test): N steps"},
    {Pattern::halves, "halves", "the first half of the nodes loads the second half, all at once: 1 step"},
    {Pattern::all_pairs, "all-pairs",
     "every ordered pair alone, one after another (an N x N matrix); --concurrent-pairs K runs K disjoint pairs per step"},
    {Pattern::ring, "ring", "node i loads node i+k (mod N), all at once: 1 step"},
    {Pattern::incast, "incast", "every other node loads the target, all at once: 1 step"},
    {Pattern::broadcast, "broadcast", "the target loads every other node, all at once: 1 step"},
    {Pattern::all_to_all, "all-to-all", "every node loads every other node, all at once: 1 step"},
}};

void need_nodes(std::size_t n, std::size_t min, Pattern p) {
  if (n < min) {
    throw UsageError(fmt::format("pattern {}: needs at least {} nodes, got {}", to_string(p), min, n));
  }
}

}  // namespace

std::string_view to_string(Pattern p) {
  for (const auto& x : kPatterns) {
    if (x.p == p) return x.name;
  }
  return "?";
}

std::string_view describe(Pattern p) {
  for (const auto& x : kPatterns) {
    if (x.p == p) return x.what;
  }
  return "?";
}

Pattern parse_pattern(std::string_view s) {
  for (const auto& x : kPatterns) {
    if (x.name == s) return x.p;
  }
  std::string names;
  for (const auto& x : kPatterns) names += (names.empty() ? "" : ", ") + std::string(x.name);
  throw UsageError(fmt::format("unknown pattern '{}' (one of {})", s, names));
}

std::vector<Step> make_steps(std::size_t n, const PatternParams& p) {
  const auto idx = [](std::size_t i) { return static_cast<std::uint32_t>(i); };
  std::vector<Step> out;
  switch (p.pattern) {
    case Pattern::bipartite: {
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
      out.push_back(std::move(s));
      break;
    }
    case Pattern::pairs: {
      if (p.pairs.empty()) throw UsageError("pattern pairs: the pair list is empty");
      for (std::size_t i = 0; i < p.pairs.size(); ++i) {
        const auto& f = p.pairs[i];
        if (f.client >= n || f.server >= n) throw UsageError("pattern pairs: node index out of range");
        if (f.client == f.server) throw UsageError("pattern pairs: a node cannot load itself");
        for (std::size_t j = 0; j < i; ++j) {
          if (p.pairs[j] == f) throw UsageError("pattern pairs: a pair is listed twice");
        }
      }
      out.push_back({p.pairs});
      break;
    }
    case Pattern::each_vs_rest:
      need_nodes(n, 2, p.pattern);
      for (std::size_t c = 0; c < n; ++c) {
        Step s;
        for (std::size_t v = 0; v < n; ++v) {
          if (v != c) s.flows.push_back({idx(c), idx(v)});
        }
        out.push_back(std::move(s));
      }
      break;
    case Pattern::halves: {
      need_nodes(n, 2, p.pattern);
      Step s;
      const std::size_t half = n / 2;
      for (std::size_t c = 0; c < half; ++c) {
        for (std::size_t v = half; v < n; ++v) s.flows.push_back({idx(c), idx(v)});
      }
      out.push_back(std::move(s));
      break;
    }
    case Pattern::all_pairs: {
      need_nodes(n, 2, p.pattern);
      if (p.concurrent_pairs < 1) throw UsageError("pattern all-pairs: concurrent-pairs must be at least 1");
      if (p.concurrent_pairs > n / 2) {
        throw UsageError(fmt::format("pattern all-pairs: concurrent-pairs {} is more than {} nodes allow disjointly ({})",
                                     p.concurrent_pairs, n, n / 2));
      }
      // Greedy packing in row order: a node is in at most one pair of a step (as either end), so
      // concurrent pairs never share a NIC and the matrix stays a matrix of lone pairs.
      std::vector<Flow> left;
      for (std::size_t c = 0; c < n; ++c) {
        for (std::size_t v = 0; v < n; ++v) {
          if (c != v) left.push_back({idx(c), idx(v)});
        }
      }
      while (!left.empty()) {
        Step s;
        std::vector<bool> busy(n, false);
        std::vector<Flow> rest;
        for (const auto& f : left) {
          if (s.flows.size() < p.concurrent_pairs && !busy[f.client] && !busy[f.server]) {
            busy[f.client] = busy[f.server] = true;
            s.flows.push_back(f);
          } else {
            rest.push_back(f);
          }
        }
        out.push_back(std::move(s));
        left = std::move(rest);
      }
      break;
    }
    case Pattern::ring: {
      need_nodes(n, 2, p.pattern);
      if (p.k < 1 || p.k >= n) throw UsageError(fmt::format("pattern ring: k {} must be within 1..{}", p.k, n - 1));
      Step s;
      for (std::size_t c = 0; c < n; ++c) s.flows.push_back({idx(c), idx((c + p.k) % n)});
      out.push_back(std::move(s));
      break;
    }
    case Pattern::incast:
    case Pattern::broadcast: {
      need_nodes(n, 2, p.pattern);
      if (p.target >= n) throw UsageError(fmt::format("pattern {}: target index {} out of range", to_string(p.pattern), p.target));
      Step s;
      for (std::size_t v = 0; v < n; ++v) {
        if (v == p.target) continue;
        if (p.pattern == Pattern::incast) {
          s.flows.push_back({idx(v), p.target});
        } else {
          s.flows.push_back({p.target, idx(v)});
        }
      }
      out.push_back(std::move(s));
      break;
    }
    case Pattern::all_to_all: {
      need_nodes(n, 2, p.pattern);
      Step s;
      for (std::size_t c = 0; c < n; ++c) {
        for (std::size_t v = 0; v < n; ++v) {
          if (c != v) s.flows.push_back({idx(c), idx(v)});
        }
      }
      out.push_back(std::move(s));
      break;
    }
  }
  return out;
}

}  // namespace fabperf::plan
