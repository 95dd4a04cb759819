//===- registry.cpp - Registered kernels and the kernel library's C symbol -------------------===//
#include "cubecc/dsl/registry.h"

#include "cubecc/dsl/kernel_library.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/printer.h"

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

} // namespace

const std::vector<RegisteredKernel> &registered_kernels() {
  return registry();
}

bool detail::add_registered_kernel(RegisteredKernel kernel) {
  registry().push_back(std::move(kernel));
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
  static const cubecc_kernel_library library = {
      CUBECC_KERNEL_LIBRARY_ABI_VERSION, static_cast<uint32_t>(entries.size()), entries.data(),
      cubecc::dsl::trace_ir, cubecc::dsl::last_error};
  return &library;
}
