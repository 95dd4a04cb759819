/*===- kernel_library.h - The C ABI of a kernel library (a shared object built with the DSL) ===*
 *
 * A kernel library exports one symbol, CUBECC_KERNEL_LIBRARY_SYMBOL, returning a table of its
 * registered kernels. Tools (cubecc, CI jobs) dlopen the library, read the table and ask for each
 * kernel's IR as text, without running the application. The text is the stable interface: it
 * carries the IR format, so a tool and a library built by different compilers still agree.
 *
 *===----------------------------------------------------------------------------------------===*/
#ifndef CUBECC_DSL_KERNEL_LIBRARY_H
#define CUBECC_DSL_KERNEL_LIBRARY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUBECC_KERNEL_LIBRARY_ABI_VERSION 1
#define CUBECC_KERNEL_LIBRARY_SYMBOL "cubecc_kernel_library_v1"

typedef struct cubecc_kernel_entry {
  const char *name;          /* kernel name in the IR */
  const char *configuration; /* the comptime configuration, e.g. "tile=16" */
} cubecc_kernel_entry;

typedef struct cubecc_kernel_library {
  uint32_t abi_version; /* CUBECC_KERNEL_LIBRARY_ABI_VERSION */
  uint32_t count;
  const cubecc_kernel_entry *kernels;
  /* Traces kernel `index` and returns a module holding it as .cir text, or NULL when tracing or
   * verification failed (then last_error() says why, with the kernel source's file and line).
   * The text stays valid until the next call from the same thread. */
  const char *(*trace_ir)(uint32_t index);
  const char *(*last_error)(void);
} cubecc_kernel_library;

const cubecc_kernel_library *cubecc_kernel_library_v1(void);

#ifdef __cplusplus
}
#endif

#endif
