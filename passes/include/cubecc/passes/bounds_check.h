//===- bounds_check.h - The `bounds-check` pass ----------------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `bounds-check` (checked mode): guards every load, store and atomic whose index is not proven
/// in bounds by integer range analysis (shared and local arrays have constant sizes; buffers are
/// checked against buffer.size). Out of bounds, a load or atomic gives 0 and a store does nothing.
/// Accesses proven in bounds are left unguarded (counted as "checks proven unnecessary").
void bounds_check(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
