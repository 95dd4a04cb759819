//===- kernel_library_loader.cpp --------------------------------------------------------------===//
#include "cubecc/dsl/kernel_library_loader.h"

#include "cubecc/dsl/kernel_library.h"
#include "cubecc/ir/parser.h"

#include <fmt/format.h>

#include <dlfcn.h>

namespace cubecc::dsl {

std::unique_ptr<KernelLibrary> KernelLibrary::open(const std::string &path, std::string &error) {
  // A path without a slash would make dlopen search the library path instead of the file.
  std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  void *handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    error = fmt::format("{}: error: cannot load the kernel library: {}", path, dlerror());
    return nullptr;
  }
  using Entry = const cubecc_kernel_library *(*)();
  auto symbol = reinterpret_cast<Entry>(dlsym(handle, CUBECC_KERNEL_LIBRARY_SYMBOL));
  if (!symbol) {
    dlclose(handle);
    error = fmt::format("{}: error: not a cubecc kernel library: it does not export '{}' (link "
                        "it with cubecc::dsl and register kernels with dsl::register_kernel)",
                        path, CUBECC_KERNEL_LIBRARY_SYMBOL);
    return nullptr;
  }
  const cubecc_kernel_library *library = symbol();
  if (!library || library->abi_version != CUBECC_KERNEL_LIBRARY_ABI_VERSION) {
    dlclose(handle);
    error =
        fmt::format("{}: error: the kernel library uses ABI version {}, this cubecc reads {}; "
                    "rebuild the library against this cubecc",
                    path, library ? library->abi_version : 0, CUBECC_KERNEL_LIBRARY_ABI_VERSION);
    return nullptr;
  }
  std::unique_ptr<KernelLibrary> out(new KernelLibrary);
  out->path_ = path;
  out->handle_ = handle;
  out->library_ = library;
  for (uint32_t i = 0; i < library->count; ++i)
    out->entries_.push_back({library->kernels[i].name, library->kernels[i].configuration});
  return out;
}

KernelLibrary::~KernelLibrary() {
  if (handle_)
    dlclose(handle_);
}

bool KernelLibrary::trace(size_t index, ir::Module &module,
                          std::vector<ir::Diagnostic> &errors) const {
  const char *text = library_->trace_ir(static_cast<uint32_t>(index));
  if (!text) {
    errors.push_back({path_,
                      0,
                      0,
                      fmt::format("kernel '{}' failed to trace:\n{}", entries_[index].name,
                                  library_->last_error()),
                      {}});
    return false;
  }
  std::string buffer = fmt::format("{}:{}", path_, entries_[index].name);
  ir::ParseResult parsed = ir::parse_module(text, buffer);
  if (!parsed.module) {
    for (ir::Diagnostic &d : parsed.errors)
      d.notes.push_back("the kernel library produced IR this cubecc cannot read; rebuild it "
                        "against this cubecc");
    errors.insert(errors.end(), parsed.errors.begin(), parsed.errors.end());
    return false;
  }
  for (const auto &k : parsed.module->kernels()) {
    if (module.find_kernel(k->name())) {
      errors.push_back(
          {path_,
           0,
           0,
           fmt::format("two kernels are named '{}'; kernel names must be unique", k->name()),
           {}});
      return false;
    }
  }
  module.adopt_kernels(std::move(*parsed.module));
  return true;
}

} // namespace cubecc::dsl
