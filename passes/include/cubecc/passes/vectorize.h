//===- vectorize.h - The `vectorize` pass ----------------------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

namespace cubecc::passes {

/// `vectorize`: merges N = 4 (else 2) scalar loads of one memory object at indices base + k*N ..
/// base + k*N + N-1 into one vector load (and its lane extracts), and such runs of stores into a
/// vector build and one vector store, when base is provably a multiple of N (so the vector access
/// is aligned) and no other access to that memory, barrier or fence lies between them.
void vectorize(ir::Module &module, PassContext &context);

} // namespace cubecc::passes
