/*===- cpu_kernel_fixture.c - A hand-written CPU kernel object for the cpu device's tests
 *------===//
 *
 * Follows codegen/cpu_abi.h as the LLVM backend's objects do, so that the cpu device's loading
 * and launching are tested without LLVM. The kernel is cpu_device_test.cpp's kStagedAxpy:
 *
 *   kernel @staged_axpy(%x: buffer<f32, read>, %y: buffer<f32, readwrite>, %a: f32)
 *       workgroup(64, 1, 1): shared s[64] = x[i]; barrier; if i < y.size: y[i] = a * s[lid] + y[i]
 *
 * Its loads of x are checked as checked mode does: an index at or past x's count records a fault
 * (parameter 0, line 12, column 5) and reads 0. Shared memory that is not 64-byte aligned makes
 * the kernel write NaN, which the tests see. Built with -DSUBGROUP_SIZE=<lanes>.
 *
 *===-----------------------------------------------------------------------------------------===*/
#include "cubecc/codegen/cpu_abi.h"

#include <stdint.h>

__attribute__((visibility("default"))) const uint32_t cubecc_cpu_abi_version =
    CUBECC_CPU_ABI_VERSION;
__attribute__((visibility("default"))) const uint32_t cubecc_cpu_subgroup_size = SUBGROUP_SIZE;
__attribute__((visibility("default"))) const char cubecc_cpu_interface[] =
    "workgroup 64 1 1; shared 256; buffer<f32, read> binding 0; buffer<f32, readwrite> binding 1; "
    "f32 at 0 x4";

enum { kWorkgroupSize = 64 };

static float load_x(const cubecc_cpu_launch *launch, uint64_t index) {
  uint64_t count = launch->buffer_counts[0];
  if (index < count)
    return ((const float *)launch->buffers[0])[index];
  cubecc_cpu_fault *fault = launch->fault;
  uint32_t none = 0;
  if (fault &&
      __atomic_compare_exchange_n(&fault->kind, &none, 1u, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    fault->param = 0;
    fault->index = index;
    fault->count = count;
    fault->line = 12;
    fault->column = 5;
  }
  return 0.0f;
}

__attribute__((visibility("default"))) void cubecc_cpu_kernel(const cubecc_cpu_launch *launch,
                                                              uint64_t first_group,
                                                              uint64_t end_group, void *shared) {
  float *staged = (float *)shared;
  int aligned = ((uintptr_t)shared % 64) == 0;
  float a;
  __builtin_memcpy(&a, launch->params, sizeof a);
  float *y = (float *)launch->buffers[1];
  uint64_t n = launch->buffer_counts[1];
  for (uint64_t group = first_group; group < end_group; ++group) {
    uint64_t x_group = group % launch->num_workgroups[0]; /* y and z are 1 in the tests */
    for (uint64_t lid = 0; lid < kWorkgroupSize; ++lid)
      staged[lid] = load_x(launch, x_group * kWorkgroupSize + lid);
    for (uint64_t lid = 0; lid < kWorkgroupSize; ++lid) {
      uint64_t i = x_group * kWorkgroupSize + lid;
      if (i < n)
        y[i] = aligned ? a * staged[lid] + y[i] : __builtin_nanf("");
    }
  }
}
