//===- licm.h - The `licm` pass ---------------------------------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `licm`: hoists pure ops whose operands are all defined outside a loop to just before it.
void licm(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
