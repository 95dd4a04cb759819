/*===- kernel_library.h - The C ABI of a kernel library (a shared object built with the DSL) ===*
 *
 * A kernel library exports one symbol, CUBECC_KERNEL_LIBRARY_SYMBOL, returning a table of its
 * registered kernels. Tools (cubecc, CI jobs) dlopen the library, read the table and ask for each
 * kernel's IR as text, without running the application. The text is the stable interface: it
 * carries the IR format, so a tool and a library built by different compilers still agree.
 *
 * Versions: 1 is the kernel table alone. 2 appends the library's tunables (cubecc/dsl/tunable.h):
 * fields are only ever appended, and a reader accepts every version it knows, reading the fields
 * that version has (a version 1 table has no tunables).
 *
 *===----------------------------------------------------------------------------------------===*/
#ifndef CUBECC_DSL_KERNEL_LIBRARY_H
#define CUBECC_DSL_KERNEL_LIBRARY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUBECC_KERNEL_LIBRARY_ABI_VERSION 2
#define CUBECC_KERNEL_LIBRARY_SYMBOL "cubecc_kernel_library_v1"

/* The most buffer and value parameters a tunable's launch describes. */
#define CUBECC_TUNABLE_MAX_BUFFERS 32
#define CUBECC_TUNABLE_MAX_VALUES 64

/* Kinds of cubecc_launch_value. */
#define CUBECC_LAUNCH_VALUE_INT 0
#define CUBECC_LAUNCH_VALUE_UINT 1
#define CUBECC_LAUNCH_VALUE_FLOAT 2

typedef struct cubecc_kernel_entry {
  const char *name;          /* kernel name in the IR */
  const char *configuration; /* the comptime configuration, e.g. "tile=16" */
} cubecc_kernel_entry;

/* Version 2: one value of a launch, by kind (i for INT, u for UINT, f for FLOAT). */
typedef struct cubecc_launch_value {
  uint32_t kind;
  uint32_t reserved; /* 0 */
  union {
    int64_t i;
    uint64_t u;
    double f;
  } value;
} cubecc_launch_value;

/* Version 2: how to launch one variant of a tunable at one shape. Buffers and values follow the
 * kernel's buffer parameters and (scalar) value parameters, each list in parameter order. */
typedef struct cubecc_tunable_launch {
  uint32_t grid[3]; /* number of workgroups */
  uint32_t buffer_count;
  uint64_t buffer_elements[CUBECC_TUNABLE_MAX_BUFFERS];
  uint32_t value_count;
  uint32_t reserved; /* 0 */
  cubecc_launch_value values[CUBECC_TUNABLE_MAX_VALUES];
} cubecc_tunable_launch;

/* Version 2: a tunable (cubecc/dsl/tunable.h). */
typedef struct cubecc_tunable_entry {
  const char *name;
  uint32_t variant_count;
  const char *const *variants; /* names of kernels in the library's table */
  uint32_t dimension_count;
  const char *const *dimensions;
  uint32_t anchor_count;
  const uint64_t *anchors;   /* anchor_count rows of dimension_count extents */
  const char *element_types; /* the bucket's types, e.g. "f32" */
  double relative_tolerance; /* float outputs of variants may differ by this much; 0: exact */
} cubecc_tunable_entry;

typedef struct cubecc_kernel_library {
  uint32_t abi_version; /* CUBECC_KERNEL_LIBRARY_ABI_VERSION */
  uint32_t count;
  const cubecc_kernel_entry *kernels;
  /* Traces kernel `index` and returns a module holding it as .cir text, or NULL when tracing or
   * verification failed (then last_error() says why, with the kernel source's file and line).
   * The text stays valid until the next call from the same thread. */
  const char *(*trace_ir)(uint32_t index);
  const char *(*last_error)(void);
  /* Version 2 and later. */
  uint32_t tunable_count;
  const cubecc_tunable_entry *tunables;
  /* Fills `launch` for variant `variant` (index into the tunable's variants) of tunable `tunable`
   * at `shape` (dimension_count extents). Returns 1 when it did, 0 when that variant cannot run
   * that shape, -1 on failure (then last_error() says why). */
  int (*describe_tunable)(uint32_t tunable, uint32_t variant, const uint64_t *shape,
                          cubecc_tunable_launch *launch);
} cubecc_kernel_library;

const cubecc_kernel_library *cubecc_kernel_library_v1(void);

#ifdef __cplusplus
}
#endif

#endif
