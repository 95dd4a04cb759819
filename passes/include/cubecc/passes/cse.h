//===- cse.h - The `cse` pass -----------------------------------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `cse`: merges identical pure ops where the first dominates the second.
void cse(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
