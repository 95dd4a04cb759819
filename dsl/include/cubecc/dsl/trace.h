//===- trace.h - Tracing a C++ kernel function into IR ---------------------------------------===//
//
//   void axpy(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a);
//   dsl::TraceResult r = dsl::trace<axpy>("axpy", {.workgroup = {256, 1, 1}});
//
// Tracing calls the function once with parameter handles; every DSL call appends IR. The result
// is verified; errors (the verifier's, or a TraceError) name the user's file and line.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl/detail.h"
#include "cubecc/ir/diagnostic.h"
#include "cubecc/ir/ir.h"

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace cubecc::dsl {

struct KernelOptions {
  std::array<uint32_t, 3> workgroup = {1, 1, 1};
  /// Names for the kernel's parameters in the IR (default p0, p1, ...).
  std::vector<std::string> parameter_names = {};
  /// The subgroup size the kernel's work assumes (a warp tile per 32 invocations, say), or 0
  /// for any. Recorded as the kernel's `subgroup_size` attribute: a target with other subgroups
  /// refuses the kernel instead of running it wrong.
  uint32_t subgroup_size = 0;
  /// Run the verifier on the traced kernel, so that its errors (a workgroup or shared array over
  /// the limits, a barrier under divergent control flow) come from the trace with the user's
  /// lines. The DSL builds well-formed IR by construction, so that is all verification can find
  /// here; a caller that verifies before compiling anyway may skip it (the runtime does: it
  /// verifies a kernel it must compile, and a kernel found in an environment was verified when
  /// the environment was built). Not part of a kernel's identity.
  bool verify = true;
};

struct TraceResult {
  std::unique_ptr<ir::Module> module; ///< null when tracing or verification failed
  std::vector<ir::Diagnostic> errors;
};

namespace detail {

template <class> struct IsKernelFunction : std::false_type {};
template <class... P> struct IsKernelFunction<void (*)(P...)> : std::true_type {};

/// A kernel parameter type: Tensor, Array or Scalar.
template <class P>
concept KernelParameter = requires(const std::string &name) {
  {std::decay_t<P>::dsl_make_parameter(name)};
};

template <class... P>
void call_with_parameters(void (*kernel)(P...), const std::vector<std::string> &names) {
  static_assert((KernelParameter<P> && ...),
                "cubecc: kernel parameters are dsl::Tensor<T, Rank>, dsl::Array<T> or "
                "dsl::Scalar<T> (a plain C++ value is comptime: make it a template parameter)");
  size_t next = 0;
  auto name = [&] {
    std::string n = next < names.size() ? names[next] : "p" + std::to_string(next);
    ++next;
    return n;
  };
  // A braced list evaluates left to right: parameters are added in the function's order.
  std::tuple<std::decay_t<P>...> parameters{std::decay_t<P>::dsl_make_parameter(name())...};
  std::apply(kernel, parameters);
}

/// Traces `body` as kernel `name` into `module`; appends problems to `errors` (and leaves no
/// kernel behind if tracing threw).
void trace_kernel_into(ir::Module &module, const std::string &name, const KernelOptions &options,
                       const std::function<void()> &body, std::vector<ir::Diagnostic> &errors);

} // namespace detail

/// Traces kernel function F into `module` as kernel `name`.
template <auto F>
void trace_into(ir::Module &module, const std::string &name, const KernelOptions &options,
                std::vector<ir::Diagnostic> &errors) {
  static_assert(detail::IsKernelFunction<decltype(F)>::value,
                "cubecc: trace<F> takes a kernel function (returning void)");
  if constexpr (detail::IsKernelFunction<decltype(F)>::value)
    detail::trace_kernel_into(
        module, name, options, [&] { detail::call_with_parameters(F, options.parameter_names); },
        errors);
}

/// Traces kernel function F into a new module.
template <auto F> TraceResult trace(const std::string &name, const KernelOptions &options = {});

namespace detail {
std::unique_ptr<ir::Module> new_module(const std::string &name);
}

template <auto F> TraceResult trace(const std::string &name, const KernelOptions &options) {
  TraceResult result;
  result.module = detail::new_module(name);
  trace_into<F>(*result.module, name, options, result.errors);
  if (!result.errors.empty())
    result.module.reset();
  return result;
}

} // namespace cubecc::dsl
