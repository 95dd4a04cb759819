//===- symbols.h - Entry points of a driver library opened with dlopen ------------------------===//
//
// The CUDA and HIP devices load their drivers at run time; a SymbolLoader fills function
// pointers by name (the first of several names that exists, for versioned entry points) and
// remembers the names it could not find, for one error message.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace cubecc::runtime {

class SymbolLoader {
public:
  explicit SymbolLoader(void *library) : library_(library) {}

  /// Sets `slot` to the first of `names` the library exports; records the first name if none.
  template <class F> void need(F &slot, std::initializer_list<const char *> names) {
    for (const char *name : names)
      if (void *p = dlsym(library_, name)) {
        slot = reinterpret_cast<F>(p);
        return;
      }
    missing_ += (missing_.empty() ? "" : ", ") + std::string(*names.begin());
  }
  /// The names not found, comma-separated (empty when every entry point was found).
  const std::string &missing() const { return missing_; }

private:
  void *library_;
  std::string missing_;
};

} // namespace cubecc::runtime
