//===- c_emitter.h - The C-family emitter, for the CUDA and HIP backends ----------------------===//
#pragma once

#include "cubecc/codegen/c_source.h"
#include "cubecc/codegen/target.h"
#include "cubecc/ir/diagnostic.h"

#include <optional>
#include <vector>

namespace cubecc::ir {
class Kernel;
}

namespace cubecc::codegen {

/// The dialects of C++ the emitter writes: they differ in the prelude, the warp width and a few
/// names (c_emitter.cpp).
enum class CDialect { Cuda, Hip };

/// C++ for `kernel` (which must verify) in `dialect`. On failure returns nothing and appends to
/// `errors`. cuda.h and hip.h describe the launch ABI.
std::optional<CSource> emit_c_family(const ir::Kernel &kernel, const TargetFeatures &features,
                                     CDialect dialect, std::vector<ir::Diagnostic> &errors);

/// The checks emit_c_family makes before it writes anything (the target's features, matrix
/// shapes, subgroups and limits): whether it would refuse `kernel`, and why in `errors`.
bool check_c_family(const ir::Kernel &kernel, const TargetFeatures &features, CDialect dialect,
                    std::vector<ir::Diagnostic> &errors);

} // namespace cubecc::codegen
