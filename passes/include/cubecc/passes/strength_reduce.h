//===- strength_reduce.h - The `strength-reduce` pass -----------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `strength-reduce`: integer multiplication, unsigned division and remainder by powers of two
/// become shifts and masks.
void strength_reduce(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
