//===- interpreter.h - The reference interpreter: runs a kernel on the CPU --------------------===//
//
// The oracle for pass and backend tests. It runs every workgroup of a launch, one after the
// other; within a workgroup, all invocations advance together op by op (with a per-invocation
// activity mask for branches and loops), so barriers, shared memory and subgroup operations have
// their real workgroup semantics. A barrier reached by only some invocations, an out-of-bounds
// access, a misaligned vector access or a broadcast from an inactive lane is reported with the
// kernel, the op's location, the index and the size. Integer and float semantics are those of
// docs/ir.md; f16 and bf16 results are rounded exactly once.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/diagnostic.h"
#include "cubecc/ir/ir.h"

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace cubecc::ir {

/// Host memory standing in for a device buffer: elements of `element`, little-endian.
struct HostBuffer {
  Scalar element = Scalar::U8;
  std::vector<uint8_t> bytes;
  size_t size() const { return bytes.size() / (scalar_bits(element) / 8); }
};

/// One kernel argument: a buffer, or the bits of a scalar (one entry) or vector (one per lane).
/// Bits are zero-extended from the type's width; floats are their IEEE bit patterns.
struct Argument {
  HostBuffer *buffer = nullptr;
  std::vector<uint64_t> bits;
};

struct LaunchConfig {
  std::array<uint32_t, 3> num_workgroups = {1, 1, 1};
  uint32_t subgroup_size = 32; ///< a power of two, 1 to 128
  /// Ops executed (per invocation, summed) before the run is stopped as runaway.
  uint64_t op_limit = 1u << 30;
  /// Where `print` ops write, one call per print per invocation (in the order the invocations
  /// run: workgroup by workgroup, invocation 0 first); standard output when empty.
  std::function<void(std::string_view)> print;
};

/// Runs `kernel` (which must verify) for `config`; buffers are read and written in place.
/// Returns the problems found; empty means the launch completed.
std::vector<Diagnostic> interpret(const Kernel &kernel, std::span<const Argument> arguments,
                                  const LaunchConfig &config);

} // namespace cubecc::ir
