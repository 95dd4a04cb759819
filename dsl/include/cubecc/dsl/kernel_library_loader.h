//===- kernel_library_loader.h - Reading the kernels of a kernel library (.so) ---------------===//
#pragma once

#include "cubecc/ir/diagnostic.h"
#include "cubecc/ir/ir.h"

#include <memory>
#include <string>
#include <vector>

struct cubecc_kernel_library;

namespace cubecc::dsl {

/// A kernel library opened with dlopen: its registered kernels, traced on request.
class KernelLibrary {
public:
  /// Opens `path`; on failure returns null and sets `error` (naming the file and what to do).
  static std::unique_ptr<KernelLibrary> open(const std::string &path, std::string &error);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;

  struct Entry {
    std::string name;
    std::string configuration;
  };
  const std::vector<Entry> &kernels() const { return entries_; }

  /// Traces kernel `index` and parses it into `module` (appending the kernel). Returns false and
  /// appends diagnostics on failure.
  bool trace(size_t index, ir::Module &module, std::vector<ir::Diagnostic> &errors) const;

private:
  KernelLibrary() = default;
  std::string path_;
  void *handle_ = nullptr;
  const cubecc_kernel_library *library_ = nullptr;
  std::vector<Entry> entries_;
};

} // namespace cubecc::dsl
