//===- unroll.h - The `unroll` pass ----------------------------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `unroll`: fully unrolls `for` loops whose bounds and step are constants and whose trip count
/// is small (at most 16 iterations and 512 copied ops), unless the loop asks not to be
/// (`{unroll = 1}`) or leaves early (break/continue); the copies use the induction variable's
/// value as a constant, so canonicalize can fold what depends on it. A loop marked
/// `{unroll = N}` that is not unrolled fully is unrolled by N, each extra copy guarded.
void unroll(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
