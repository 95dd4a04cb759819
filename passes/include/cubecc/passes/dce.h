//===- dce.h - The `dce` pass -----------------------------------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `dce`: removes unused pure ops, and ifs and loops whose results are unused and whose bodies
/// have no effect.
void dce(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
