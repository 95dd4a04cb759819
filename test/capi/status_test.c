/*===- status_test.c - Every C status, provoked through the public C API ------------------------===
 *
 *   status_test <STATUS> <kernel library .so> <library whose trace throws .so> <scratch dir>
 *
 * One ctest per cubecc_status (capi_status.<STATUS>): each case makes the C API fail the way an
 * application would meet that status, and checks the status, its name and that the last-error
 * message names what failed. The statuses come from a switch on the runtime error's kind (or from
 * the C API's own checks), never from the message: a case here fails if a kind maps to the wrong
 * status. CUBECC_ERROR_DEVICE_FAILURE runs under CUBECC_CHECKED=1 (set by the test), where the cpu
 * device reports an out-of-bounds access; CUBECC_ERROR_INTERNAL uses the C API's documented test
 * hook CUBECC_TEST_INTERNAL_ERROR (cubecc.h), since a bug cannot be provoked on purpose.
 *
 *===-------------------------------------------------------------------------------------------===*/
#include "cubecc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *library_path;
static const char *throwing_library_path;
static const char *scratch;

/* Stops the test when a step it depends on fails. */
#define MUST(call)                                                                                 \
  do {                                                                                             \
    cubecc_status status_ = (call);                                                                \
    if (status_ != CUBECC_SUCCESS) {                                                               \
      fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call,                    \
              cubecc_status_name(status_), cubecc_last_error());                                   \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* 0 when `got` is `expected` and the last error contains `words`; else says why and returns 1. */
static int expect(cubecc_status got, cubecc_status expected, const char *words) {
  const char *message = cubecc_last_error();
  if (got == expected && strstr(message, words))
    return 0;
  fprintf(stderr,
          "returned %s, expected %s\n  last error: \"%s\"\n  expected it to contain: \"%s\"\n",
          cubecc_status_name(got), cubecc_status_name(expected), message, words);
  return 1;
}

static cubecc_runtime open_runtime(const char *device) {
  cubecc_runtime rt = NULL;
  MUST(cubecc_runtime_open(device, &rt));
  return rt;
}

static int invalid_argument(void) {
  cubecc_runtime rt = open_runtime("interp");
  cubecc_buffer b = NULL;
  int failed = expect(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, 0, &b),
                      CUBECC_ERROR_INVALID_ARGUMENT, "count is 0");
  cubecc_runtime_destroy(rt);
  return failed;
}

static int not_found(void) {
  cubecc_runtime rt = open_runtime("interp");
  cubecc_library library = NULL;
  MUST(cubecc_library_open(library_path, &library));
  cubecc_kernel kernel = NULL;
  int failed = expect(cubecc_library_kernel(rt, library, "no_such_kernel", NULL, &kernel),
                      CUBECC_ERROR_NOT_FOUND, "no kernel 'no_such_kernel'");
  cubecc_library_destroy(library);
  cubecc_runtime_destroy(rt);
  return failed;
}

static int no_device(void) {
  cubecc_runtime rt = NULL;
  return expect(cubecc_runtime_open("no_such_device", &rt), CUBECC_ERROR_NO_DEVICE,
                "unknown device 'no_such_device'");
}

static int compile(void) {
  cubecc_runtime rt = open_runtime("interp");
  cubecc_library library = NULL;
  MUST(cubecc_library_open(throwing_library_path, &library));
  cubecc_kernel kernel = NULL;
  int failed = expect(cubecc_library_kernel(rt, library, "listed", NULL, &kernel),
                      CUBECC_ERROR_COMPILE, "does not trace");
  cubecc_library_destroy(library);
  cubecc_runtime_destroy(rt);
  return failed;
}

static int environment(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/not-a-bundle.cubeenv", scratch);
  FILE *f = fopen(path, "wb");
  if (!f || fputs("this is not an environment bundle\n", f) < 0 || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }
  cubecc_runtime rt = open_runtime("interp");
  int failed = expect(cubecc_runtime_use_environment(rt, path, CUBECC_ENVIRONMENT_STRICT),
                      CUBECC_ERROR_ENVIRONMENT, "not-a-bundle.cubeenv");
  cubecc_runtime_destroy(rt);
  return failed;
}

static int out_of_memory(void) {
  /* 1 PiB: more than any host has; the cpu device refuses it before allocating anything. */
  cubecc_runtime rt = open_runtime("cpu");
  cubecc_buffer b = NULL;
  int failed = expect(cubecc_buffer_allocate(rt, CUBECC_DTYPE_U8, (size_t)1 << 50, &b),
                      CUBECC_ERROR_OUT_OF_MEMORY, "out of memory");
  cubecc_runtime_destroy(rt);
  return failed;
}

static int unsupported(void) {
  cubecc_runtime rt = open_runtime("interp");
  cubecc_buffer b = NULL;
  int failed = expect(cubecc_buffer_adopt_cuda(rt, 0x1000, CUBECC_DTYPE_F32, 16, NULL, NULL, &b),
                      CUBECC_ERROR_UNSUPPORTED, "CUDA device pointer");
  cubecc_runtime_destroy(rt);
  return failed;
}

static cubecc_arg buffer_arg(cubecc_buffer b) {
  cubecc_arg a;
  memset(&a, 0, sizeof a);
  a.kind = CUBECC_ARG_BUFFER;
  a.buffer = b;
  return a;
}

static cubecc_arg scalar_arg(cubecc_dtype dtype, uint64_t u, double f) {
  cubecc_arg a;
  memset(&a, 0, sizeof a);
  a.kind = CUBECC_ARG_SCALAR;
  a.dtype = dtype;
  if (dtype == CUBECC_DTYPE_F32)
    a.value.f = f;
  else
    a.value.u = u;
  return a;
}

static int device_failure(void) {
  /* axpy reads x[i] for every i below the size it is told; told 256 for a buffer of 4 elements,
   * it reads past the buffer, and checked mode (CUBECC_CHECKED=1) stops the launch there. */
  cubecc_runtime rt = open_runtime("cpu");
  cubecc_library library = NULL;
  MUST(cubecc_library_open(library_path, &library));
  cubecc_kernel axpy = NULL;
  MUST(cubecc_library_kernel(rt, library, "axpy", NULL, &axpy));
  cubecc_buffer x = NULL, y = NULL;
  MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, 4, &x));
  MUST(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, 256, &y));
  cubecc_arg args[7] = {buffer_arg(x),
                        scalar_arg(CUBECC_DTYPE_U32, 256, 0),
                        scalar_arg(CUBECC_DTYPE_U32, 1, 0),
                        buffer_arg(y),
                        scalar_arg(CUBECC_DTYPE_U32, 256, 0),
                        scalar_arg(CUBECC_DTYPE_U32, 1, 0),
                        scalar_arg(CUBECC_DTYPE_F32, 0, 2.0)};
  uint32_t grid[3] = {1, 1, 1};
  cubecc_status status = cubecc_launch(rt, axpy, grid, args, 7);
  /* A device that queues launches reports the fault at synchronize; cpu runs them at launch. */
  if (status == CUBECC_SUCCESS)
    status = cubecc_synchronize(rt);
  int failed = expect(status, CUBECC_ERROR_DEVICE_FAILURE, "out-of-bounds");
  cubecc_buffer_destroy(x);
  cubecc_buffer_destroy(y);
  cubecc_kernel_destroy(axpy);
  cubecc_library_destroy(library);
  cubecc_runtime_destroy(rt);
  return failed;
}

static int internal(void) {
  /* The test hook: with CUBECC_TEST_INTERNAL_ERROR=1 (set by the test), cubecc_runtime_statistics
   * throws inside the C API as a bug would. */
  cubecc_runtime rt = open_runtime("interp");
  cubecc_statistics statistics;
  int failed =
      expect(cubecc_runtime_statistics(rt, &statistics), CUBECC_ERROR_INTERNAL, "a bug in cubecc");
  cubecc_runtime_destroy(rt);
  return failed;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s <STATUS> <kernel library> <throwing library> <scratch dir>\n",
            argv[0]);
    return 2;
  }
  library_path = argv[2];
  throwing_library_path = argv[3];
  scratch = argv[4];
  static const struct {
    cubecc_status status;
    int (*run)(void);
  } cases[] = {
      {CUBECC_ERROR_INVALID_ARGUMENT, invalid_argument},
      {CUBECC_ERROR_NOT_FOUND, not_found},
      {CUBECC_ERROR_NO_DEVICE, no_device},
      {CUBECC_ERROR_COMPILE, compile},
      {CUBECC_ERROR_ENVIRONMENT, environment},
      {CUBECC_ERROR_OUT_OF_MEMORY, out_of_memory},
      {CUBECC_ERROR_UNSUPPORTED, unsupported},
      {CUBECC_ERROR_INTERNAL, internal},
      {CUBECC_ERROR_DEVICE_FAILURE, device_failure},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    if (strcmp(argv[1], cubecc_status_name(cases[i].status)) == 0) {
      int failed = cases[i].run();
      printf("%s: %s\n", argv[1], failed ? "FAILED" : "ok");
      return failed;
    }
  fprintf(stderr, "%s: no case for status '%s'\n", argv[0], argv[1]);
  return 2;
}
