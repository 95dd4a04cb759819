//===- subgroup_combine.h - What a subgroup reduction or scan computes, for every implementation
//===//
//
// docs/ir.md §4.12: each subgroup reduction and scan folds its active lanes with one binary op
// (the op's identity for an empty set), over all of them (a reduction), or over lanes j <= own
// (inclusive scan) or j < own (exclusive scan). The interpreter and the backends take both from
// here.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/ops.h"

namespace cubecc::ir {

struct SubgroupCombine {
  enum class Scan { None, Inclusive, Exclusive };
  Opcode combine = Opcode::Add; ///< Add, Mul, Min, Max, And, Or or Xor
  Scan scan = Scan::None;
};

/// The combining op and the scan kind of a subgroup reduction or scan opcode (subgroup.sum,
/// subgroup.inclusive_min, ...). Other opcodes give Add with no scan.
inline SubgroupCombine subgroup_combine(Opcode o) {
  using Scan = SubgroupCombine::Scan;
  switch (o) {
  case Opcode::SubgroupMin:
    return {Opcode::Min, Scan::None};
  case Opcode::SubgroupInclusiveMin:
    return {Opcode::Min, Scan::Inclusive};
  case Opcode::SubgroupExclusiveMin:
    return {Opcode::Min, Scan::Exclusive};
  case Opcode::SubgroupMax:
    return {Opcode::Max, Scan::None};
  case Opcode::SubgroupInclusiveMax:
    return {Opcode::Max, Scan::Inclusive};
  case Opcode::SubgroupExclusiveMax:
    return {Opcode::Max, Scan::Exclusive};
  case Opcode::SubgroupAnd:
    return {Opcode::And, Scan::None};
  case Opcode::SubgroupOr:
    return {Opcode::Or, Scan::None};
  case Opcode::SubgroupXor:
    return {Opcode::Xor, Scan::None};
  case Opcode::SubgroupInclusiveSum:
    return {Opcode::Add, Scan::Inclusive};
  case Opcode::SubgroupExclusiveSum:
    return {Opcode::Add, Scan::Exclusive};
  case Opcode::SubgroupProduct:
    return {Opcode::Mul, Scan::None};
  case Opcode::SubgroupInclusiveProduct:
    return {Opcode::Mul, Scan::Inclusive};
  case Opcode::SubgroupExclusiveProduct:
    return {Opcode::Mul, Scan::Exclusive};
  default:
    return {Opcode::Add, Scan::None};
  }
}

} // namespace cubecc::ir
