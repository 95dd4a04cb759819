//===- cuda.h - The CUDA backend: IR kernels to CUDA C++, PTX and CUBIN through NVRTC ---------===//
//
// emit_cuda writes CUDA C++ for one kernel (the C-family emitter of codegen/common with the CUDA
// dialect); compile_cuda compiles it with NVRTC to PTX for the lowest listed architecture's
// virtual arch (compute_XX, for GPUs newer than any listed) and to CUBIN for each listed sm_XX.
//
// Launch ABI (the same for HIP): the kernel is `extern "C"`, named `entry`, with one parameter
// per IR buffer parameter pair and value lane, in IR order:
//   - a buffer: `T *data` (device pointer to the first element) then `unsigned long long count`
//     (its element count, what `buffer.size` returns);
//   - a value: one `unsigned int` (or `unsigned long long` for 64-bit types) per lane, holding
//     the bits zero-extended exactly as in the parameter block of kernel_abi.h.
// Grid and block sizes are the launch's num_workgroups and the kernel's workgroup size.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/c_source.h"
#include "cubecc/codegen/target.h"
#include "cubecc/ir/diagnostic.h"

#include <optional>
#include <string>
#include <vector>

namespace cubecc::ir {
class Kernel;
}

namespace cubecc::codegen {

/// What an NVIDIA target offers codegen (sm_80 and later: f16, bf16, 64-bit atomics, f64 add).
TargetFeatures cuda_features(const std::string &arch);

/// CUDA C++ for `kernel` (which must verify). On failure returns nothing and appends to `errors`.
std::optional<CSource> emit_cuda(const ir::Kernel &kernel, const TargetFeatures &features,
                                 std::vector<ir::Diagnostic> &errors);

struct CudaBinary {
  CSource source;
  std::string ptx;      ///< for compute_XX of the first arch
  std::string ptx_arch; ///< "compute_80"
  struct Cubin {
    std::string arch; ///< "sm_90"
    std::string bytes;
  };
  std::vector<Cubin> cubins;
};

/// The architectures cubecc compiles for by default, as far as the NVRTC found knows them.
std::vector<std::string> default_cuda_archs();

/// Which NVRTC outputs a compile makes (each is a full NVRTC run): a device that loads the
/// CUBIN for its own arch needs no PTX, `--emit ptx` needs no CUBIN.
enum class CudaOutputs { PtxAndCubins, Ptx, Cubins };

/// emit_cuda, then NVRTC for every arch in `archs` ("sm_80", ...). A compile error reports
/// NVRTC's log with its lines mapped back to the kernel's source locations where known.
std::optional<CudaBinary> compile_cuda(const ir::Kernel &kernel,
                                       const std::vector<std::string> &archs,
                                       std::vector<ir::Diagnostic> &errors,
                                       CudaOutputs outputs = CudaOutputs::PtxAndCubins);

/// NVRTC's version ("13.0"), or empty with `why` set when NVRTC is not available.
std::string nvrtc_version(std::string *why = nullptr);

/// The compiler of CUDA binaries as environment bundles and devices name it: "NVRTC 13.0", or ""
/// when this process has no NVRTC.
inline std::string cuda_toolkit() {
  std::string version = nvrtc_version();
  return version.empty() ? version : "NVRTC " + version;
}

} // namespace cubecc::codegen
