// Placeholder while the C-family emitter is being written.
#include "cubecc/codegen/hip.h"

#include "cubecc/ir/ir.h"

namespace cubecc::codegen {
std::optional<CSource> emit_cuda(const ir::Kernel &kernel, const TargetFeatures &,
                                 std::vector<ir::Diagnostic> &errors) {
  errors.push_back({"", 0, 0, "kernel '" + kernel.name() + "': the CUDA emitter is not built yet", {}});
  return std::nullopt;
}
std::optional<CSource> emit_hip(const ir::Kernel &kernel, const TargetFeatures &,
                                std::vector<ir::Diagnostic> &errors) {
  errors.push_back({"", 0, 0, "kernel '" + kernel.name() + "': the HIP emitter is not built yet", {}});
  return std::nullopt;
}
} // namespace cubecc::codegen
