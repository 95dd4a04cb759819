//===- cpu.h - The CPU backend: IR kernels to native SIMD code through LLVM
//--------------------===//
//
// compile_cpu lowers a kernel to LLVM IR (SPMD on SIMD: one invocation per vector lane, a subgroup
// is the vector width, divergent control flow under masks, barriers by splitting the kernel into
// regions), optimizes it with LLVM's pipeline for an x86-64 micro-architecture level and links it
// into a shared object that the cpu device loads without LLVM (cpu_abi.h is the calling
// convention). LLVM lives in a plugin, libcubecc_llvm.so, opened on the first compile, so that a
// program that only loads compiled kernels never loads LLVM.
//
// Targets: cpu:x86-64-v2 (SSE4.2, 4 f32 lanes), cpu:x86-64-v3 (AVX2 + FMA, 8 lanes),
// cpu:x86-64-v4 (AVX-512, 16 lanes) and cpu:native (the host's own CPU, resolved when compiling).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/codegen/target.h"
#include "cubecc/ir/diagnostic.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::ir {
class Kernel;
}

namespace cubecc::codegen {

/// The CPU levels cubecc compiles for, oldest first: "x86-64-v2", "x86-64-v3", "x86-64-v4".
const std::vector<std::string> &cpu_levels();

/// The best level this host's CPU runs ("x86-64-v4" on an AVX-512 machine), as detected with
/// cpuid; CUBECC_CPU_LEVEL (a level name) lowers it, to pretend the CPU lacks features.
std::string host_cpu_level();

/// What codegen may emit for `level` ("x86-64-v3", or "native" for host_cpu_level()): every type,
/// all atomics, subgroups of the level's f32 vector width, fused fma.
TargetFeatures cpu_features(std::string_view level);

struct CpuCompileOptions {
  std::string level = "x86-64-v3"; ///< a level of cpu_levels(), or "native"
  /// Checked mode: every buffer access out of bounds is recorded in cubecc_cpu_launch::fault.
  bool checked = false;
};

struct CpuBinary {
  std::string level;  ///< the level it was built for (native resolved to a level)
  std::string object; ///< the ELF shared object (cpu_abi.h)
  KernelAbi abi;
};

/// Lowers, optimizes and links `kernel` (which must verify). On failure returns nothing and
/// appends to `errors` (naming the kernel, and the op and its location where one is at fault).
std::optional<CpuBinary> compile_cpu(const ir::Kernel &kernel, const CpuCompileOptions &options,
                                     std::vector<ir::Diagnostic> &errors);

/// Text forms for `cubecc compile --emit llvm|asm`: the LLVM IR after LLVM's optimizations, or
/// the assembly.
enum class CpuText { LlvmIr, Assembly };
std::optional<std::string> emit_cpu_text(const ir::Kernel &kernel, const CpuCompileOptions &options,
                                         CpuText kind, std::vector<ir::Diagnostic> &errors);

/// What identifies the compiler compile_cpu would use, without loading it (for cache keys): the
/// LLVM version cubecc was built with and the plugin file found (its path, size and modification
/// time, so that a rebuilt backend misses every cached object); "no LLVM plugin" when none.
std::string cpu_compiler_identity();

/// "LLVM 19.1.7", or empty with `why` set when the LLVM plugin cannot be loaded.
std::string llvm_version(std::string *why = nullptr);

} // namespace cubecc::codegen
