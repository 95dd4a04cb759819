//===- dominance.h - Dominance in structured IR ----------------------------------------------===//
//
// With single-block regions, dominance is structural: an op dominates the ops after it in its
// region and everything nested in those; a region argument dominates its region. No tree needs to
// be built: these answer by walking parents and, within one region, the op list.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/ir.h"

namespace cubecc::ir {

/// Whether `a` comes before `b` or encloses it: every path to `b` passes `a` first (an op does
/// not dominate itself).
bool properly_dominates(const Operation *a, const Operation *b);
/// Whether `v` is available to `user` (defined by an op that properly dominates it, or a region
/// argument of a region enclosing it).
bool dominates(const Value *v, const Operation *user);

} // namespace cubecc::ir
