//===- device_launcher.h - Running a kernel on a runtime device with host-side arguments ------===//
//
// The e2e suite's bridge from the interpreter's launch form (ir::Argument over host buffers) to a
// runtime::Device: the kernel is compiled on the device (once per structural hash), the buffers
// are copied in, the launch runs, the buffers are copied back. Errors become diagnostics, so a
// test reports them like an interpreter's.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/interpreter.h"
#include "cubecc/runtime/device.h"

#include <string>

namespace cubecc::test {

/// The device named `name` ("interp", "vulkan"), opened once per process and kept open; throws
/// runtime::Error when it cannot be opened.
runtime::Device &shared_device(const std::string &name);

/// Runs `kernel` on `device` for `config.num_workgroups` (the device's own subgroup size applies).
std::vector<ir::Diagnostic> run_on_device(runtime::Device &device, const ir::Kernel &kernel,
                                          std::span<const ir::Argument> args,
                                          const ir::LaunchConfig &config);

} // namespace cubecc::test
