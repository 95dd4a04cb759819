//===- kernel_abi.h - How a kernel's parameters reach the device ------------------------------===//
//
// Every backend and every device agree on one layout of a kernel's parameters, derived from the
// IR signature alone (so a runtime can bind arguments to a binary it did not compile, e.g. one
// loaded from an environment bundle):
//   - buffer parameters are numbered in order: binding 0, 1, ... (Vulkan: set 0, storage buffers);
//   - value parameters (scalars and vectors) are packed, in order, into one parameter block
//   (Vulkan:
//     push constants). Each lane takes a 4-byte slot (8 bytes, 8-aligned, for 64-bit types);
//     narrower types are zero-extended to 32 bits, bool is 0 or 1, f16/bf16 are their bit pattern.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/types.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::ir {
class Kernel;
}

namespace cubecc::codegen {

struct ParamSlot {
  enum Kind : uint8_t { Buffer, Value } kind = Value;
  ir::Type type;
  uint32_t binding = 0;    ///< buffers: the binding number
  uint32_t offset = 0;     ///< values: byte offset of lane 0 in the parameter block
  uint32_t lane_bytes = 0; ///< values: 4 or 8, the slot size of one lane
};

struct KernelAbi {
  std::string name;
  std::array<uint32_t, 3> workgroup_size = {1, 1, 1};
  std::vector<ParamSlot> params; ///< one per kernel parameter, in order
  uint32_t num_buffers = 0;
  uint32_t param_block_bytes = 0; ///< a multiple of 4
  /// Where the parameter block lives. Push constants unless the block is larger than the
  /// target's limit: then a read-only storage buffer at binding `num_buffers` (set by the
  /// backend; the runtime creates and binds it).
  bool param_block_in_buffer = false;
  /// Workgroup memory of all shared.alloc ops, each rounded up to 16 bytes (padded_shared_bytes:
  /// every array starts 16-byte aligned), in 64 bits so that a huge array is refused by the
  /// limits rather than wrapping to a small size.
  uint64_t shared_bytes = 0;

  static KernelAbi of(const ir::Kernel &kernel);
  /// The bytes a shared array of type `array` takes in a workgroup's shared memory: its elements,
  /// rounded up to the 16-byte alignment of the next array.
  static uint64_t padded_shared_bytes(ir::Type array) {
    return (array.array_bytes() + 15) / 16 * 16;
  }
};

/// Empty when a kernel of launch shape `actual` runs the launches made for `expected`: the same
/// workgroup size, and the same parameters laid out the same way (kind, type, binding, offset and
/// lane bytes of each; buffer count; parameter block bytes). Otherwise what differs, naming each
/// side: "the binary's workgroup size (128, 1, 1) is not the kernel's (256, 1, 1)" for
/// `actual_name` "the binary" and `expected_name` "the kernel".
std::string launch_shape_difference(const KernelAbi &actual, std::string_view actual_name,
                                    const KernelAbi &expected, std::string_view expected_name);

/// Writes the lanes of a value argument (`bits`, one entry per lane, zero-extended from the
/// type's width) into a parameter block laid out by `slot`.
void pack_value(const ParamSlot &slot, const uint64_t *bits, uint8_t *block);

} // namespace cubecc::codegen
