/* A C application that ships only libcubecc and a bundle: no kernel library, no DSL headers.
 *
 *   named <bundle of libcubecc_examples.so> [device]
 *
 * Loads the examples' kernels axpy, reduce_sum and histogram_256 by name from the bundle
 * (cubecc_environment_kernel: library "cubecc_examples", the configurations they were registered
 * with), runs each and compares it with a host reference, checks that nothing was compiled and
 * that all three came from the bundle, and that asking for a kernel the bundle lacks names what
 * it has. Prints "named kernels: ok, compiles 0"; exits 1 on any error or wrong result. Built
 * against the installed package (test/package/run.sh) and in the tree (test/capi).
 */
#include <cubecc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cubecc_status status_ = (call);                                                                \
    if (status_ != CUBECC_SUCCESS) {                                                               \
      fprintf(stderr, "named: %s failed: %s: %s\n", #call, cubecc_status_name(status_),            \
              cubecc_last_error());                                                                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static cubecc_arg buffer_arg(cubecc_buffer b) {
  cubecc_arg a;
  memset(&a, 0, sizeof a);
  a.kind = CUBECC_ARG_BUFFER;
  a.buffer = b;
  return a;
}

static cubecc_arg u32_arg(uint32_t v) {
  cubecc_arg a;
  memset(&a, 0, sizeof a);
  a.kind = CUBECC_ARG_SCALAR;
  a.dtype = CUBECC_DTYPE_U32;
  a.value.u = v;
  return a;
}

static cubecc_arg f32_arg(float v) {
  cubecc_arg a;
  memset(&a, 0, sizeof a);
  a.kind = CUBECC_ARG_SCALAR;
  a.dtype = CUBECC_DTYPE_F32;
  a.value.f = v;
  return a;
}

static const char *kLibrary = "cubecc_examples";

static int run_axpy(cubecc_runtime rt) {
  enum { N = 5000 };
  static float x[N], y[N], got[N];
  const float a = 1.5f;
  for (int i = 0; i < N; ++i) {
    x[i] = (float)(i % 97) * 0.25f;
    y[i] = (float)(i % 31) - 7.0f;
  }
  cubecc_kernel axpy;
  CHECK(cubecc_environment_kernel(rt, kLibrary, "axpy", "width=1", &axpy));
  cubecc_buffer dx, dy;
  CHECK(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, N, &dx));
  CHECK(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, N, &dy));
  CHECK(cubecc_buffer_write(rt, dx, x, sizeof x));
  CHECK(cubecc_buffer_write(rt, dy, y, sizeof y));
  cubecc_arg args[7] = {buffer_arg(dx), u32_arg(N), u32_arg(1), buffer_arg(dy),
                        u32_arg(N),     u32_arg(1), f32_arg(a)};
  uint32_t grid[3] = {(N + 255) / 256, 1, 1};
  CHECK(cubecc_launch(rt, axpy, grid, args, 7));
  CHECK(cubecc_buffer_read(rt, dy, got, sizeof got));
  int failed = 0;
  for (int i = 0; i < N && !failed; ++i) {
    /* One rounding or two (fused or not): within 2 ulp of the magnitude. */
    double exact = (double)a * x[i] + y[i];
    double magnitude = fabs((double)a * x[i]) + fabs((double)y[i]);
    if (fabs(got[i] - exact) > 2.0 * 0x1p-24 * magnitude) {
      fprintf(stderr, "named: axpy[%d] = %.9g, expected %.9g\n", i, got[i], exact);
      failed = 1;
    }
  }
  cubecc_buffer_destroy(dx);
  cubecc_buffer_destroy(dy);
  cubecc_kernel_destroy(axpy);
  return failed;
}

static int run_reduce_sum(cubecc_runtime rt) {
  enum { M = 1 << 16, GROUPS = 64 };
  static float in[M];
  double exact = 0;
  for (int i = 0; i < M; ++i) {
    in[i] = (float)(i % 13) - 6.0f + (float)(i % 5); /* integers: the sum is exact in f32 */
    exact += in[i];
  }
  cubecc_kernel reduce;
  CHECK(cubecc_environment_kernel(rt, kLibrary, "reduce_sum", "op=sum,workgroup=256", &reduce));
  cubecc_buffer din, partial, total;
  CHECK(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, M, &din));
  CHECK(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, GROUPS, &partial));
  CHECK(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, 1, &total));
  CHECK(cubecc_buffer_write(rt, din, in, sizeof in));
  cubecc_arg first[6] = {buffer_arg(din),     u32_arg(M),      u32_arg(1),
                         buffer_arg(partial), u32_arg(GROUPS), u32_arg(1)};
  cubecc_arg second[6] = {buffer_arg(partial), u32_arg(GROUPS), u32_arg(1),
                          buffer_arg(total),   u32_arg(1),      u32_arg(1)};
  uint32_t groups[3] = {GROUPS, 1, 1}, one[3] = {1, 1, 1};
  CHECK(cubecc_launch(rt, reduce, groups, first, 6));
  CHECK(cubecc_launch(rt, reduce, one, second, 6));
  float sum = 0;
  CHECK(cubecc_buffer_read(rt, total, &sum, sizeof sum));
  int failed = (double)sum != exact;
  if (failed)
    fprintf(stderr, "named: reduce_sum: %.9g, expected exactly %.9g\n", sum, exact);
  cubecc_buffer_destroy(din);
  cubecc_buffer_destroy(partial);
  cubecc_buffer_destroy(total);
  cubecc_kernel_destroy(reduce);
  return failed;
}

static int run_histogram(cubecc_runtime rt) {
  enum { M = 10000, BINS = 256 };
  static uint32_t values[M], hist[BINS], expected[BINS];
  memset(expected, 0, sizeof expected);
  memset(hist, 0, sizeof hist);
  for (uint32_t i = 0; i < M; ++i) {
    values[i] = (i * 2654435761u) >> 23; /* 0..511: half of them out of range */
    if (values[i] < BINS)
      ++expected[values[i]];
  }
  cubecc_kernel histogram;
  CHECK(cubecc_environment_kernel(rt, kLibrary, "histogram_256", "bins=256,workgroup=256",
                                  &histogram));
  cubecc_buffer dvalues, dhist;
  CHECK(cubecc_buffer_allocate(rt, CUBECC_DTYPE_U32, M, &dvalues));
  CHECK(cubecc_buffer_allocate(rt, CUBECC_DTYPE_U32, BINS, &dhist));
  CHECK(cubecc_buffer_write(rt, dvalues, values, sizeof values));
  CHECK(cubecc_buffer_write(rt, dhist, hist, sizeof hist));
  cubecc_arg args[6] = {buffer_arg(dvalues), u32_arg(M),    u32_arg(1),
                        buffer_arg(dhist),   u32_arg(BINS), u32_arg(1)};
  uint32_t grid[3] = {8, 1, 1};
  CHECK(cubecc_launch(rt, histogram, grid, args, 6));
  CHECK(cubecc_buffer_read(rt, dhist, hist, sizeof hist));
  int failed = memcmp(hist, expected, sizeof hist) != 0;
  if (failed)
    fprintf(stderr, "named: histogram_256 differs from the host's counts\n");
  cubecc_buffer_destroy(dvalues);
  cubecc_buffer_destroy(dhist);
  cubecc_kernel_destroy(histogram);
  return failed;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: named <bundle.cubeenv> [device]\n");
    return 2;
  }
  cubecc_runtime rt;
  CHECK(cubecc_runtime_open(argc == 3 ? argv[2] : NULL, &rt));
  CHECK(cubecc_runtime_use_environment(rt, argv[1], CUBECC_ENVIRONMENT_STRICT));
  int failed = run_axpy(rt) | run_reduce_sum(rt) | run_histogram(rt);

  /* A kernel the bundle lacks: NOT_FOUND, naming what the bundle has for the library. */
  cubecc_kernel missing = NULL;
  cubecc_status status = cubecc_environment_kernel(rt, kLibrary, "no_such_kernel", NULL, &missing);
  if (status != CUBECC_ERROR_NOT_FOUND ||
      !strstr(cubecc_last_error(), "'axpy' (configuration 'width=1'")) {
    fprintf(stderr, "named: a missing kernel gave %s: %s\n", cubecc_status_name(status),
            cubecc_last_error());
    failed = 1;
  }

  cubecc_statistics statistics;
  CHECK(cubecc_runtime_statistics(rt, &statistics));
  if (statistics.environment_hits != 3) {
    fprintf(stderr, "named: %llu kernels from the bundle, expected 3\n",
            (unsigned long long)statistics.environment_hits);
    failed = 1;
  }
  cubecc_device_info info;
  CHECK(cubecc_runtime_device_info(rt, &info));
  printf("named kernels on %s: %s, compiles %llu\n", info.backend, failed ? "FAILED" : "ok",
         (unsigned long long)statistics.compiles);
  cubecc_runtime_destroy(rt);
  return failed || statistics.compiles != 0;
}
