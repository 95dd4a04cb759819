//===- cpu_abi.h - How the cpu device calls a kernel compiled by the LLVM backend -------------===//
//
// The contract between codegen/llvm (which writes the code) and runtime/cpu (which calls it). A
// compiled CPU kernel is an ELF shared object (x86-64, ET_DYN) that exports:
//
//   void cubecc_cpu_kernel(const cubecc_cpu_launch *launch, uint64_t first_group,
//                          uint64_t end_group, void *shared);
//   const uint32_t cubecc_cpu_abi_version;   // CUBECC_CPU_ABI_VERSION
//   const uint32_t cubecc_cpu_subgroup_size; // lanes per subgroup: the SIMD width it was built for
//   const char cubecc_cpu_interface[];       // the launch interface its code was built for
//
// cubecc_cpu_interface is NUL-terminated text, "; "-separated: "workgroup X Y Z", "shared N" (the
// shared bytes the code uses), then per parameter in order "<type> binding B" (a buffer) or
// "<type> at OFFSET xLANE_BYTES" (a value in the parameter block), types as the IR prints them:
//   "workgroup 64 1 1; shared 256; buffer<f32, read> binding 0; f32 at 0 x4"
// The device compares it with the launch metadata it was given (a bundle's entry), so metadata
// that disagrees with the code is refused instead of running the code on wrong memory.
//
// cubecc_cpu_kernel runs the workgroups with linear ids [first_group, end_group) (x fastest, then
// y, then z, over launch->num_workgroups), each one whole, one after another, on the calling
// thread. `shared` is the workgroup memory of KernelAbi::shared_bytes (64-byte aligned; may be
// null when that is 0); the kernel does not clear it between workgroups (shared.alloc is
// uninitialized, as on GPUs). Invocations within a workgroup run SIMD-wide: subgroup s of a
// workgroup holds local_index [s * subgroup_size, (s + 1) * subgroup_size), the last one partial.
// The device spreads ranges of workgroups over its threads; each thread passes its own `shared`.
//
// Buffers and values follow kernel_abi.h: buffer binding b starts at buffers[b] and holds
// buffer_counts[b] elements (what buffer.size returns); value lanes are read from `params`, the
// parameter block laid out by KernelAbi (offset and lane bytes per slot).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUBECC_CPU_ABI_VERSION 2u
#define CUBECC_CPU_KERNEL_SYMBOL "cubecc_cpu_kernel"
#define CUBECC_CPU_ABI_VERSION_SYMBOL "cubecc_cpu_abi_version"
#define CUBECC_CPU_SUBGROUP_SIZE_SYMBOL "cubecc_cpu_subgroup_size"
#define CUBECC_CPU_INTERFACE_SYMBOL "cubecc_cpu_interface"

/// The first fault of a launch. The kernel claims the record with an atomic compare-and-swap of
/// `kind` from 0 and fills it; later faults of the launch are dropped. In checked mode, an
/// out-of-bounds access (kinds 1-3): a faulting load gives 0 and a faulting store or atomic does
/// nothing (as the bounds-check pass). In any mode, a call whose local arrays too big for the
/// stack could not be allocated (kind 4, `count` the bytes asked for, `param` and `index` 0) runs
/// none of its workgroups.
#define CUBECC_CPU_FAULT_NO_MEMORY 4u
/// cubecc_cpu_fault::param of an out-of-bounds access to a shared or a local array (checked mode).
#define CUBECC_CPU_FAULT_SHARED_ARRAY 0xffffffffu
#define CUBECC_CPU_FAULT_LOCAL_ARRAY 0xfffffffeu
typedef struct cubecc_cpu_fault {
  uint32_t kind;  ///< 0 none, 1 load, 2 store, 3 atomic, 4 no memory for the local arrays
  uint32_t param; ///< the kernel parameter (its index in the IR signature) accessed, or one of
                  ///< CUBECC_CPU_FAULT_SHARED_ARRAY / _LOCAL_ARRAY
  uint64_t index; ///< the element index used
  uint64_t count; ///< the buffer's element count (the bound it broke)
  uint32_t line;  ///< the access's source line (0 unknown)
  uint32_t column;
} cubecc_cpu_fault;

typedef struct cubecc_cpu_launch {
  void *const *buffers;          ///< one per buffer binding: the first element of the bound range
  const uint64_t *buffer_counts; ///< one per buffer binding: its element count
  const void *params;            ///< the parameter block (KernelAbi::param_block_bytes)
  uint32_t num_workgroups[3];
  uint32_t reserved;
  cubecc_cpu_fault *fault; ///< where the first fault goes (null: faults are not recorded)
} cubecc_cpu_launch;

typedef void (*cubecc_cpu_kernel_fn)(const cubecc_cpu_launch *launch, uint64_t first_group,
                                     uint64_t end_group, void *shared);

#ifdef __cplusplus
}
#endif
