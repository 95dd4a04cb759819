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

/// The device named `name` ("interp", "vulkan", "cpu", "cuda", "hip"), opened once per process and
/// kept open; throws runtime::Error when it cannot be opened (the same error again on every call).
runtime::Device &shared_device(const std::string &name);

/// Why shared_device(name) cannot be opened, or "" when it can. For "cpu": also why it cannot
/// compile (a cubecc built without the LLVM backend).
std::string why_device_absent(const std::string &name);

/// Devices that may be missing on a machine (GPUs: "cuda", "hip"; "cpu" only in a cubecc built
/// without the LLVM backend): their tests are skipped there. "interp", "vulkan" and, with the
/// LLVM backend, "cpu" are not optional: a test fails when they do not open.
bool device_is_optional(const std::string &name);

/// In a test body or SetUp(): skips the test when `name` is an optional device that does not
/// open, fails it when a required one does not.
#define CUBECC_SKIP_IF_DEVICE_ABSENT(name)                                                         \
  do {                                                                                             \
    std::string why_absent_ = ::cubecc::test::why_device_absent(name);                             \
    if (!why_absent_.empty()) {                                                                    \
      if (::cubecc::test::device_is_optional(name))                                                \
        GTEST_SKIP() << why_absent_;                                                               \
      FAIL() << "cannot open the " << (name) << " device: " << why_absent_;                        \
    }                                                                                              \
  } while (false)

/// Runs `kernel` on `device` for `config.num_workgroups` (the device's own subgroup size applies).
std::vector<ir::Diagnostic> run_on_device(runtime::Device &device, const ir::Kernel &kernel,
                                          std::span<const ir::Argument> args,
                                          const ir::LaunchConfig &config);

} // namespace cubecc::test
