/* A C application embedding cubecc through cubecc.h: opens the default device, loads the kernel
 * library given as argv[1] and, in strict mode, the bundle given as argv[2], runs scale_shift and
 * checks it against the host. Prints "compiles N"; exits 1 on any error or wrong result. */
#include <cubecc.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cubecc_status status_ = (call);                                                                \
    if (status_ != CUBECC_SUCCESS) {                                                               \
      fprintf(stderr, "scale_c: %s failed: %s: %s\n", #call, cubecc_status_name(status_),          \
              cubecc_last_error());                                                                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: scale_c <kernel library.so> [bundle.cubeenv]\n");
    return 2;
  }
  cubecc_runtime rt;
  CHECK(cubecc_runtime_open(NULL, &rt));
  if (argc == 3)
    CHECK(cubecc_runtime_use_environment(rt, argv[2], CUBECC_ENVIRONMENT_STRICT));
  cubecc_library library;
  CHECK(cubecc_library_open(argv[1], &library));
  cubecc_kernel kernel;
  CHECK(cubecc_library_kernel(rt, library, "scale_shift", NULL, &kernel));

  enum { N = 5000 };
  static float x[N], y[N];
  for (int i = 0; i < N; ++i)
    x[i] = (float)i * 0.5f;
  cubecc_buffer dx, dy;
  CHECK(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, N, &dx));
  CHECK(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, N, &dy));
  CHECK(cubecc_buffer_write(rt, dx, x, sizeof x));
  /* Tensor descriptors for the Tensor parameters (checked against the kernel's), then a and b. */
  const int64_t shape[1] = {N};
  const cubecc_tensor tx = {.buffer = dx, .dtype = CUBECC_DTYPE_F32, .rank = 1, .shape = shape};
  const cubecc_tensor ty = {.buffer = dy, .dtype = CUBECC_DTYPE_F32, .rank = 1, .shape = shape};
  cubecc_arg args[4] = {
      {.kind = CUBECC_ARG_TENSOR, .value.tensor = &tx},
      {.kind = CUBECC_ARG_TENSOR, .value.tensor = &ty},
      {.kind = CUBECC_ARG_SCALAR, .dtype = CUBECC_DTYPE_F32, .value.f = -2.0},
      {.kind = CUBECC_ARG_SCALAR, .dtype = CUBECC_DTYPE_F32, .value.f = 0.5},
  };
  const uint32_t grid[3] = {(N + 127) / 128, 1, 1};
  CHECK(cubecc_launch(rt, kernel, grid, args, 4));
  CHECK(cubecc_buffer_read(rt, dy, y, sizeof y));
  int wrong = 0;
  for (int i = 0; i < N; ++i) {
    volatile float product = -2.0f * x[i];
    wrong += y[i] != product + 0.5f;
  }
  cubecc_statistics stats;
  CHECK(cubecc_runtime_statistics(rt, &stats));
  cubecc_device_info info;
  CHECK(cubecc_runtime_device_info(rt, &info));
  printf("scale_shift (C API) on %s: %s, compiles %llu\n", info.backend, wrong ? "WRONG" : "ok",
         (unsigned long long)stats.compiles);
  cubecc_buffer_destroy(dx);
  cubecc_buffer_destroy(dy);
  cubecc_kernel_destroy(kernel);
  cubecc_library_destroy(library);
  cubecc_runtime_destroy(rt);
  return wrong ? 1 : 0;
}
