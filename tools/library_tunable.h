//===- library_tunable.h - A kernel library's tunable, as the autotuner sees it ---------------===//
//
// The autotuner (autotune/) may not see the DSL's kernel library loader (layers point down), so
// the tools bridge them: the tunable a library declares (its variants, anchors and the launch of
// each variant at each shape, through the library's C ABI) becomes an autotune::LibraryTunable.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/autotune/library.h"
#include "cubecc/dsl/kernel_library_loader.h"

namespace cubecc::tools {

/// Tunable `index` of `library` (which must outlive the result). Throws runtime::Error when the
/// library's declaration is malformed.
autotune::LibraryTunable library_tunable(const dsl::KernelLibrary &library, size_t index);

} // namespace cubecc::tools
