//===- promote_locals.h - The `promote-locals` pass (mem2reg over structured regions) ---------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `promote-locals`: turns each `local.alloc` whose every use is a scalar `load` or `store` of its
/// element type at a constant in-range index (a DSL `Var`, or a small local array indexed only
/// by constants) into SSA values, one per element: a stored value replaces the loads that follow
/// it; elements stored in an `if` become extra results of the `if`, elements stored in a loop
/// become extra carried values (and `break`/`continue` operands), when a later load may read
/// them. A load before any store reads
/// zero of the element type (the interpreter's fill for fresh local arrays). Locals with any
/// other use (dynamic index, vector access) stay in memory.
void promote_locals(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
