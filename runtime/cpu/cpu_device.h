//===- cpu_device.h - Native x86-64 kernels from the LLVM backend, on the host's cores
//---------===//
//
// Memory is host memory (64-byte aligned; host pointers are adopted without copying). A kernel is
// an ELF shared object made by codegen::compile_cpu for the host's CPU level (cpu_abi.h is how it
// is called), loaded from memory (memfd + dlopen) after its headers are checked
// (codegen/cpu_elf.h); loading needs no LLVM. compile() keeps each object in the per-user cache
// (object_cache.h), so a second start of a program compiles nothing. A launch spreads ranges of
// workgroups over all cores with oneTBB, each task with its own 64-byte-aligned shared memory, and
// returns when every workgroup is done: launches run one after another, in order, and copies and
// synchronize() have nothing to wait for. Launch times are host steady-clock times (ns) of each
// launch. A kernel's local arrays live on the stack of the thread that runs its workgroups:
// oneTBB's workers get 32 MiB stacks (set when the first cpu device opens); the launching thread
// has its own.
//
// Environment:
//   CUBECC_CPU_LEVEL=x86-64-v2|v3|v4  compile for this level, not the best the CPU runs
//                                     (codegen/cpu.h); an object for a level above it is refused
//   CUBECC_CHECKED=1                  compile every kernel in checked mode: an out-of-bounds
//                                     buffer access makes the launch throw an Error naming the
//                                     kernel, the parameter, the index, the bound and the line;
//                                     kernels are compiled, never taken from environments
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/runtime/device.h"

#include <memory>
#include <string>

namespace cubecc::ir {
class Kernel;
}

namespace cubecc::runtime {

/// Throws Error "no device: cpu: <reason>" on a host that is not x86-64 or is below
/// x86-64-v2, or when CUBECC_CHECKED is not 0 or 1.
std::unique_ptr<Device> open_cpu_device();

/// What the cpu device runs: "x86-64-v2" to "x86-64-v4", or empty with `why` when it cannot run
/// on this host.
std::string cpu_device_level(std::string *why = nullptr);

/// The key under which the cpu device keeps `kernel` (as given to Device::compile) compiled for
/// `level` in the per-user object cache (object_cache.h): its structural hash, the level, checked
/// mode, the CPU ABI, LLVM and cubecc versions. In checked mode the object holds source lines for
/// its messages, which the structural hash ignores, so the printed kernel is part of the key.
/// How many kernels cpu devices of this process compiled (codegen::compile_cpu calls; kernels
/// taken from the object cache or loaded from binaries do not count).
uint64_t cpu_device_compiles();

std::string cpu_object_cache_key(const ir::Kernel &kernel, const std::string &level, bool checked);

} // namespace cubecc::runtime
