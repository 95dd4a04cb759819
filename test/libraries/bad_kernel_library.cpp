//===- bad_kernel_library.cpp - Kernel libraries with one defect each, for the loader's tests
//---===//
//
// Built once per defect (CUBECC_BAD_LIBRARY, see test/CMakeLists.txt) into
// libcubecc_bad_library_<defect>.so; test/lit/tools/cubecc-bad-kernel-library.test runs cubecc
// on each. Every table is written by hand, as a library built by another compiler could be.
//
//===----------------------------------------------------------------------------------------===//
#include "cubecc/dsl/kernel_library.h"

#include <cstdint>
#include <stdexcept>
#include <unistd.h>

namespace {

#define NULL_ENTRIES 1
#define NULL_NAME 2
#define DANGLING_ENTRIES 3
#define UNLISTED_KERNEL 4
#define THROWING_TRACE 5
#define THROWING_INITIALIZER 6
#define NULL_TRACE 7
#define HUGE_BUFFER 8          // a tunable whose launch describes a buffer of 2^62 + 1 floats
#define BAD_ELEMENT_TYPES 9    // a tunable whose element types end with a comma ("f32,")
#define HANGING_INITIALIZER 10 // a global constructor that never returns
#define TUNABLE (CUBECC_BAD_LIBRARY == HUGE_BUFFER || CUBECC_BAD_LIBRARY == BAD_ELEMENT_TYPES)

#if CUBECC_BAD_LIBRARY == THROWING_INITIALIZER
// Runs inside dlopen: the exception has no handler to reach and terminates the process.
const int initialized = []() -> int { throw std::runtime_error("static initializer failed"); }();
#endif

#if CUBECC_BAD_LIBRARY == HANGING_INITIALIZER
// Runs inside dlopen and never returns (a constructor waiting for a server that is not there).
const int initialized = []() -> int {
  while (true)
    pause();
}();
#endif

#if CUBECC_BAD_LIBRARY == NULL_NAME
const cubecc_kernel_entry kernels[] = {{nullptr, "none"}};
#else
const cubecc_kernel_entry kernels[] = {{"listed", "none"}};
#endif

const char *trace_ir(uint32_t) {
#if CUBECC_BAD_LIBRARY == THROWING_TRACE
  throw std::runtime_error("tracing failed on purpose");
#elif CUBECC_BAD_LIBRARY == UNLISTED_KERNEL
  return "module @m {\n  kernel @unlisted() workgroup(1, 1, 1) {\n    return\n  }\n}\n";
#elif TUNABLE
  return "module @m {\n  kernel @listed(%y: buffer<f32, readwrite>) workgroup(64, 1, 1) {\n"
         "    return\n  }\n}\n";
#else
  return "module @m {\n  kernel @listed() workgroup(1, 1, 1) {\n    return\n  }\n}\n";
#endif
}

#if TUNABLE
const char *variants[] = {"listed"};
const char *dims[] = {"n"};
const uint64_t anchors[] = {256};
#if CUBECC_BAD_LIBRARY == HUGE_BUFFER
const cubecc_tunable_entry tunables[] = {{"huge", 1, variants, 1, dims, 1, anchors, "f32", 0.0}};
#else
const cubecc_tunable_entry tunables[] = {{"typed", 1, variants, 1, dims, 1, anchors, "f32,", 0.0}};
#endif
int describe(uint32_t, uint32_t, const uint64_t *, cubecc_tunable_launch *launch) {
  launch->grid[0] = launch->grid[1] = launch->grid[2] = 1;
  launch->buffer_count = 1;
  launch->value_count = 0;
  launch->buffer_elements[0] =
      CUBECC_BAD_LIBRARY == HUGE_BUFFER ? (uint64_t{1} << 62) + 1 : 256; // times 4 bytes wraps
  return 1;
}
#endif

const char *last_error() {
  return "no reason";
}

const cubecc_kernel_entry *entries() {
#if CUBECC_BAD_LIBRARY == NULL_ENTRIES
  return nullptr;
#elif CUBECC_BAD_LIBRARY == DANGLING_ENTRIES
  return reinterpret_cast<const cubecc_kernel_entry *>(uintptr_t{8});
#else
  return kernels;
#endif
}

} // namespace

extern "C" __attribute__((visibility("default"))) const cubecc_kernel_library *
cubecc_kernel_library_v1(void) {
#if TUNABLE
  static const cubecc_kernel_library library = {2,          1, entries(), trace_ir,
                                                last_error, 1, tunables,  describe};
#else
  static const cubecc_kernel_library library = {
      1,          1, entries(), CUBECC_BAD_LIBRARY == NULL_TRACE ? nullptr : trace_ir,
      last_error, 0, nullptr,   nullptr};
#endif
  return &library;
}
