//===- canonicalize.h - The `canonicalize` pass -----------------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `canonicalize`: folds constant expressions (exactly as the interpreter computes them) and
/// applies the algebraic identities of a pattern table (x + 0, x * 1, select on a constant, ...);
/// puts constants on the right of commutative ops.
void canonicalize(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
