//===- integer_ranges.h - Integer range analysis --------------------------------------------===//
//
// For each integer scalar value of a kernel, a range [lo, hi] that contains every value it can
// take in any launch (as unsigned numbers for unsigned types, signed for signed types). Sources
// of knowledge: constants, the workgroup size (local ids and indices), subgroup lanes, masks and
// remainders by constants, loop induction variables with bounded ends, and arithmetic that
// provably does not wrap. Anything else is the full range of its type.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/ir.h"

#include <cstdint>
#include <unordered_map>

namespace cubecc::passes {

struct IntegerRange {
  int64_t lo = 0;
  int64_t hi = 0;
};

class IntegerRanges {
public:
  /// Analyses `kernel` (which must verify); `max_subgroup_size` bounds subgroup_lane.
  explicit IntegerRanges(const ir::Kernel &kernel, uint32_t max_subgroup_size = 128);
  /// Whether ranges are tracked for `v`: integer scalars, except u64 (its values above
  /// INT64_MAX do not fit the representation).
  static bool tracked(const ir::Value *v);
  /// The range of a tracked value (its type's full range when nothing is known).
  IntegerRange range(const ir::Value *v) const;

private:
  void region(const ir::Region &r);
  void op(const ir::Operation &o);
  void set(const ir::Value *v, IntegerRange r);
  const ir::Kernel &kernel_;
  uint32_t max_subgroup_size_;
  std::unordered_map<const ir::Value *, IntegerRange> ranges_;
};

} // namespace cubecc::passes
