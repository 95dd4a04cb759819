/*===- capi_test.c - The C API from a C program, as an embedding framework uses it -------------===
 *
 *   capi_test <device> <kernel library .so> <environment bundle> <foreign bundle> <scratch dir>
 *
 * (the foreign bundle holds the library's kernels for another device only: every lookup misses)
 *
 * Opens a runtime on <device> (vulkan or interp), uses the bundle that `cubecc env build` made of
 * the example kernel library in strict mode and checks that every kernel came from it (no
 * compile), launches axpy, reduce_sum and histogram_256 by name and compares them with host
 * references, adopts memory the test owns (interp: host memory; vulkan: a VkBuffer the test makes
 * on the runtime's own VkDevice and reads through its own mapping), round-trips a buffer through
 * DLPack, and checks the error paths: each must return its status and a last-error message with
 * the key words. Any failure prints where and why and exits 1.
 *
 *===-------------------------------------------------------------------------------------------===*/
#include "cubecc.h"
#include "vulkan_test_buffer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(condition)                                                                           \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__,            \
              #condition, cubecc_last_error());                                                    \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

/* Calls `call`, which must succeed; on failure reports it and stops the test (later steps depend
 * on it). */
#define MUST(call)                                                                                 \
  do {                                                                                             \
    cubecc_status status_ = (call);                                                                \
    if (status_ != CUBECC_SUCCESS) {                                                               \
      fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call,                    \
              cubecc_status_name(status_), cubecc_last_error());                                   \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* `call` must fail with `expected`, and the last error must contain `words`. */
static void expect_error(const char *file, int line, const char *text, cubecc_status got,
                         cubecc_status expected, const char *words) {
  const char *message = cubecc_last_error();
  if (got != expected || !strstr(message, words)) {
    fprintf(stderr,
            "%s:%d: %s\n  returned %s, expected %s\n  last error: \"%s\"\n  expected it to "
            "contain: \"%s\"\n",
            file, line, text, cubecc_status_name(got), cubecc_status_name(expected), message,
            words);
    ++failures;
  }
}
#define EXPECT_ERROR(call, expected, words)                                                        \
  expect_error(__FILE__, __LINE__, #call, (call), (expected), (words))

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
static cubecc_arg i32_arg(int32_t v) {
  cubecc_arg a;
  memset(&a, 0, sizeof a);
  a.kind = CUBECC_ARG_SCALAR;
  a.dtype = CUBECC_DTYPE_I32;
  a.value.i = v;
  return a;
}

static int released = 0;
static void count_release(void *user_data) {
  ++released;
  CHECK(user_data == &released);
}

/* Launches axpy: y = a * x + y over `n` elements (a DSL Tensor is buffer, size, stride). */
static cubecc_status launch_axpy(cubecc_runtime rt, cubecc_kernel axpy, cubecc_buffer x,
                                 cubecc_buffer y, uint32_t n, float a) {
  cubecc_arg args[7] = {buffer_arg(x), u32_arg(n), u32_arg(1), buffer_arg(y),
                        u32_arg(n),    u32_arg(1), f32_arg(a)};
  uint32_t grid[3] = {(n + 255) / 256, 1, 1};
  return cubecc_launch(rt, axpy, grid, args, 7);
}

/* |got - (a x + y)| within 2 ulp of the magnitude: the device may or may not fuse the multiply
 * and add (one rounding or two). */
static int axpy_close(float got, float a, float x, float y) {
  double exact = (double)a * x + y;
  double magnitude = fabs((double)a * x) + fabs((double)y);
  return fabs(got - exact) <= 2.0 * 0x1p-24 * magnitude;
}

static void write_file(const char *path, const void *bytes, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(bytes, 1, size, f) != size) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
  fclose(f);
}

/* A copy of the first half of `path` at `out` (a truncated bundle). */
static void write_truncated_copy(const char *path, const char *out) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot read the bundle %s\n", path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *bytes = malloc((size_t)size);
  if (!bytes || fread(bytes, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "cannot read the bundle %s\n", path);
    exit(1);
  }
  fclose(f);
  write_file(out, bytes, (size_t)size / 2);
  free(bytes);
}

/* What a DLPack consumer wraps around an exported tensor, to see that its deleter runs once. */
static int wrapper_deletes = 0;
typedef struct wrapped_tensor {
  DLManagedTensor outer;
  DLManagedTensor *inner;
} wrapped_tensor;
static void delete_wrapped(DLManagedTensor *self) {
  wrapped_tensor *w = (wrapped_tensor *)self->manager_ctx;
  ++wrapper_deletes;
  w->inner->deleter(w->inner);
  free(w);
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: capi_test <device> <kernel library> <bundle> <foreign bundle> "
                    "<scratch dir>\n");
    return 2;
  }
  const char *device = argv[1], *library_path = argv[2], *bundle = argv[3], *foreign = argv[4],
             *scratch = argv[5];
  int vulkan = strcmp(device, "vulkan") == 0;

  /*===- Before any runtime: names, NULL handles, unknown devices ----------------------------===*/
  CHECK(strlen(cubecc_version()) > 0);
  CHECK(strcmp(cubecc_status_name(CUBECC_SUCCESS), "CUBECC_SUCCESS") == 0);
  CHECK(strcmp(cubecc_status_name(CUBECC_ERROR_ENVIRONMENT), "CUBECC_ERROR_ENVIRONMENT") == 0);
  CHECK(strcmp(cubecc_dtype_name(CUBECC_DTYPE_BF16), "bf16") == 0);
  CHECK(cubecc_dtype_size(CUBECC_DTYPE_F64) == 8);
  CHECK(strcmp(cubecc_dtype_name(CUBECC_DTYPE_E4M3), "e4m3") == 0);
  CHECK(strcmp(cubecc_dtype_name(CUBECC_DTYPE_UE8M0), "ue8m0") == 0);
  CHECK(cubecc_dtype_size(CUBECC_DTYPE_E2M1) == 1); /* one e2m1 per byte */
  EXPECT_ERROR(cubecc_runtime_open(device, NULL), CUBECC_ERROR_INVALID_ARGUMENT,
               "the output runtime pointer is NULL");
  cubecc_runtime none = NULL;
  EXPECT_ERROR(cubecc_runtime_open("nosuch", &none), CUBECC_ERROR_NO_DEVICE,
               "unknown device 'nosuch'");
  CHECK(none == NULL);
  cubecc_buffer nobuffer = NULL;
  EXPECT_ERROR(cubecc_buffer_allocate(NULL, CUBECC_DTYPE_F32, 4, &nobuffer),
               CUBECC_ERROR_INVALID_ARGUMENT, "cubecc_buffer_allocate: the runtime is NULL");
  EXPECT_ERROR(cubecc_synchronize(NULL), CUBECC_ERROR_INVALID_ARGUMENT, "the runtime is NULL");
  size_t count = 0;
  EXPECT_ERROR(cubecc_buffer_count(NULL, &count), CUBECC_ERROR_INVALID_ARGUMENT,
               "the buffer is NULL");
  cubecc_runtime_destroy(NULL); /* accepted, does nothing */
  cubecc_buffer_destroy(NULL);
  cubecc_library_destroy(NULL);
  cubecc_kernel_destroy(NULL);

  /*===- The runtime -----------------------------------------------------------------------===*/
  cubecc_runtime rt = NULL;
  MUST(cubecc_runtime_open(device, &rt));
  CHECK(strcmp(cubecc_last_error(), "") == 0); /* success clears the message */
  cubecc_device_info info;
  MUST(cubecc_runtime_device_info(rt, &info));
  CHECK(strcmp(info.backend, device) == 0);
  printf("device: %s (%s)\n", info.name, info.backend);

  /*===- Environments: bad and corrupt bundles in strict mode, then the real one ------------===*/
  char missing[4096], corrupt[4096], truncated[4096];
  snprintf(missing, sizeof missing, "%s/no-such-bundle.cubeenv", scratch);
  snprintf(corrupt, sizeof corrupt, "%s/corrupt.cubeenv", scratch);
  snprintf(truncated, sizeof truncated, "%s/truncated.cubeenv", scratch);
  write_file(corrupt, "this is not a cubecc bundle, just text\n", 39);
  write_truncated_copy(bundle, truncated);
  EXPECT_ERROR(cubecc_runtime_use_environment(rt, missing, CUBECC_ENVIRONMENT_STRICT),
               CUBECC_ERROR_ENVIRONMENT, "no-such-bundle.cubeenv");
  EXPECT_ERROR(cubecc_runtime_use_environment(rt, corrupt, CUBECC_ENVIRONMENT_STRICT),
               CUBECC_ERROR_ENVIRONMENT, "corrupt.cubeenv");
  EXPECT_ERROR(cubecc_runtime_use_environment(rt, truncated, CUBECC_ENVIRONMENT_STRICT),
               CUBECC_ERROR_ENVIRONMENT, "truncated.cubeenv");
  EXPECT_ERROR(cubecc_runtime_use_environment(rt, bundle, 8), CUBECC_ERROR_INVALID_ARGUMENT,
               "unknown flags");
  EXPECT_ERROR(cubecc_runtime_use_environment(rt, NULL, 0), CUBECC_ERROR_INVALID_ARGUMENT,
               "the bundle path is NULL");
  /* Without strict, a bad bundle is a logged warning and not an error. */
  MUST(cubecc_runtime_use_environment(rt, corrupt, 0));
  MUST(cubecc_runtime_use_environment(rt, bundle, CUBECC_ENVIRONMENT_STRICT));

  /* Signed bundles only: the unsigned one, and the signed one with no key or a bad key trusted,
   * are refused; with its public key trusted, the signed one is used from here on. */
  {
    char signed_bundle[4096], public_key[4096];
    snprintf(signed_bundle, sizeof signed_bundle, "%s.signed", bundle);
    snprintf(public_key, sizeof public_key, "%s.ci.pub", bundle);
    const char *keys[] = {public_key}, *bad_keys[] = {"/nonexistent/ci.pub"}, *null_key[] = {NULL};
    const uint32_t strict_signed = CUBECC_ENVIRONMENT_STRICT | CUBECC_ENVIRONMENT_REQUIRE_SIGNATURE;
    EXPECT_ERROR(
        cubecc_runtime_use_signed_environment(rt, bundle, CUBECC_ENVIRONMENT_STRICT, keys, 1),
        CUBECC_ERROR_ENVIRONMENT, "the bundle is not signed");
    EXPECT_ERROR(cubecc_runtime_use_environment(rt, signed_bundle, strict_signed),
                 CUBECC_ERROR_ENVIRONMENT, "which is not trusted here (no key is trusted)");
    EXPECT_ERROR(cubecc_runtime_use_signed_environment(rt, signed_bundle, CUBECC_ENVIRONMENT_STRICT,
                                                       bad_keys, 1),
                 CUBECC_ERROR_ENVIRONMENT, "/nonexistent/ci.pub: cannot read the key file");
    EXPECT_ERROR(cubecc_runtime_use_signed_environment(rt, signed_bundle, 0, null_key, 1),
                 CUBECC_ERROR_INVALID_ARGUMENT, "trusted key 0 is NULL");
    EXPECT_ERROR(cubecc_runtime_use_signed_environment(rt, signed_bundle, 0, NULL, 1),
                 CUBECC_ERROR_INVALID_ARGUMENT, "the trusted keys pointer is NULL");
    MUST(cubecc_runtime_use_signed_environment(rt, signed_bundle, CUBECC_ENVIRONMENT_STRICT, keys,
                                               1));
  }

  /*===- The kernel library ------------------------------------------------------------------===*/
  cubecc_library library = NULL;
  EXPECT_ERROR(cubecc_library_open("/nonexistent/libkernels.so", &library), CUBECC_ERROR_NOT_FOUND,
               "/nonexistent/libkernels.so");
  MUST(cubecc_library_open(library_path, &library));
  size_t kernels = 0;
  MUST(cubecc_library_kernel_count(library, &kernels));
  int has_axpy = 0;
  for (size_t i = 0; i < kernels; ++i) {
    const char *name = NULL, *configuration = NULL;
    MUST(cubecc_library_kernel_info(library, i, &name, &configuration));
    has_axpy |= strcmp(name, "axpy") == 0 && strcmp(configuration, "width=1") == 0;
  }
  CHECK(has_axpy);
  EXPECT_ERROR(cubecc_library_kernel_info(library, kernels, NULL, NULL),
               CUBECC_ERROR_INVALID_ARGUMENT, "no kernel");

  cubecc_kernel axpy = NULL, reduce = NULL, histogram = NULL, transpose = NULL, nokernel = NULL;
  EXPECT_ERROR(cubecc_library_kernel(rt, library, "no_such_kernel", NULL, &nokernel),
               CUBECC_ERROR_NOT_FOUND, "has no kernel 'no_such_kernel'");
  EXPECT_ERROR(cubecc_library_kernel(rt, library, "axpy", "width=3", &nokernel),
               CUBECC_ERROR_NOT_FOUND, "with configuration 'width=3' (it has: ");
  EXPECT_ERROR(cubecc_library_kernel(rt, NULL, "axpy", NULL, &nokernel),
               CUBECC_ERROR_INVALID_ARGUMENT, "the library is NULL");
  CHECK(nokernel == NULL);
  MUST(cubecc_library_kernel(rt, library, "axpy", NULL, &axpy));
  MUST(cubecc_library_kernel(rt, library, "reduce_sum", "op=sum,workgroup=256", &reduce));
  MUST(cubecc_library_kernel(rt, library, "histogram_256", NULL, &histogram));
  MUST(cubecc_library_kernel(rt, library, "transpose_32x8", NULL, &transpose));
  {
    /* Through a second handle of the same library: the runtime's cache answers (no trace), and
     * the kernel still knows its parameter names (for tensor arguments). */
    cubecc_library again = NULL;
    cubecc_kernel cached = NULL;
    const char *name = NULL;
    MUST(cubecc_library_open(library_path, &again));
    MUST(cubecc_library_kernel(rt, again, "transpose_32x8", NULL, &cached));
    MUST(cubecc_kernel_parameter_name(cached, 5, &name));
    CHECK(strcmp(name, "out") == 0);
    cubecc_kernel_destroy(cached);
    cubecc_library_destroy(again);
  }
  CHECK(strcmp(cubecc_kernel_name(axpy), "axpy") == 0);
  size_t parameters = 0;
  MUST(cubecc_kernel_parameter_count(axpy, &parameters));
  CHECK(parameters == 7);

  /* A bundle without the kernel for this device: strict refuses to compile it, otherwise it is
   * compiled (on a runtime of its own, so that the counts above stay those of the real bundle). */
  {
    cubecc_runtime strict = NULL, lenient = NULL;
    cubecc_kernel k = NULL;
    cubecc_statistics s;
    MUST(cubecc_runtime_open(device, &strict));
    MUST(cubecc_runtime_use_environment(strict, foreign, CUBECC_ENVIRONMENT_STRICT));
    EXPECT_ERROR(cubecc_library_kernel(strict, library, "axpy", NULL, &k), CUBECC_ERROR_ENVIRONMENT,
                 "kernel 'axpy'");
    EXPECT_ERROR(cubecc_library_kernel(strict, library, "axpy", NULL, &k), CUBECC_ERROR_ENVIRONMENT,
                 "is not there");
    CHECK(k == NULL);
    MUST(cubecc_runtime_open(device, &lenient));
    MUST(cubecc_runtime_use_environment(lenient, foreign, 0));
    MUST(cubecc_library_kernel(lenient, library, "axpy", NULL, &k));
    MUST(cubecc_runtime_statistics(lenient, &s));
    CHECK(s.environment_misses == 1 && s.environment_hits == 0 && s.compiles == 1);
    cubecc_kernel_destroy(k);
    cubecc_runtime_destroy(strict);
    cubecc_runtime_destroy(lenient);
  }
  /* Kernels outlive their library. */
  cubecc_library_destroy(library);

  /* Every kernel came from the bundle: no compile. */
  cubecc_statistics stats;
  MUST(cubecc_runtime_statistics(rt, &stats));
  printf("environment: %llu hits, %llu misses, %llu rejected; %llu compiles\n",
         (unsigned long long)stats.environment_hits, (unsigned long long)stats.environment_misses,
         (unsigned long long)stats.environment_rejected, (unsigned long long)stats.compiles);
  CHECK(stats.environment_hits == 4);
  CHECK(stats.environment_misses == 0);
  CHECK(stats.compiles == 0);

  /*===- axpy --------------------------------------------------------------------------------===*/
  enum { N = 1000 };
  static float x[N], y[N], out[N];
  for (int i = 0; i < N; ++i) {
    x[i] = 0.25f * (float)(i % 37) - 2.0f;
    y[i] = 1.0f / (float)(i + 1);
  }
  cubecc_buffer dx = NULL, dy = NULL;
  MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, N, &dx));
  MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, N, &dy));
  MUST(cubecc_buffer_write(rt, dx, x, sizeof x));
  MUST(cubecc_buffer_write(rt, dy, y, sizeof y));
  MUST(launch_axpy(rt, axpy, dx, dy, N, 2.5f));
  MUST(cubecc_synchronize(rt));
  size_t times = 0;
  double time_ns[4];
  MUST(cubecc_last_launch_times(rt, time_ns, 4, &times));
  CHECK(times == 1);
  MUST(cubecc_buffer_read(rt, dy, out, sizeof out));
  for (int i = 0; i < N; ++i)
    if (!axpy_close(out[i], 2.5f, x[i], y[i])) {
      fprintf(stderr, "axpy: element %d is %.9g, expected %.9g\n", i, out[i], 2.5 * x[i] + y[i]);
      ++failures;
      break;
    }
  size_t elements = 0, bytes = 0;
  cubecc_dtype dtype = CUBECC_DTYPE_U8;
  MUST(cubecc_buffer_count(dy, &elements));
  MUST(cubecc_buffer_bytes(dy, &bytes));
  MUST(cubecc_buffer_dtype(dy, &dtype));
  CHECK(elements == N && bytes == 4 * N && dtype == CUBECC_DTYPE_F32);

  /*===- Launch errors: each names the kernel and what is wrong -----------------------------===*/
  {
    uint32_t grid[3] = {4, 1, 1};
    cubecc_arg six[6] = {buffer_arg(dx), u32_arg(N), u32_arg(1),
                         buffer_arg(dy), u32_arg(N), u32_arg(1)};
    EXPECT_ERROR(cubecc_launch(rt, axpy, grid, six, 6), CUBECC_ERROR_INVALID_ARGUMENT,
                 "6 argument(s) given, the kernel has 7 parameter(s)");
    cubecc_arg wrong_type[7] = {buffer_arg(dx), u32_arg(N), u32_arg(1), buffer_arg(dy),
                                u32_arg(N),     u32_arg(1), i32_arg(2)};
    EXPECT_ERROR(cubecc_launch(rt, axpy, grid, wrong_type, 7), CUBECC_ERROR_INVALID_ARGUMENT,
                 "launch of kernel 'axpy': parameter 6");
    EXPECT_ERROR(cubecc_launch(rt, axpy, grid, wrong_type, 7), CUBECC_ERROR_INVALID_ARGUMENT,
                 "needs a floating-point value, got an integer");
    cubecc_arg scalar_for_buffer[7] = {u32_arg(0), u32_arg(N), u32_arg(1), buffer_arg(dy),
                                       u32_arg(N), u32_arg(1), f32_arg(1)};
    EXPECT_ERROR(cubecc_launch(rt, axpy, grid, scalar_for_buffer, 7), CUBECC_ERROR_INVALID_ARGUMENT,
                 "parameter 0 (%x: buffer<f32, read>): needs a buffer");
    cubecc_arg null_buffer[7] = {buffer_arg(NULL), u32_arg(N), u32_arg(1), buffer_arg(dy),
                                 u32_arg(N),       u32_arg(1), f32_arg(1)};
    EXPECT_ERROR(cubecc_launch(rt, axpy, grid, null_buffer, 7), CUBECC_ERROR_INVALID_ARGUMENT,
                 "argument 0: the buffer is NULL");
    EXPECT_ERROR(cubecc_launch(rt, NULL, grid, six, 6), CUBECC_ERROR_INVALID_ARGUMENT,
                 "the kernel is NULL");
    cubecc_buffer counts = NULL;
    MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_U32, N, &counts));
    cubecc_arg wrong_buffer[7] = {buffer_arg(counts), u32_arg(N), u32_arg(1), buffer_arg(dy),
                                  u32_arg(N),         u32_arg(1), f32_arg(1)};
    EXPECT_ERROR(cubecc_launch(rt, axpy, grid, wrong_buffer, 7), CUBECC_ERROR_INVALID_ARGUMENT,
                 "needs a buffer of f32, got a buffer of u32");
    cubecc_buffer_destroy(counts);
    if (!vulkan) { /* the interpreter finds the access past the end (a size that lies): a fault */
      cubecc_arg too_long[7] = {buffer_arg(dx), u32_arg(2 * N), u32_arg(1), buffer_arg(dy),
                                u32_arg(2 * N), u32_arg(1),     f32_arg(1)};
      uint32_t wide[3] = {(2 * N + 255) / 256, 1, 1};
      EXPECT_ERROR(cubecc_launch(rt, axpy, wide, too_long, 7), CUBECC_ERROR_DEVICE_FAILURE,
                   "launch of kernel 'axpy' failed");
    }
    EXPECT_ERROR(cubecc_buffer_allocate(rt, CUBECC_DTYPE_BOOL, 4, &nobuffer),
                 CUBECC_ERROR_INVALID_ARGUMENT, "buffers cannot hold bool");

    /* Hostile sizes and values (an adversarial review found each): a count whose bytes overflow
     * (it once gave an 8-byte buffer that launches indexed far past), more than the device holds,
     * enum values outside the enum, and an argument count no kernel has. */
    EXPECT_ERROR(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F64, SIZE_MAX / 8 + 2, &nobuffer),
                 CUBECC_ERROR_INVALID_ARGUMENT, "elements of f64 are more than 2^64 bytes");
    EXPECT_ERROR(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, SIZE_MAX, &nobuffer),
                 CUBECC_ERROR_INVALID_ARGUMENT, "more than 2^64 bytes");
    EXPECT_ERROR(cubecc_buffer_allocate(rt, CUBECC_DTYPE_U8, SIZE_MAX, &nobuffer),
                 CUBECC_ERROR_OUT_OF_MEMORY, "are more than any device holds");
    EXPECT_ERROR(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F64, (size_t)1 << 56, &nobuffer),
                 CUBECC_ERROR_OUT_OF_MEMORY, vulkan ? "" : "interp: out of memory");
    EXPECT_ERROR(cubecc_buffer_allocate(rt, (cubecc_dtype)1234, 4, &nobuffer),
                 CUBECC_ERROR_INVALID_ARGUMENT, "1234 is not a cubecc_dtype");
    EXPECT_ERROR(cubecc_buffer_allocate(rt, (cubecc_dtype)-5, 4, &nobuffer),
                 CUBECC_ERROR_INVALID_ARGUMENT, "-5 is not a cubecc_dtype");
    static float adopted_host[4];
    EXPECT_ERROR(cubecc_buffer_adopt_host(rt, adopted_host, CUBECC_DTYPE_F32, SIZE_MAX / 2, NULL,
                                          NULL, &nobuffer),
                 vulkan ? CUBECC_ERROR_UNSUPPORTED : CUBECC_ERROR_INVALID_ARGUMENT,
                 vulkan ? "host memory" : "more than 2^64 bytes");
    if (!vulkan)
      EXPECT_ERROR(cubecc_buffer_adopt_host(rt, (void *)(uintptr_t)(UINTPTR_MAX - 15),
                                            CUBECC_DTYPE_F32, 1024, NULL, NULL, &nobuffer),
                   CUBECC_ERROR_INVALID_ARGUMENT, "wrap around the end of the address space");
    cubecc_arg odd_kind[7] = {buffer_arg(dx), u32_arg(N), u32_arg(1), buffer_arg(dy),
                              u32_arg(N),     u32_arg(1), f32_arg(1)};
    odd_kind[1].kind = (cubecc_arg_kind)77;
    EXPECT_ERROR(cubecc_launch(rt, axpy, grid, odd_kind, 7), CUBECC_ERROR_INVALID_ARGUMENT,
                 "kind 77 is not CUBECC_ARG_BUFFER");
    odd_kind[1] = u32_arg(N);
    odd_kind[1].dtype = (cubecc_dtype)-1;
    EXPECT_ERROR(cubecc_launch(rt, axpy, grid, odd_kind, 7), CUBECC_ERROR_INVALID_ARGUMENT,
                 "-1 is not a cubecc_dtype");
    EXPECT_ERROR(cubecc_launch(rt, axpy, grid, six, SIZE_MAX), CUBECC_ERROR_INVALID_ARGUMENT,
                 "argument(s) given, the kernel has 7 parameter(s)");
    CHECK(nobuffer == NULL);
    EXPECT_ERROR(cubecc_buffer_write(rt, dy, y, sizeof y + 4), CUBECC_ERROR_INVALID_ARGUMENT,
                 "4004 bytes do not fit a buffer of 4000 bytes");
  }

  /*===- reduce_sum: 64 partial sums, then one (integer-valued: exact in f32) ---------------===*/
  {
    enum { M = 1 << 16, GROUPS = 64 };
    static float in[M];
    double exact = 0;
    for (int i = 0; i < M; ++i) {
      in[i] = (float)(i % 13) - 6.0f + (float)(i % 5);
      exact += in[i];
    }
    cubecc_buffer din = NULL, partial = NULL, total = NULL;
    MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, M, &din));
    MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, GROUPS, &partial));
    MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, 1, &total));
    MUST(cubecc_buffer_write(rt, din, in, sizeof in));
    cubecc_arg first[6] = {buffer_arg(din),     u32_arg(M),      u32_arg(1),
                           buffer_arg(partial), u32_arg(GROUPS), u32_arg(1)};
    cubecc_arg second[6] = {buffer_arg(partial), u32_arg(GROUPS), u32_arg(1),
                            buffer_arg(total),   u32_arg(1),      u32_arg(1)};
    uint32_t groups[3] = {GROUPS, 1, 1}, one[3] = {1, 1, 1};
    MUST(cubecc_launch(rt, reduce, groups, first, 6));
    MUST(cubecc_launch(rt, reduce, one, second, 6));
    float sum = 0;
    MUST(cubecc_buffer_read(rt, total, &sum, sizeof sum));
    if ((double)sum != exact) {
      fprintf(stderr, "reduce_sum: %.9g, expected exactly %.9g\n", sum, exact);
      ++failures;
    }
    cubecc_buffer_destroy(din);
    cubecc_buffer_destroy(partial);
    cubecc_buffer_destroy(total);
  }

  /*===- histogram_256: exact counts ---------------------------------------------------------===*/
  {
    enum { M = 10000, BINS = 256 };
    static uint32_t values[M], hist[BINS], expected[BINS];
    memset(expected, 0, sizeof expected);
    memset(hist, 0, sizeof hist);
    for (uint32_t i = 0; i < M; ++i) {
      values[i] = (i * 2654435761u) >> 23; /* 0..511: half of them out of range */
      if (values[i] < BINS)
        ++expected[values[i]];
    }
    cubecc_buffer dvalues = NULL, dhist = NULL;
    MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_U32, M, &dvalues));
    MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_U32, BINS, &dhist));
    MUST(cubecc_buffer_write(rt, dvalues, values, sizeof values));
    MUST(cubecc_buffer_write(rt, dhist, hist, sizeof hist));
    cubecc_arg args[6] = {buffer_arg(dvalues), u32_arg(M),    u32_arg(1),
                          buffer_arg(dhist),   u32_arg(BINS), u32_arg(1)};
    uint32_t grid[3] = {8, 1, 1};
    MUST(cubecc_launch(rt, histogram, grid, args, 6));
    MUST(cubecc_buffer_read(rt, dhist, hist, sizeof hist));
    CHECK(memcmp(hist, expected, sizeof hist) == 0);
    cubecc_buffer_destroy(dvalues);
    cubecc_buffer_destroy(dhist);
  }

  /*===- Tensor arguments: descriptors checked against the kernel's parameters
   * ------------------===*/
  {
    /* The IR parameter names say which parameters one tensor stands for. */
    const char *name = NULL;
    MUST(cubecc_kernel_parameter_name(transpose, 0, &name));
    CHECK(strcmp(name, "in") == 0);
    MUST(cubecc_kernel_parameter_name(transpose, 3, &name));
    CHECK(strcmp(name, "in.stride0") == 0);
    EXPECT_ERROR(cubecc_kernel_parameter_name(transpose, 10, &name), CUBECC_ERROR_INVALID_ARGUMENT,
                 "has no parameter 10 (it has 10)");

    /* transpose_32x8 of a 2-D view: columns 2 to 41 and rows 1 to 29 of a 30 x 50 matrix (an
     * offset of 52 elements and a row stride of 50), into a contiguous 40 x 29 tensor. (Vulkan
     * binds a buffer from an offset that is a multiple of minStorageBufferOffsetAlignment: 208
     * bytes is one of 16.) */
    enum { ROWS = 30, COLS = 50, R0 = 1, C0 = 2, VR = 29, VC = 40 };
    static float matrix[ROWS * COLS], result[VC * VR];
    for (int i = 0; i < ROWS * COLS; ++i)
      matrix[i] = (float)i;
    cubecc_buffer dm = NULL, dt = NULL;
    MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, ROWS * COLS, &dm));
    MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, VC * VR, &dt));
    MUST(cubecc_buffer_write(rt, dm, matrix, sizeof matrix));
    int64_t view_shape[2] = {VR, VC}, view_strides[2] = {COLS, 1}, out_shape[2] = {VC, VR};
    cubecc_tensor in = {dm, CUBECC_DTYPE_F32, 2, view_shape, view_strides, R0 * COLS + C0};
    cubecc_tensor out_t = {dt, CUBECC_DTYPE_F32, 2, out_shape, NULL, 0};
    cubecc_arg args[2];
    memset(args, 0, sizeof args);
    args[0].kind = args[1].kind = CUBECC_ARG_TENSOR;
    args[0].value.tensor = &in;
    args[1].value.tensor = &out_t;
    uint32_t grid[3] = {(VC + 31) / 32, (VR + 31) / 32, 1};
    MUST(cubecc_launch(rt, transpose, grid, args, 2));
    MUST(cubecc_buffer_read(rt, dt, result, sizeof result));
    int wrong = 0;
    for (int r = 0; r < VR; ++r)
      for (int c = 0; c < VC; ++c)
        wrong += result[c * VR + r] != matrix[(R0 + r) * COLS + C0 + c];
    CHECK(wrong == 0);

    /* What the launch checks, naming the argument and the kernel's parameter. */
    int64_t flat_shape[1] = {VC * VR};
    cubecc_tensor flat = {dt, CUBECC_DTYPE_F32, 1, flat_shape, NULL, 0};
    args[1].value.tensor = &flat;
    EXPECT_ERROR(cubecc_launch(rt, transpose, grid, args, 2), CUBECC_ERROR_INVALID_ARGUMENT,
                 "argument 1 (tensor 'out'): the kernel's tensor has 2 dimension(s), the "
                 "descriptor 1");
    cubecc_tensor mislabeled = {dt, CUBECC_DTYPE_I32, 2, out_shape, NULL, 0};
    args[1].value.tensor = &mislabeled;
    EXPECT_ERROR(cubecc_launch(rt, transpose, grid, args, 2), CUBECC_ERROR_INVALID_ARGUMENT,
                 "argument 1 (tensor 'out'): the descriptor says i32, its buffer holds f32");
    cubecc_buffer ints = NULL;
    MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_I32, VC * VR, &ints));
    cubecc_tensor int_tensor = {ints, CUBECC_DTYPE_I32, 2, out_shape, NULL, 0};
    args[1].value.tensor = &int_tensor;
    EXPECT_ERROR(cubecc_launch(rt, transpose, grid, args, 2), CUBECC_ERROR_INVALID_ARGUMENT,
                 "argument 1 (tensor 'out'): the kernel's tensor holds f32, the descriptor's "
                 "buffer i32");
    int64_t too_far[2] = {VR + 1, VC};
    cubecc_tensor past_end = {dm, CUBECC_DTYPE_F32, 2, too_far, view_strides, R0 * COLS + C0};
    args[0].value.tensor = &past_end;
    args[1].value.tensor = &out_t;
    EXPECT_ERROR(cubecc_launch(rt, transpose, grid, args, 2), CUBECC_ERROR_INVALID_ARGUMENT,
                 "argument 0 (tensor 'in'): the tensor (offset 52, last element 1489 past it) "
                 "reaches past the end of its buffer of 1500 elements");
    args[0].value.tensor = NULL;
    EXPECT_ERROR(cubecc_launch(rt, transpose, grid, args, 2), CUBECC_ERROR_INVALID_ARGUMENT,
                 "argument 0 (tensor 'in'): the tensor descriptor is NULL");
    args[0].value.tensor = &in;
    EXPECT_ERROR(cubecc_launch(rt, transpose, grid, args, 1), CUBECC_ERROR_INVALID_ARGUMENT,
                 "launch of kernel 'transpose_32x8'");
    /* A tensor for a value parameter: axpy's `a` after two tensors. */
    cubecc_tensor x_t = {dt, CUBECC_DTYPE_F32, 1, flat_shape, NULL, 0};
    cubecc_arg axpy_args[3];
    memset(axpy_args, 0, sizeof axpy_args);
    axpy_args[0].kind = axpy_args[1].kind = axpy_args[2].kind = CUBECC_ARG_TENSOR;
    axpy_args[0].value.tensor = axpy_args[1].value.tensor = axpy_args[2].value.tensor = &x_t;
    EXPECT_ERROR(cubecc_launch(rt, axpy, grid, axpy_args, 3), CUBECC_ERROR_INVALID_ARGUMENT,
                 "argument 2: IR parameter 6 ('a') is a value, not a tensor");
    /* axpy with tensors for x and y and a scalar: y = 2 x + y over the flat 1160 elements; then
     * the same kernel by name from the bundle, without the library: the bundle's parameter names
     * tell the tensors' parameters apart just as the traced ones do. */
    cubecc_kernel named = NULL;
    const char *named_param = NULL;
    MUST(cubecc_environment_kernel(rt, "cubecc_examples", "axpy", "width=1", &named));
    MUST(cubecc_kernel_parameter_name(named, 4, &named_param));
    CHECK(strcmp(named_param, "y.shape0") == 0);
    static float before[VC * VR], after[VC * VR];
    axpy_args[2] = f32_arg(2.0f);
    uint32_t axpy_grid[3] = {(VC * VR + 255) / 256, 1, 1};
    cubecc_kernel both[2] = {axpy, named};
    for (int k = 0; k < 2; ++k) {
      MUST(cubecc_buffer_read(rt, dt, before, sizeof before));
      MUST(cubecc_launch(rt, both[k], axpy_grid, axpy_args, 3));
      MUST(cubecc_buffer_read(rt, dt, after, sizeof after));
      wrong = 0;
      for (int i = 0; i < VC * VR; ++i)
        wrong += !axpy_close(after[i], 2.0f, before[i], before[i]);
      CHECK(wrong == 0);
    }
    cubecc_kernel_destroy(named);
    cubecc_buffer_destroy(dm);
    cubecc_buffer_destroy(dt);
    cubecc_buffer_destroy(ints);
  }

  /*===- Adopting the test's own memory ------------------------------------------------------===*/
  {
    static float mine[N];
    for (int i = 0; i < N; ++i)
      mine[i] = y[i];
    cubecc_buffer adopted = NULL;
    test_vulkan_buffer vb;
    memset(&vb, 0, sizeof vb);
    float *seen = mine; /* where the test reads what the kernel wrote: its own allocation */
    released = 0;
    if (vulkan) {
      cubecc_vulkan_handles h;
      MUST(cubecc_runtime_vulkan_handles(rt, &h));
      CHECK(h.instance && h.physical_device && h.device && h.get_instance_proc_addr);
      char error[256] = "";
      if (test_vulkan_buffer_create(h.instance, h.physical_device, h.device,
                                    h.get_instance_proc_addr, 256 + sizeof mine, &vb, error,
                                    sizeof error)) {
        fprintf(stderr, "making the test's VkBuffer: %s\n", error);
        return 1;
      }
      seen = (float *)((char *)vb.mapped + 256);
      memcpy(seen, mine, sizeof mine);
      MUST(cubecc_buffer_adopt_vulkan(rt, vb.buffer, 256, CUBECC_DTYPE_F32, N, count_release,
                                      &released, &adopted));
      EXPECT_ERROR(cubecc_buffer_adopt_host(rt, mine, CUBECC_DTYPE_F32, N, NULL, NULL, &nobuffer),
                   CUBECC_ERROR_UNSUPPORTED,
                   "host memory can be adopted only by a runtime on the interp or cpu device");
      EXPECT_ERROR(cubecc_buffer_adopt_vulkan(rt, 0, 0, CUBECC_DTYPE_F32, N, NULL, NULL, &nobuffer),
                   CUBECC_ERROR_INVALID_ARGUMENT, "a VkBuffer is null");
    } else {
      EXPECT_ERROR(cubecc_runtime_vulkan_handles(rt, &(cubecc_vulkan_handles){0}),
                   CUBECC_ERROR_UNSUPPORTED, "not vulkan");
      MUST(cubecc_buffer_adopt_host(rt, mine, CUBECC_DTYPE_F32, N, count_release, &released,
                                    &adopted));
      EXPECT_ERROR(cubecc_buffer_adopt_vulkan(rt, 1, 0, CUBECC_DTYPE_F32, N, NULL, NULL, &nobuffer),
                   CUBECC_ERROR_UNSUPPORTED,
                   "a VkBuffer can be adopted only by a runtime on the vulkan device");
      EXPECT_ERROR(cubecc_buffer_adopt_host(rt, NULL, CUBECC_DTYPE_F32, N, NULL, NULL, &nobuffer),
                   CUBECC_ERROR_INVALID_ARGUMENT, "host memory is null");
      EXPECT_ERROR(cubecc_buffer_adopt_host(rt, (char *)mine + 2, CUBECC_DTYPE_F32, 4, NULL, NULL,
                                            &nobuffer),
                   CUBECC_ERROR_INVALID_ARGUMENT, "is not aligned to the 4 bytes of a f32");
      EXPECT_ERROR(cubecc_buffer_adopt_host(rt, mine, CUBECC_DTYPE_F32, 0, NULL, NULL, &nobuffer),
                   CUBECC_ERROR_INVALID_ARGUMENT, "count is 0");
    }
    EXPECT_ERROR(cubecc_buffer_adopt_cuda(rt, 0x100000, CUBECC_DTYPE_F32, N, count_release,
                                          &released, &nobuffer),
                 CUBECC_ERROR_UNSUPPORTED,
                 "a CUDA device pointer can be adopted only by a runtime on the cuda device");
    EXPECT_ERROR(cubecc_buffer_adopt_hip(rt, mine, CUBECC_DTYPE_F32, N, NULL, NULL, &nobuffer),
                 CUBECC_ERROR_UNSUPPORTED, "on the hip device");
    CHECK(nobuffer == NULL);
    CHECK(released == 0); /* refused adoptions never call the callback */

    MUST(launch_axpy(rt, axpy, dx, adopted, N, -1.5f));
    MUST(cubecc_synchronize(rt));
    int wrong = 0;
    for (int i = 0; i < N && !wrong; ++i)
      if (!axpy_close(seen[i], -1.5f, x[i], y[i])) {
        fprintf(stderr, "axpy into adopted memory: element %d is %.9g, expected %.9g\n", i, seen[i],
                -1.5 * x[i] + y[i]);
        wrong = 1;
        ++failures;
      }
    CHECK(released == 0);
    /* An exported tensor is a user too: the memory is released when both are gone. */
    DLManagedTensor *shared = NULL;
    MUST(cubecc_buffer_to_dlpack(adopted, &shared));
    CHECK(shared->dl_tensor.byte_offset == (vulkan ? 256u : 0u));
    CHECK(shared->dl_tensor.data == (vulkan ? (void *)(uintptr_t)vb.buffer : (void *)mine));
    cubecc_buffer_destroy(adopted);
    CHECK(released == 0);
    shared->deleter(shared);
    CHECK(released == 1);
    test_vulkan_buffer_destroy(&vb);
  }

  /*===- DLPack: export, then import the tensor into a buffer again -------------------------===*/
  {
    DLManagedTensor *tensor = NULL;
    MUST(cubecc_buffer_to_dlpack(dy, &tensor));
    CHECK(tensor->dl_tensor.device.device_type == (vulkan ? kDLVulkan : kDLCPU));
    CHECK(tensor->dl_tensor.ndim == 1 && tensor->dl_tensor.shape[0] == N);
    CHECK(tensor->dl_tensor.dtype.code == kDLFloat && tensor->dl_tensor.dtype.bits == 32 &&
          tensor->dl_tensor.dtype.lanes == 1);
    CHECK(tensor->dl_tensor.strides == NULL);
    if (!vulkan) /* host memory: the tensor shows what the kernel wrote */
      CHECK(((const float *)tensor->dl_tensor.data)[7] == out[7]);
    /* The tensor keeps the memory: the buffer handle may go first. */
    cubecc_buffer_destroy(dy);
    dy = NULL;

    wrapped_tensor *w = calloc(1, sizeof *w);
    w->inner = tensor;
    w->outer.dl_tensor = tensor->dl_tensor;
    w->outer.manager_ctx = w;
    w->outer.deleter = delete_wrapped;
    cubecc_buffer imported = NULL;
    MUST(cubecc_buffer_from_dlpack(rt, &w->outer, &imported));
    static float back[N];
    MUST(cubecc_buffer_read(rt, imported, back, sizeof back));
    CHECK(memcmp(back, out, sizeof back) == 0);
    MUST(launch_axpy(rt, axpy, dx, imported, N, 1.0f)); /* still usable for launches */
    MUST(cubecc_synchronize(rt));
    CHECK(wrapper_deletes == 0);
    cubecc_buffer_destroy(imported);
    CHECK(wrapper_deletes == 1);

    /* Refused tensors stay the caller's: their deleter is not called. */
    static float host[12];
    int64_t shape[2] = {3, 4}, strides[2] = {1, 3};
    DLManagedTensor bad;
    memset(&bad, 0, sizeof bad);
    bad.dl_tensor.data = host;
    bad.dl_tensor.device.device_type = vulkan ? kDLVulkan : kDLCPU;
    bad.dl_tensor.ndim = 2;
    bad.dl_tensor.dtype.code = kDLFloat;
    bad.dl_tensor.dtype.bits = 32;
    bad.dl_tensor.dtype.lanes = 1;
    bad.dl_tensor.shape = shape;
    bad.dl_tensor.strides = strides;
    bad.deleter = delete_wrapped; /* would count, and crash on manager_ctx NULL */
    EXPECT_ERROR(cubecc_buffer_from_dlpack(rt, &bad, &nobuffer), CUBECC_ERROR_UNSUPPORTED,
                 "the tensor is not compact: dimension 1 has stride 3");
    bad.dl_tensor.strides = NULL;
    bad.dl_tensor.device.device_type = kDLCUDA;
    EXPECT_ERROR(cubecc_buffer_from_dlpack(rt, &bad, &nobuffer), CUBECC_ERROR_UNSUPPORTED,
                 "the tensor is on kDLCUDA");
    bad.dl_tensor.device.device_type = vulkan ? kDLVulkan : kDLCPU;
    bad.dl_tensor.dtype.code = kDLComplex;
    bad.dl_tensor.dtype.bits = 64;
    EXPECT_ERROR(cubecc_buffer_from_dlpack(rt, &bad, &nobuffer), CUBECC_ERROR_UNSUPPORTED,
                 "has no cubecc element type");
    EXPECT_ERROR(cubecc_buffer_from_dlpack(rt, NULL, &nobuffer), CUBECC_ERROR_INVALID_ARGUMENT,
                 "the tensor is NULL");
    CHECK(wrapper_deletes == 1);
    CHECK(nobuffer == NULL);
  }

  /* A kernel of one runtime on another runtime is refused. */
  {
    cubecc_runtime other = NULL;
    MUST(cubecc_runtime_open("interp", &other));
    uint32_t grid[3] = {1, 1, 1};
    EXPECT_ERROR(cubecc_launch(other, axpy, grid, NULL, 0), CUBECC_ERROR_INVALID_ARGUMENT,
                 "was loaded on another runtime");
    EXPECT_ERROR(cubecc_buffer_write(other, dx, x, 4), CUBECC_ERROR_INVALID_ARGUMENT,
                 "the buffer belongs to another runtime");
    cubecc_runtime_destroy(other);
  }

  cubecc_buffer_destroy(dx);
  cubecc_kernel_destroy(axpy);
  cubecc_kernel_destroy(reduce);
  cubecc_kernel_destroy(histogram);
  cubecc_kernel_destroy(transpose);
  cubecc_runtime_destroy(rt);

  if (failures) {
    fprintf(stderr, "capi_test on %s: %d check(s) failed\n", device, failures);
    return 1;
  }
  printf("capi_test on %s: every check passed\n", device);
  return 0;
}
