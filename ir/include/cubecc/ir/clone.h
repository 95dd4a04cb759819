//===- clone.h - Copying ops with their regions ----------------------------------------------===//
#pragma once

#include "cubecc/ir/ir.h"

#include <memory>
#include <unordered_map>

namespace cubecc::ir {

/// Old value -> the value that stands for it in a copy.
using ValueMap = std::unordered_map<const Value *, Value *>;

/// A detached copy of `op` and everything nested in it. Operands found in `map` are replaced by
/// their mapping (others are kept); the copy's results and region arguments are added to `map`.
/// `arena`: where the copies keep their storage (the arena of the module they will be put in, or
/// null for the heap; see Operation::create).
std::unique_ptr<Operation> clone(const Operation &op, ValueMap &map, Arena *arena = nullptr);

/// `kernel` copied into a module of its own (same name, attributes, locations and file names).
std::unique_ptr<Module> copy_kernel(const Kernel &kernel);

} // namespace cubecc::ir
