//===- random_ir.h - Random, well-typed kernels for differential testing ---------------------===//
#pragma once

#include "cubecc/ir/interpreter.h"

#include <cstdint>
#include <string>

namespace cubecc::test {

/// The shape every generated kernel has, so a test can run it:
///   kernel @random(%in_i: buffer<i32, read>, %in_f: buffer<f32, read>,
///                  %out: buffer<u32, readwrite>, %n: i32) workgroup(kRandomWorkgroup, 1, 1)
/// %in_i and %in_f hold kRandomInputs elements (every load index is masked into range); each
/// invocation writes kRandomSlots words of %out from local_index * kRandomSlots.
inline constexpr uint32_t kRandomWorkgroup = 8;
inline constexpr uint32_t kRandomInputs = 64;
inline constexpr uint32_t kRandomSlots = 4;

/// The IR text of a random kernel: integer and float arithmetic, comparisons, casts, selects,
/// loads, ifs with results, for and while loops with carried values, break and continue, shared
/// memory with barriers, subgroup operations, stores under branches, and local arrays read and
/// written like DSL Vars (in branches and loops, across break and continue), most at constant
/// indices and some at run-time ones. Deterministic per seed.
std::string random_kernel(uint64_t seed);

/// Inputs for a random kernel: %in_i and %in_f (kRandomInputs elements: small integers with a
/// few large ones, floats on a 1/64 grid in [-156, 156]) and %n. Deterministic per seed.
struct RandomInputs {
  ir::HostBuffer ints{ir::Scalar::I32, {}};
  ir::HostBuffer floats{ir::Scalar::F32, {}};
  int32_t n = 0;
};
RandomInputs random_inputs(uint64_t seed);

} // namespace cubecc::test
