//===- dynamic_library.h - Compiler libraries opened at run time (NVRTC, hipRTC, comgr) -------===//
//
// What the CUDA and HIP backends share about the compilers they load with dlopen instead of
// linking: opening a library by soname with the file found at build time as a fallback, and
// filling a table of entry points by name, remembering the first one missing.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <string>
#include <type_traits>

namespace cubecc::codegen {

/// dlopen (RTLD_NOW | RTLD_LOCAL) by `soname` (the loader's search path), then by `built_path`.
/// On failure returns null and sets `error` to "cannot load <soname>: <why>". The library is never
/// closed: the compilers stay loaded until exit.
void *open_library(const char *soname, const char *built_path, std::string &error);

/// Looks up entry points of one opened library; the first missing name is kept for the error.
class SymbolTable {
public:
  SymbolTable(void *library, const char *library_name)
      : library_(library), library_name_(library_name) {}
  template <class F> void get(F &slot, const char *name) {
    slot = reinterpret_cast<F>(lookup(name));
  }
  /// "<library> has no symbol <name>" for the first name not found; empty when all were found.
  const std::string &error() const { return error_; }

private:
  void *lookup(const char *name);
  void *library_;
  const char *library_name_;
  std::string error_;
};

} // namespace cubecc::codegen
