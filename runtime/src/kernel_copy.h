//===- kernel_copy.h - A kernel copied into a module of its own -------------------------------===//
#pragma once

#include "cubecc/ir/ir.h"

#include <memory>

namespace cubecc::runtime {

/// A module holding only a copy of `kernel` (signature, attributes, body, locations with their
/// file names), so that optimizing or keeping it never touches the caller's module.
std::unique_ptr<ir::Module> copy_kernel(const ir::Kernel &kernel);

} // namespace cubecc::runtime
