//===- integer_ranges.h - Integer range analysis --------------------------------------------===//
//
// For each integer scalar value of a kernel, a range [lo, hi] that contains every value it can
// take in any launch (as unsigned numbers for unsigned types, signed for signed types). Sources
// of knowledge: constants, the workgroup size (local ids and indices, subgroup ids), subgroup
// lanes, masks, remainders and shifts, loop induction variables with bounded ends, arithmetic
// that provably does not wrap, and the conditions that dominate a program point: the
// condition of every enclosing `if` (true in its then-branch, false in its else-branch; `and`,
// `or` and `not` of comparisons are taken apart), `lo <= iv < hi` in a `for` body, and the
// condition of a `while` in its `do` region (for the values it forwards). Anything else is the
// full range of its type. A DSL Var works in both forms: as SSA values after promotion (if and
// for results, block arguments), and kept in a local<T, 1>, followed through its loads
// (same_value) where no store intervenes.
//
// Besides intervals, the same dominating conditions give relational facts about buffers:
// `index < buffer.size(B)` where the bound is B's own element count. bounds-check uses both
// (docs/passes.md, "What bounds-check proves", lists exactly which facts prove an access).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/ir.h"

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace cubecc::passes {

struct IntegerRange {
  int64_t lo = 0;
  int64_t hi = 0;
};

/// A comparison known to hold at a program point, `lhs < rhs`, `lhs <= rhs` or `lhs == rhs`,
/// by the signedness of the operands' (common) type.
struct Relation {
  enum Kind { Lt, Le, Eq };
  const ir::Value *lhs = nullptr;
  const ir::Value *rhs = nullptr;
  Kind kind = Lt;
};

class IntegerRanges {
public:
  /// Analyses `kernel` (which must verify); `max_subgroup_size` bounds subgroup_lane.
  explicit IntegerRanges(const ir::Kernel &kernel, uint32_t max_subgroup_size = 128);
  /// Whether ranges are tracked for `v`: integer scalars, except u64 (its values above
  /// INT64_MAX do not fit the representation).
  static bool tracked(const ir::Value *v);
  /// The range of a tracked value where it is defined (its type's full range when nothing is
  /// known): it holds wherever `v` is visible.
  IntegerRange range(const ir::Value *v) const;
  /// The range of `v` at `at` (an op where `v` is visible), narrowed by the conditions that
  /// dominate `at` (the enclosing ifs, for loops and while loops).
  IntegerRange range_at(const ir::Value *v, const ir::Operation &at) const;
  /// Whether `index` (a scalar integer) is below the element count of `buffer` at `at`: a
  /// condition that dominates `at` says `index < buffer.size(buffer)` (or `<= size - c` with
  /// c >= 1, or `< min(size, ...)`), with the size in `index`'s own type, and a signed `index`
  /// is known to be non-negative. Kernel parameters other than the buffer itself (a tensor's
  /// shapes and strides, a scalar `n`) never prove anything: the runtime does not tie them to
  /// the buffer's length (docs/passes.md).
  bool below_buffer_size(const ir::Value *index, const ir::Value *buffer,
                         const ir::Operation &at) const;

  /// The relations that hold at `at` because of the conditions that dominate it, innermost
  /// first.
  static std::vector<Relation> dominating_relations(const ir::Operation &at);
  /// Whether `a` and `b` always hold the same value where `b` is: the same SSA value, or two
  /// loads of one local array (a DSL `Var` before promotion to SSA) at the same index with no
  /// write to that array on any path from `a` to `b` (`a` must dominate `b`).
  static bool same_value(const ir::Value *a, const ir::Value *b);

private:
  using Scope = std::vector<std::pair<const ir::Value *, IntegerRange>>;
  void region(const ir::Region &r);
  void op(const ir::Operation &o);
  void set(const ir::Value *v, IntegerRange r);
  /// The range of `v` as narrowed by `scope_` (innermost entry first), else range(v).
  IntegerRange lookup(const ir::Value *v) const;
  /// Pushes onto `scope_` what `relations` say about the ranges of their operands.
  void narrow(const std::vector<Relation> &relations);
  /// Walks `r` with what the relations that hold on entering it say in scope, then runs
  /// `at_end` (still in that scope).
  void region_under(const ir::Region &r, const std::function<void()> &at_end = nullptr);
  const ir::Kernel &kernel_;
  uint32_t max_subgroup_size_;
  std::unordered_map<const ir::Value *, IntegerRange> ranges_;
  Scope scope_;
};

} // namespace cubecc::passes
