//===- registry.h - Registering kernels and their comptime configurations ------------------===//
//
// A kernel library registers each (kernel, configuration) once at namespace scope:
//
//   static const bool registered = dsl::register_kernel<matmul<16, 16>>(
//       "matmul_16x16", "tile_m=16,tile_n=16", {.workgroup = {16, 16, 1}});
//
// The registry is what the library's C symbol (kernel_library.h) exports.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl/trace.h"
#include "cubecc/dsl/tunable.h"

#include <string>
#include <vector>

namespace cubecc::dsl {

struct RegisteredKernel {
  std::string name;
  std::string configuration;
  KernelOptions options;
  void (*trace)(ir::Module &module, const RegisteredKernel &self,
                std::vector<ir::Diagnostic> &errors);
};

/// The kernels registered in this binary, in registration order.
const std::vector<RegisteredKernel> &registered_kernels();

namespace detail {
bool add_registered_kernel(RegisteredKernel kernel);
template <auto F>
void trace_registered(ir::Module &module, const RegisteredKernel &self,
                      std::vector<ir::Diagnostic> &errors) {
  trace_into<F>(module, self.name, self.options, errors);
}
} // namespace detail

/// Registers kernel function F under `name` with a description of its comptime configuration.
/// Returns true (for initializing a static).
template <auto F>
bool register_kernel(std::string name, std::string configuration = {}, KernelOptions options = {}) {
  return detail::add_registered_kernel(RegisteredKernel{
      std::move(name), std::move(configuration), std::move(options), &detail::trace_registered<F>});
}

/// Traces every registered kernel into one module; problems go to `errors`.
std::unique_ptr<ir::Module> trace_registered_kernels(std::vector<ir::Diagnostic> &errors);

} // namespace cubecc::dsl
