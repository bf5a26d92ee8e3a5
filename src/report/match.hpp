// Before and after of a comparison, matched by key (compare.cpp's nodes, pairs and links;
// compare_bonds), the change between them, and how compare and compare_trials judge it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fabperf/report/result_doc.hpp>

namespace fabperf {

// Each key of `b`, then each key only `a` has, with its value on either side (nullptr where missing).
template <typename K, typename V, typename F>
void match(const std::map<K, V>& b, const std::map<K, V>& a, F&& f) {
  for (const auto& [k, v] : b) {
    const auto it = a.find(k);
    f(k, &v, it == a.end() ? nullptr : &it->second);
  }
  for (const auto& [k, v] : a) {
    if (!b.count(k)) f(k, nullptr, &v);
  }
}

// Every node's links or bonds, keyed (node, the item's name).
template <typename T>
std::map<std::pair<std::string, std::string>, T> by_node(const ResultDoc& d, std::vector<T> NodeReport::*items,
                                                         std::string T::*name) {
  std::map<std::pair<std::string, std::string>, T> m;
  for (const auto& n : d.nodes) {
    for (const auto& x : n.*items) m.insert_or_assign(std::pair{n.name, x.*name}, x);
  }
  return m;
}

// From before to after, in percent; 0 when there was nothing before.
inline double change(double before, double after) {
  return before > 0 ? 100.0 * (after / before - 1.0) : 0.0;
}

// Whether a change fails what was expected of it: an expected "unchanged" by any move (a port
// that gained when it should not have is as much news as one that did not), an expected change
// by not gaining or by falling short of it less the tolerance; without an expectation, by
// regressing. moved: -1 down, 0 unchanged, +1 up, each beyond the noise (compare's band, or the
// trials' statistics).
inline bool misses(const std::optional<double>& expected, bool unchanged, int moved, double change_pct,
                   double tolerance) {
  if (!expected) return moved < 0;
  if (unchanged) return moved != 0;
  return moved <= 0 || change_pct < *expected - tolerance;
}

}  // namespace fabperf
