//===- simplify_cf.h - The `simplify-cf` pass -------------------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `simplify-cf`: inlines the taken branch of an if on a constant, removes empty ifs and loops
/// that run zero times.
void simplify_cf(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
