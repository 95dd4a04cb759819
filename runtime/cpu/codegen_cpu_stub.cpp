//===- codegen_cpu_stub.cpp - TEMPORARY: codegen/cpu.h until the LLVM backend is merged
//--------===//
//
// Stands in for the LLVM backend (branch llvm-backend, codegen/llvm/) so that the cpu device
// links and its tests run before that branch is merged: the CPU levels and their features, the
// host's level, and a compile_cpu that refuses every kernel. DELETE this file (and its line in
// runtime/CMakeLists.txt) when merging llvm-backend.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/cpu.h"

#include "cubecc/ir/ir.h"

#include <fmt/format.h>

#include <cstdlib>

namespace cubecc::codegen {

const std::vector<std::string> &cpu_levels() {
  static const std::vector<std::string> levels = {"x86-64-v2", "x86-64-v3", "x86-64-v4"};
  return levels;
}

std::string host_cpu_level() {
  std::string level;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("x86-64-v4"))
    level = "x86-64-v4";
  else if (__builtin_cpu_supports("x86-64-v3"))
    level = "x86-64-v3";
  else if (__builtin_cpu_supports("x86-64-v2"))
    level = "x86-64-v2";
#endif
  const char *wanted = std::getenv("CUBECC_CPU_LEVEL");
  if (wanted && *wanted && !level.empty()) {
    const std::vector<std::string> &levels = cpu_levels();
    for (size_t i = 0; i < levels.size(); ++i)
      if (levels[i] == wanted && levels[i] < level)
        level = levels[i];
  }
  return level;
}

TargetFeatures cpu_features(std::string_view level) {
  std::string resolved = level == "native" ? host_cpu_level() : std::string(level);
  TargetFeatures f;
  f.target = "cpu:" + resolved;
  f.int8 = f.int16 = f.int64 = f.float16 = f.bfloat16 = f.float64 = true;
  f.int64_atomics = f.float32_atomic_add = f.float32_atomics = f.float64_atomic_add = true;
  f.narrow_atomics = true;
  f.fused_fma = true;
  f.signed_zero_inf_nan_preserve = true;
  f.subgroup_arithmetic = f.subgroup_shuffle = f.subgroup_ballot = true;
  f.subgroup_extended_types = true;
  f.subgroup_size = resolved == "x86-64-v4" ? 16 : resolved == "x86-64-v3" ? 8 : 4;
  f.linear_subgroups = true;
  f.max_shared_bytes = 1u << 20;
  f.max_param_block_bytes = 4096;
  f.max_workgroup_invocations = 1024;
  f.max_workgroup_size[0] = f.max_workgroup_size[1] = f.max_workgroup_size[2] = 1024;
  return f;
}

std::optional<CpuBinary> compile_cpu(const ir::Kernel &kernel, const CpuCompileOptions &,
                                     std::vector<ir::Diagnostic> &errors) {
  errors.push_back({"",
                    0,
                    0,
                    fmt::format("kernel '{}': the CPU backend is not built (the LLVM backend is "
                                "not merged into this branch yet)",
                                kernel.name()),
                    {}});
  return std::nullopt;
}

std::optional<std::string> emit_cpu_text(const ir::Kernel &kernel, const CpuCompileOptions &options,
                                         CpuText, std::vector<ir::Diagnostic> &errors) {
  compile_cpu(kernel, options, errors);
  return std::nullopt;
}

std::string llvm_version(std::string *why) {
  if (why)
    *why = "the LLVM backend is not merged into this branch yet";
  return "";
}

} // namespace cubecc::codegen
