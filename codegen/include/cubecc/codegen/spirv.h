//===- spirv.h - The SPIR-V backend: IR kernels to Vulkan compute shaders
//----------------------===//
//
// The writer emits a SPIR-V 1.5 module (Vulkan 1.2 and later) per kernel, directly from the IR,
// with one entry point named after the kernel. Structured control flow maps onto selection and
// loop merges; buffers are std430 storage buffers (set 0, binding = buffer order), value
// parameters a push-constant block, shared arrays Workgroup variables; vectors are scalarized.
// The module carries OpName for parameters and values and OpLine for source locations.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/codegen/target.h"
#include "cubecc/ir/diagnostic.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cubecc::ir {
class Kernel;
}

namespace cubecc::codegen {

struct SpirvKernel {
  std::vector<uint32_t> words; ///< the module; the entry point is `main`
  KernelAbi abi;
  /// The features the module relies on, a subset of those it was emitted for: the flags behind
  /// the capabilities it declares (f64, 16-bit types, atomics, subgroup operations) and bf16 if
  /// it uses it; a fused fma, kept signed zeros, a subgroup size or layout and matrix shapes
  /// where its code depends on them; the target's flags that no capability shows (f32 atomic
  /// exchange, subgroup ops on extended types) and its limits. A device runs the module when
  /// `relies_on.unmet_on(its features)` is empty (and the module passes its load checks); an
  /// environment bundle records `relies_on.fingerprint()`, so that SPIR-V made offline for the
  /// baseline runs on any Vulkan device that has what it uses (docs/environments.md).
  TargetFeatures relies_on = {};
};

/// Emits `kernel` (which must verify) for `features`. On failure returns nothing and appends to
/// `errors` (an unsupported feature names the kernel, the op and its location).
std::optional<SpirvKernel> emit_spirv(const ir::Kernel &kernel, const TargetFeatures &features,
                                      std::vector<ir::Diagnostic> &errors);

/// The checks emit_spirv makes before it writes anything (the target's features, matrix shapes,
/// subgroups and limits): whether it would refuse `kernel`, and why in `errors`.
bool check_spirv(const ir::Kernel &kernel, const TargetFeatures &features,
                 std::vector<ir::Diagnostic> &errors);

/// Runs the SPIRV-Tools validator (Vulkan 1.2 environment) in process. Empty on success, else
/// the validator's messages.
std::string validate_spirv(const std::vector<uint32_t> &words);

/// SPIRV-Tools disassembly (friendly names, no header comments when `header` is false).
std::string disassemble_spirv(const std::vector<uint32_t> &words, bool header = true);

/// GLSL 450 or MSL source through SPIRV-Cross; on failure returns nothing and sets `error`.
std::optional<std::string> spirv_to_glsl(const std::vector<uint32_t> &words, std::string &error);
std::optional<std::string> spirv_to_msl(const std::vector<uint32_t> &words, std::string &error);

/// The versions of the SPIR-V libraries linked in (`cubecc --version`): SPIRV-Tools' own string
/// (e.g. "SPIRV-Tools v2022.4 ...") and SPIRV-Cross' C API version ("0.54.0").
std::string spirv_tools_version();
std::string spirv_cross_version();

} // namespace cubecc::codegen
