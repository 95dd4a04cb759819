/*===- kernel_library_versions.c - A hand-written kernel library of any ABI version ----------===*
 *
 * For autotune_test.cpp: the table a library built against an older or newer cubecc would
 * export. CUBECC_TEST_LIBRARY_ABI (read at each call) sets abi_version (default 1: no tunables);
 * with 2 the table lists a tunable whose variant names a kernel the library does not have.
 *
 *===----------------------------------------------------------------------------------------===*/
#include "cubecc/dsl/kernel_library.h"

#include <stdlib.h>

static const cubecc_kernel_entry kernels[] = {{"empty", "none"}};

static const char *trace_ir(uint32_t index) {
  return index == 0 ? "module @m {\n  kernel @empty() workgroup(1, 1, 1) {\n    return\n  }\n}\n"
                    : 0;
}

static const char *last_error(void) {
  return "no such kernel";
}

static int describe_tunable(uint32_t tunable, uint32_t variant, const uint64_t *shape,
                            cubecc_tunable_launch *launch) {
  return -1;
}

static const char *const variants[] = {"missing"};
static const char *const dimensions[] = {"n"};
static const cubecc_tunable_entry tunables[] = {
    {"broken", 1, variants, 1, dimensions, 0, 0, "f32", 0.0}};

__attribute__((visibility("default"))) const cubecc_kernel_library *cubecc_kernel_library_v1(void) {
  static cubecc_kernel_library library = {1,          1, kernels,  trace_ir,
                                          last_error, 1, tunables, describe_tunable};
  const char *version = getenv("CUBECC_TEST_LIBRARY_ABI");
  library.abi_version = version ? (uint32_t)atoi(version) : 1;
  return &library;
}
