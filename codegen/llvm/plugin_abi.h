//===- plugin_abi.h - The C interface of libcubecc_llvm.so, the LLVM plugin -------------------===//
//
// LLVM lives only in the plugin: the codegen library (cpu_backend.cpp) opens it with dlopen on
// the first CPU compile and talks to it through these extern "C" functions, so a process that
// only loads compiled kernels never maps LLVM. The kernel travels as IR text (a module holding
// it, printed with locations); the plugin parses it with its own static copy of the IR library.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUBECC_LLVM_PLUGIN_ABI_VERSION 1u

typedef enum cubecc_llvm_emit {
  CUBECC_LLVM_EMIT_SHARED_OBJECT = 0, ///< the linked ELF shared object (cpu_abi.h)
  CUBECC_LLVM_EMIT_LLVM_IR = 1,       ///< the LLVM IR after optimization, as text
  CUBECC_LLVM_EMIT_ASSEMBLY = 2,      ///< the assembly, as text
} cubecc_llvm_emit;

typedef struct cubecc_llvm_request {
  const char *ir_text; ///< a module (.cir text) that holds the kernel
  size_t ir_size;
  const char *kernel_name; ///< the kernel to compile
  const char *level;       ///< "x86-64-v2", "x86-64-v3" or "x86-64-v4"
  int checked; ///< 1: bounds-checked buffer, shared and local array accesses (cpu_abi.h)
  int emit;    ///< a cubecc_llvm_emit
} cubecc_llvm_request;

/// Receives the output bytes (once, on success).
typedef void (*cubecc_llvm_output_fn)(void *user, const char *data, size_t size);
/// Receives one error: file (may be empty), line and column (0 unknown), message.
typedef void (*cubecc_llvm_diagnostic_fn)(void *user, const char *file, uint32_t line,
                                          uint32_t column, const char *message);

/// What cubecc_llvm_compile returns for a failure that is cubecc's own bug.
#define CUBECC_LLVM_INTERNAL_FAILURE 2

/// CUBECC_LLVM_PLUGIN_ABI_VERSION of the plugin.
uint32_t cubecc_llvm_plugin_abi_version(void);
/// "LLVM 19.1.7".
const char *cubecc_llvm_version(void);
/// Compiles; returns 0 on success (output called once), else nonzero (diagnostic called at
/// least once): CUBECC_LLVM_INTERNAL_FAILURE when the failure is a bug in cubecc (the LLVM IR it
/// made does not verify, an exception inside the plugin), 1 when the request was refused.
/// Thread-safe: compiles run in parallel, only the final link is serialized.
int cubecc_llvm_compile(const cubecc_llvm_request *request, cubecc_llvm_output_fn output,
                        cubecc_llvm_diagnostic_fn diagnostic, void *user);

#ifdef __cplusplus
}
#endif
