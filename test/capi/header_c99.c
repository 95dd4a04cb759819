/*===- header_c99.c - cubecc.h compiles as strict C99 (built with -std=c99 -pedantic-errors) -===*/
#include "cubecc.h"

/* Every handle and struct of the header is usable from C99. */
size_t cubecc_test_header_c99_sizes(void);
size_t cubecc_test_header_c99_sizes(void) {
  cubecc_arg arg = {CUBECC_ARG_SCALAR, CUBECC_DTYPE_F32, 0, {0}};
  return sizeof(cubecc_device_info) + sizeof(cubecc_statistics) + sizeof(cubecc_vulkan_handles) +
         sizeof(arg) + sizeof(cubecc_runtime) + sizeof(cubecc_release_fn);
}
