//===- spirv_test_support.h - What the SPIR-V writer records for a test kernel ----------------===//
//
// Shared by the writer's tests and the bundle lookup's: a one-kernel module in text, and what its
// SPIR-V relies on (codegen::SpirvKernel::relies_on, the record a bundle stores).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/spirv.h"
#include "test_support.h"

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace cubecc::test {

/// A kernel @k over one f32 buffer %x: `attributes` after its parameters (a workgroup size, ...),
/// then %v, the element of this invocation, `body` defining %r, and %r stored back.
inline std::string f32_kernel_text(std::string_view attributes, std::string_view body) {
  return fmt::format(R"(module @m {{
  kernel @k(%x: buffer<f32, readwrite>) {} {{
    %i = local_index : u32
    %v = load %x, %i : f32
{}    store %x, %i, %r
    return
  }}
}})",
                     attributes, body);
}

/// What the only kernel of `text`, written for `features`, relies on (`features` on a failure,
/// which the test is told of).
inline codegen::TargetFeatures spirv_relies_on(std::string_view text,
                                               const codegen::TargetFeatures &features) {
  auto module = parse_valid(text);
  EXPECT_TRUE(module);
  if (!module)
    return features;
  std::vector<ir::Diagnostic> errors;
  auto spirv = codegen::emit_spirv(*module->kernels()[0], features, errors);
  EXPECT_TRUE(spirv) << ir::to_string(errors);
  return spirv ? spirv->relies_on : features;
}

} // namespace cubecc::test
