//===- registry.cpp - Registered kernels and tunables, and the kernel library's C symbol -----===//
#include "cubecc/dsl/registry.h"

#include "cubecc/dsl/kernel_library.h"
#include "cubecc/dsl/tunable.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/printer.h"

#include <fmt/format.h>

namespace cubecc::dsl {
namespace {

std::vector<RegisteredKernel> &registry() {
  static std::vector<RegisteredKernel> kernels;
  return kernels;
}

thread_local std::string last_text;
thread_local std::string last_error_text;

const char *trace_ir(uint32_t index) {
  try {
    if (index >= registry().size()) {
      last_error_text = "kernel index out of range";
      return nullptr;
    }
    const RegisteredKernel &k = registry()[index];
    ir::Module module("kernels");
    std::vector<ir::Diagnostic> errors;
    k.trace(module, k, errors);
    if (!errors.empty()) {
      last_error_text = ir::to_string(errors);
      return nullptr;
    }
    last_text = ir::to_string(module);
    return last_text.c_str();
  } catch (const std::exception &e) {
    last_error_text = std::string("internal error while tracing: ") + e.what();
    return nullptr;
  }
}

const char *last_error() {
  return last_error_text.c_str();
}

std::vector<RegisteredTunable> &tunable_registry() {
  static std::vector<RegisteredTunable> tunables;
  return tunables;
}

int describe_tunable(uint32_t tunable, uint32_t variant, const uint64_t *shape,
                     cubecc_tunable_launch *out) {
  try {
    if (tunable >= tunable_registry().size()) {
      last_error_text = "tunable index out of range";
      return -1;
    }
    const RegisteredTunable &t = tunable_registry()[tunable];
    if (variant >= t.variants.size() || !shape || !out) {
      last_error_text = fmt::format("tunable '{}': variant index out of range", t.name);
      return -1;
    }
    if (!t.describe) {
      last_error_text = fmt::format("tunable '{}' has no describe function", t.name);
      return -1;
    }
    TunableLaunch launch;
    if (!t.describe(variant, std::span<const uint64_t>(shape, t.dimensions.size()), launch))
      return 0;
    if (launch.buffer_elements.size() > CUBECC_TUNABLE_MAX_BUFFERS ||
        launch.values.size() > CUBECC_TUNABLE_MAX_VALUES) {
      last_error_text = fmt::format(
          "tunable '{}': variant '{}' describes {} buffers and {} values (at most {} and {})",
          t.name, t.variants[variant], launch.buffer_elements.size(), launch.values.size(),
          CUBECC_TUNABLE_MAX_BUFFERS, CUBECC_TUNABLE_MAX_VALUES);
      return -1;
    }
    *out = cubecc_tunable_launch{};
    for (int d = 0; d < 3; ++d)
      out->grid[d] = launch.grid[d];
    out->buffer_count = static_cast<uint32_t>(launch.buffer_elements.size());
    for (size_t b = 0; b < launch.buffer_elements.size(); ++b)
      out->buffer_elements[b] = launch.buffer_elements[b];
    out->value_count = static_cast<uint32_t>(launch.values.size());
    for (size_t v = 0; v < launch.values.size(); ++v) {
      const LaunchValue &value = launch.values[v];
      cubecc_launch_value &slot = out->values[v];
      switch (value.kind) {
      case LaunchValue::Int:
        slot.kind = CUBECC_LAUNCH_VALUE_INT;
        slot.value.i = value.i;
        break;
      case LaunchValue::UInt:
        slot.kind = CUBECC_LAUNCH_VALUE_UINT;
        slot.value.u = value.u;
        break;
      case LaunchValue::Float:
        slot.kind = CUBECC_LAUNCH_VALUE_FLOAT;
        slot.value.f = value.f;
        break;
      }
    }
    return 1;
  } catch (const std::exception &e) {
    last_error_text = std::string("internal error while describing a tunable: ") + e.what();
    return -1;
  }
}

} // namespace

const std::vector<RegisteredKernel> &registered_kernels() {
  return registry();
}

bool detail::add_registered_kernel(RegisteredKernel kernel) {
  registry().push_back(std::move(kernel));
  return true;
}

const std::vector<RegisteredTunable> &registered_tunables() {
  return tunable_registry();
}

bool register_tunable(RegisteredTunable tunable) {
  tunable_registry().push_back(std::move(tunable));
  return true;
}

std::unique_ptr<ir::Module> trace_registered_kernels(std::vector<ir::Diagnostic> &errors) {
  auto module = std::make_unique<ir::Module>("kernels");
  for (const RegisteredKernel &k : registry())
    k.trace(*module, k, errors);
  return module;
}

} // namespace cubecc::dsl

extern "C" __attribute__((visibility("default"))) const cubecc_kernel_library *
cubecc_kernel_library_v1(void) {
  // Built on first use, after every static registration of the library has run.
  static const std::vector<cubecc_kernel_entry> entries = [] {
    std::vector<cubecc_kernel_entry> out;
    for (const cubecc::dsl::RegisteredKernel &k : cubecc::dsl::registered_kernels())
      out.push_back({k.name.c_str(), k.configuration.c_str()});
    return out;
  }();
  // The tunables' C views point into the registry's strings and into these arrays.
  struct TunableArrays {
    std::vector<const char *> variants, dimensions;
    std::vector<uint64_t> anchors;
  };
  static const std::vector<TunableArrays> arrays = [] {
    std::vector<TunableArrays> out;
    for (const cubecc::dsl::RegisteredTunable &t : cubecc::dsl::registered_tunables()) {
      TunableArrays &a = out.emplace_back();
      for (const std::string &v : t.variants)
        a.variants.push_back(v.c_str());
      for (const std::string &d : t.dimensions)
        a.dimensions.push_back(d.c_str());
      // A row of the wrong length is padded or cut to the dimensions; the loader cannot see it,
      // so the registry keeps the table rectangular (docs/autotune.md).
      for (const std::vector<uint64_t> &anchor : t.anchors)
        for (size_t d = 0; d < t.dimensions.size(); ++d)
          a.anchors.push_back(d < anchor.size() ? anchor[d] : 0);
    }
    return out;
  }();
  static const std::vector<cubecc_tunable_entry> tunables = [] {
    std::vector<cubecc_tunable_entry> out;
    const auto &registered = cubecc::dsl::registered_tunables();
    for (size_t i = 0; i < registered.size(); ++i) {
      const cubecc::dsl::RegisteredTunable &t = registered[i];
      const TunableArrays &a = arrays[i];
      out.push_back({t.name.c_str(), static_cast<uint32_t>(a.variants.size()), a.variants.data(),
                     static_cast<uint32_t>(a.dimensions.size()), a.dimensions.data(),
                     static_cast<uint32_t>(t.anchors.size()), a.anchors.data(),
                     t.element_types.c_str(), t.relative_tolerance});
    }
    return out;
  }();
  static const cubecc_kernel_library library = {CUBECC_KERNEL_LIBRARY_ABI_VERSION,
                                                static_cast<uint32_t>(entries.size()),
                                                entries.data(),
                                                cubecc::dsl::trace_ir,
                                                cubecc::dsl::last_error,
                                                static_cast<uint32_t>(tunables.size()),
                                                tunables.data(),
                                                cubecc::dsl::describe_tunable};
  return &library;
}
