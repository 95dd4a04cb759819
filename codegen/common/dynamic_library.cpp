//===- dynamic_library.cpp - Compiler libraries opened at run time ----------------------------===//
#include "common/dynamic_library.h"

#include <fmt/format.h>

#include <dlfcn.h>

namespace cubecc::codegen {

void *open_library(const char *soname, const char *built_path, std::string &error) {
  if (void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL))
    return h;
  const char *why = dlerror(); // reading it clears it: once
  std::string first = why ? why : "";
  if (built_path && *built_path)
    if (void *h = dlopen(built_path, RTLD_NOW | RTLD_LOCAL))
      return h;
  const char *second = built_path && *built_path ? dlerror() : nullptr;
  error = fmt::format("cannot load {}: {}", soname, second ? second : first.c_str());
  return nullptr;
}

void *SymbolTable::lookup(const char *name) {
  void *symbol = dlsym(library_, name);
  if (!symbol && error_.empty())
    error_ = fmt::format("{} has no symbol {}", library_name_, name);
  return symbol;
}

} // namespace cubecc::codegen
