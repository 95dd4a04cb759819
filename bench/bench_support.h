//===- bench_support.h - What the benchmarks share: medians and comma-separated lists --------===//
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace cubecc::bench {

/// The median of `v` (the mean of the middle two for an even count; NaN when empty).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty())
    return NAN;
  size_t middle = v.size() / 2;
  return v.size() % 2 ? v[middle] : (v[middle - 1] + v[middle]) / 2;
}

/// "a,b,c" -> {"a", "b", "c"} (an empty item stays: "a,,b" has three).
inline std::vector<std::string> split_list(const std::string &list) {
  std::vector<std::string> items;
  for (size_t start = 0; start <= list.size();) {
    size_t comma = std::min(list.find(',', start), list.size());
    items.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

} // namespace cubecc::bench
