//===- hip.h - The HIP backend: IR kernels to HIP C++ and code objects through hipRTC ---------===//
//
// emit_hip writes HIP C++ (the C-family emitter with the HIP dialect: wavefronts of 64 or 32);
// compile_hip compiles it with hipRTC to a code object per listed gfx architecture. Architectures
// the installed comgr does not know are refused before hipRTC sees them (hipRTC crashes on them).
// The launch ABI is the one in cuda.h.
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

/// What an AMD target offers codegen; `wavefront` is 64 (CDNA: gfx90a, gfx942) or 32 (RDNA).
TargetFeatures hip_features(const std::string &arch);

std::optional<CSource> emit_hip(const ir::Kernel &kernel, const TargetFeatures &features,
                                std::vector<ir::Diagnostic> &errors);

struct HipBinary {
  CSource source;
  struct CodeObject {
    std::string arch; ///< "gfx90a"
    std::string bytes;
  };
  std::vector<CodeObject> code_objects;
};

/// emit_hip, then hipRTC for every arch ("gfx90a", ...).
std::optional<HipBinary> compile_hip(const ir::Kernel &kernel,
                                     const std::vector<std::string> &archs,
                                     std::vector<ir::Diagnostic> &errors);

/// Whether the installed comgr knows `arch` (e.g. "gfx90a"); `why` says why not.
bool hip_arch_known(const std::string &arch, std::string *why = nullptr);

/// hipRTC's version, or empty with `why` set when hipRTC is not available.
std::string hiprtc_version(std::string *why = nullptr);

/// The compiler of HIP code objects as environment bundles and devices name it: "hipRTC <version>",
/// or "" when this process has no hipRTC.
inline std::string hip_toolkit() {
  std::string version = hiprtc_version();
  return version.empty() ? version : "hipRTC " + version;
}

} // namespace cubecc::codegen
