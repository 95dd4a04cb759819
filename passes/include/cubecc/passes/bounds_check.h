//===- bounds_check.h - The `bounds-check` pass ----------------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `bounds-check` (checked mode): guards every load, store and atomic not proven in bounds.
/// Shared and local arrays have constant sizes: an index whose range (narrowed by the conditions
/// that dominate the access) fits is proven. A buffer's scalar access is proven by a dominating
/// `index < buffer.size` of that same buffer (IntegerRanges::below_buffer_size); a tensor's shape
/// parameters never prove anything (docs/passes.md, "What bounds-check proves"). Other accesses
/// are checked against buffer.size or the array's size: out of bounds, a load or atomic gives 0
/// and a store does nothing. Counts, per kernel, the accesses guarded and those proven (by
/// ranges, by buffer.size facts), for --pass-statistics.
void bounds_check(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
