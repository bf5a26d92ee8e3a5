// Before and after of a comparison, matched by key (compare.cpp's nodes, pairs and links;
// compare_bonds.cpp's bonds), and the change between them.
#pragma once

#include <map>

namespace fabperf {

// Each key of `b` with its `a` value (nullptr when missing), then the keys only `a` has.
template <typename K, typename V, typename Both, typename OnlyAfter>
void match(const std::map<K, V>& b, const std::map<K, V>& a, Both&& both, OnlyAfter&& only_after) {
  for (const auto& [k, v] : b) {
    const auto it = a.find(k);
    both(k, v, it == a.end() ? nullptr : &it->second);
  }
  for (const auto& [k, v] : a) {
    if (!b.count(k)) only_after(k, v);
  }
}

// From before to after, in percent; 0 when there was nothing before.
inline double change(double before, double after) {
  return before > 0 ? 100.0 * (after / before - 1.0) : 0.0;
}

}  // namespace fabperf
