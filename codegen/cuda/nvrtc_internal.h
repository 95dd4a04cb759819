//===- nvrtc_internal.h - The NVRTC half of the CUDA backend, for tests and benchmarks --------===//
//
// Not a public header: the steps of compile_cuda one at a time, so a test can feed NVRTC a
// source the emitter would never write, and a benchmark can time each step on its own.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/cuda.h"

namespace cubecc::codegen::cuda_detail {

/// An architecture name split up: "sm_90a" is {90, "a"}.
struct CudaArch {
  unsigned number = 0;
  std::string suffix; ///< "", "a" (arch-specific) or "f" (family-specific)
};

/// Parses "sm_NN", "sm_NNa" or "sm_NNf"; nothing for anything else.
std::optional<CudaArch> parse_cuda_arch(const std::string &arch);

/// What is wrong with `arch` as a cubecc target (not an architecture name, or older than sm_80),
/// as an error message naming the target; nothing when it is fine. Needs no NVRTC.
std::optional<std::string> cuda_arch_problem(const std::string &arch);

/// Checks that every arch is well formed, sm_80 or newer and known to the NVRTC found; on
/// failure appends an error naming the arch and returns false.
bool check_cuda_archs(const std::vector<std::string> &archs, std::vector<ir::Diagnostic> &errors);

/// The virtual architecture the PTX is written for: compute_NN of the lowest listed arch
/// (without the a/f suffix, so the PTX stays loadable on newer GPUs).
std::string ptx_arch(const std::vector<std::string> &archs);

/// One NVRTC compile of `source` for `arch`: PTX for "compute_NN", CUBIN for "sm_NN[a|f]". A
/// failure appends an error with NVRTC's log (located where it can be mapped back).
std::optional<std::string> nvrtc_compile(const CSource &source, const std::string &arch,
                                         std::vector<ir::Diagnostic> &errors);

/// NVRTC for an emitted source: PTX for ptx_arch(archs) and CUBIN for every arch (as `outputs`
/// asks).
std::optional<CudaBinary> compile_cuda_source(CSource source, const std::vector<std::string> &archs,
                                              std::vector<ir::Diagnostic> &errors,
                                              CudaOutputs outputs = CudaOutputs::PtxAndCubins);

/// The options every NVRTC compile gets (without the architecture).
std::vector<std::string> nvrtc_options();

} // namespace cubecc::codegen::cuda_detail
