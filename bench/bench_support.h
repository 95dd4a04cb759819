//===- bench_support.h - What the benchmarks share: clocks, medians, JSON numbers, lists -----===//
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

namespace cubecc::bench {

using Clock = std::chrono::steady_clock;

/// Milliseconds from `start` to now.
inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// A number for a JSON line: four decimals, or null for NaN (a measurement not taken).
inline std::string json_number(double v) {
  return std::isnan(v) ? "null" : fmt::format("{:.4f}", v);
}

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
