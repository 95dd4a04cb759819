// Placeholder while the writer is being written.
#include "cubecc/codegen/spirv.h"

#include "cubecc/ir/ir.h"

namespace cubecc::codegen {
std::optional<SpirvKernel> emit_spirv(const ir::Kernel &kernel, const TargetFeatures &,
                                      std::vector<ir::Diagnostic> &errors) {
  errors.push_back({"", 0, 0, "kernel '" + kernel.name() + "': the SPIR-V writer is not built yet", {}});
  return std::nullopt;
}
} // namespace cubecc::codegen
