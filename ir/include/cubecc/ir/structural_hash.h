//===- structural_hash.h - A kernel's identity: xxHash3-128 of its canonical form -------------===//
//
// The hash covers everything that can change what a kernel computes or how it is launched: its
// name, parameters, workgroup size, attributes, and every op (opcode, operand wiring, result types,
// attributes, regions). It ignores value names and source locations (debug information that does
// not change the generated code's behaviour) and never depends on memory addresses, so it is
// stable across processes, runs and machines. The byte stream it hashes is versioned: changing it
// changes kStructuralHashVersion.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/ir.h"

#include <cstdint>
#include <string>

namespace cubecc::ir {

inline constexpr uint32_t kStructuralHashVersion = 1;

struct Hash128 {
  uint64_t high = 0;
  uint64_t low = 0;
  /// 32 lowercase hex digits, high half first.
  std::string hex() const;
  friend bool operator==(const Hash128 &, const Hash128 &) = default;
};

Hash128 structural_hash(const Kernel &kernel);
/// Combines the kernels' hashes in order; the module's name is not part of it.
Hash128 structural_hash(const Module &module);

} // namespace cubecc::ir
