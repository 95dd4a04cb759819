//===- interp_device.h - The reference interpreter as a device --------------------------------===//
//
// Memory is host memory; a launch runs ir::interpret at once (so synchronize() has nothing to
// wait for) with true workgroup semantics. Subgroups are CUBECC_INTERP_SUBGROUP_SIZE wide
// (default 32). It supports every op and type, so every feature is on. The launch times it
// reports are host wall-clock times of the interpretation.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/runtime/device.h"

#include <memory>

namespace cubecc::runtime {

/// Throws Error when CUBECC_INTERP_SUBGROUP_SIZE is not a power of two from 1 to 128.
std::unique_ptr<Device> open_interp_device();

} // namespace cubecc::runtime
