//===- target.h - What a code generation target can do
//-----------------------------------------===//
//
// The features a device offers that change what a backend may emit. Codegen never guesses: a kernel
// that needs a feature its target lacks is refused with an error naming the kernel, the op (with
// its source location) and the feature. A runtime fills this from the device it opened; offline
// compilation (`cubecc compile --target vulkan`) uses the target's documented baseline.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/diagnostic.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::ir {
class Kernel;
}

namespace cubecc::codegen {

struct TargetFeatures {
  std::string target = "vulkan"; ///< the name used in errors: "vulkan", "vulkan (llvmpipe)", ...
  bool int8 = true;              ///< 8-bit integer arithmetic and 8-bit storage buffers
  bool int16 = true;
  bool int64 = true;
  bool float16 = true;  ///< f16 arithmetic and 16-bit storage buffers
  bool bfloat16 = true; ///< emulated by the SPIR-V writer (needs int16 and 16-bit storage)
  bool float64 = true;
  bool int64_atomics = true;       ///< 64-bit integer atomics on buffers and shared memory
  bool float32_atomic_add = false; ///< atomic.add on f32 (VK_EXT_shader_atomic_float)
  bool float32_atomics = false;    ///< atomic.xchg on f32 (VK_EXT_shader_atomic_float)
  bool float64_atomic_add = false;
  /// atomic.min and atomic.max on f32 (VK_EXT_shader_atomic_float2's
  /// shaderBufferFloat32AtomicMinMax and shaderSharedFloat32AtomicMinMax; CUDA, HIP and the CPU
  /// through a compare-and-swap loop).
  bool float32_atomic_min_max = false;
  /// Atomics on 8- and 16-bit types (and f16/bf16): CUDA and HIP through a compare-and-swap loop
  /// on the element's 32-bit word, the CPU and the interpreter; Vulkan has no 8/16-bit integer
  /// atomics (and lavapipe no f16 ones).
  bool narrow_atomics = false;
  /// GLSL.std.450 Fma rounds once. Vulkan only promises "a * b then + c"; GPUs fuse, lavapipe
  /// does not. Without it, f32 and f16 fma are computed exactly through f64 (needs float64).
  bool fused_fma = false;
  /// Float ops keep the sign of zero, infinities and NaNs (SignedZeroInfNanPreserve for 16-, 32-
  /// and 64-bit floats); without it the device may fold -0.0 * 1.0 to +0.0.
  bool signed_zero_inf_nan_preserve = true;
  bool subgroup_arithmetic = true; ///< reductions and scans
  /// Subgroup operations on 8-, 16- and 64-bit types (shaderSubgroupExtendedTypes).
  bool subgroup_extended_types = true;
  bool subgroup_shuffle = true; ///< shuffle, shuffle_xor, shuffle_up/down
  bool subgroup_ballot = true;  ///< ballot, broadcast, elect, all, any
  /// Subgroup size, when fixed (0: unknown or varying).
  uint32_t subgroup_size = 8;
  /// Subgroups are consecutive local_index values for every workgroup shape (GPUs). lavapipe
  /// forms them along x rows, which agrees with local_index only when workgroup x is a multiple
  /// of the subgroup size or the workgroup is one row; other shapes are refused for kernels that
  /// use subgroups (docs/ir.md §4.9).
  bool linear_subgroups = false;
  /// The matrix.mma shapes the target runs: bit i for ir::matrix_shapes()[i] (docs/ir.md §2.2).
  /// Vulkan: the shapes the device lists for VK_NV_cooperative_matrix.
  uint32_t matrix_shapes = 0;
  /// Why a target without matrix support has none, for the error that refuses a matrix op.
  std::string matrix_note = "it has no matrix (tensor-core) instructions";
  /// async.copy is asynchronous (CUDA sm_80 and later: cp.async). Without it the legalize pass
  /// does each copy at once, a load and a store (docs/ir.md §4.14).
  bool async_copy = false;
  uint32_t max_shared_bytes = 32768;
  uint32_t max_param_block_bytes = 128; ///< push constants
  uint32_t max_workgroup_invocations = 1024;
  uint32_t max_workgroup_size[3] = {1024, 1024, 1024};

  /// The baseline of a Vulkan 1.3 device that cubecc targets offline: what lavapipe offers.
  static TargetFeatures vulkan_baseline();
  /// The offline target `vulkan:nvidia`: an NVIDIA GPU under Vulkan 1.3 (32-wide subgroups of
  /// consecutive invocations, fused fma, 48 KiB of shared memory) with VK_NV_cooperative_matrix's
  /// f16 shapes (16x16x16 and 16x8x16 into f32 or f16). A runtime fills the shapes its device
  /// lists instead.
  static TargetFeatures vulkan_nvidia();
  /// What `--emit msl` assumes of a Metal device behind SPIRV-Cross: no f64, no 64-bit or float
  /// atomics, 32 KiB threadgroup memory, fma fused in hardware.
  static TargetFeatures metal_baseline();

  /// Every field that changes what codegen emits, as a short canonical string: two feature sets
  /// with the same fingerprint get the same code. Compiled kernels are keyed by it.
  std::string fingerprint() const;
  /// The features a fingerprint() string records (`target` left at its default), or nothing for
  /// a string fingerprint() cannot have written: bundles are untrusted input.
  static std::optional<TargetFeatures> from_fingerprint(std::string_view text);

  /// For the features a compiled kernel relies on (SpirvKernel::relies_on): what `device` lacks
  /// of them, as "fused fma; subgroups of 32 invocations (the device's have 8)", or "" when the
  /// kernel runs on it. A flag the kernel relies on must be set on the device, a subgroup size
  /// it relies on (non-zero) must be the device's, its matrix shapes must be among the device's.
  /// Limits are not compared: a device checks the kernel's launch metadata (workgroup size,
  /// shared memory, parameter block) against its own limits when it loads the binary.
  std::string unmet_on(const TargetFeatures &device) const;
  /// Everything these features ask of a device, in unmet_on's words ("" for nothing): what a
  /// compiled kernel relies on, for `cubecc env inspect`.
  std::string needs() const;
};

/// Refuses what a kernel needs and the target lacks, with errors naming the kernel (and the op's
/// location): the matrix ops it does not run (each matrix.mma of a shape outside
/// `matrix_shapes`, or on a target with none, the kernel's first matrix op), and a required
/// subgroup size (the kernel attribute `subgroup_size`, docs/ir.md §3.1) other than the target's
/// when the target's is known. Returns whether the kernel passed.
bool check_target_support(const ir::Kernel &kernel, const TargetFeatures &features,
                          std::vector<ir::Diagnostic> &errors);

/// Refuses shared memory or a workgroup over the target's limits, naming the kernel, the numbers
/// and what to do (the shared memory at the largest array's location), so that such a kernel is
/// a user error and not a failure inside NVRTC, hipRTC or the driver. The GPU backends check it
/// when they compile; the interpreter and the CPU device check their own limits when they load a
/// kernel (the interpreter's can be raised). Returns whether the kernel passed.
bool check_target_limits(const ir::Kernel &kernel, const TargetFeatures &features,
                         std::vector<ir::Diagnostic> &errors);

} // namespace cubecc::codegen
