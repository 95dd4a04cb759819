//===- spirv_interface.h - A SPIR-V module from outside, against its launch metadata ----------===//
//
// A kernel loaded from an environment bundle arrives as SPIR-V words and launch metadata (the
// KernelAbi the pipeline layout and the launches are made from). Both come from a file: before the
// driver sees the module, the Vulkan device checks that it is what the metadata says (after the
// SPIRV-Tools validator has checked that it is valid SPIR-V at all). A module that disagrees with
// its pipeline layout is undefined behaviour in the driver (lavapipe crashes on some), so every
// disagreement is refused here:
//   - one GLCompute entry point named `main`, its LocalSize the metadata's workgroup size (no
//     LocalSizeId, no WorkgroupSize built-in overriding it);
//   - every descriptor it declares is a storage buffer the layout has (set 0, a binding below the
//     buffers plus the parameter block's, each once), each buffer a runtime array at offset 0 with
//     elements of its parameter's width; the push-constant block (or the parameter block's buffer)
//     is exactly the metadata's value slots: one integer member per lane, at the lane's offset, of
//     its width;
//   - no other resources (uniforms, images, outputs, non-built-in inputs);
//   - its Workgroup variables fit the device's shared memory.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/kernel_abi.h"

#include <cstdint>
#include <span>
#include <string>

namespace cubecc::runtime {

/// Empty when `words`, a module that passed the SPIR-V validator, declares exactly the interface
/// of `abi` and fits `max_shared_bytes` of Workgroup memory; else what differs.
std::string check_spirv_interface(std::span<const uint32_t> words, const codegen::KernelAbi &abi,
                                  uint32_t max_shared_bytes);

} // namespace cubecc::runtime
