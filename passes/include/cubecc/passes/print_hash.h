//===- print_hash.h - Reports each kernel's structural hash -----------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// Writes "// hash @<kernel>: <32 hex digits>" per kernel, then the module's combined hash, to
/// the pass context's stream. Changes nothing. Registered as `print-hash`.
void print_hash(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
