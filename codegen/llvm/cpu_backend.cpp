//===- cpu_backend.cpp - cpu.h: the CPU backend's front, which opens the LLVM plugin ---------===//
//
// No LLVM here: the kernel is printed as IR text and handed to libcubecc_llvm.so (plugin_abi.h),
// opened with dlopen on the first compile from, in order: $CUBECC_LLVM_PLUGIN, the directory of
// the shared object that holds this code (an installed libcubecc.so) or ../lib next to it (an
// installed executable), and the build tree. A missing plugin is an error naming every path
// tried.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/cpu.h"

#include "cubecc/codegen/cpu_abi.h"
#include "cubecc/ir/clone.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/printer.h"
#include "cubecc/passes/legalize.h"
#include "llvm/plugin_abi.h"

#include <fmt/format.h>

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace cubecc::codegen {
namespace {

struct Plugin {
  uint32_t (*abi_version)() = nullptr;
  const char *(*version)() = nullptr;
  int (*compile)(const cubecc_llvm_request *, cubecc_llvm_output_fn, cubecc_llvm_diagnostic_fn,
                 void *) = nullptr;
  std::string error; ///< why it could not be opened (empty when open)
};

const Plugin &plugin();

/// Where the plugin may be, in the order it is looked for: $CUBECC_LLVM_PLUGIN, next to the shared
/// object holding this code (an installed libcubecc.so), the prefix's lib/ of an installed tool,
/// and the build tree.
std::vector<std::string> plugin_candidates() {
  std::vector<std::string> candidates;
#if CUBECC_HAVE_LLVM_PLUGIN
  if (const char *env = std::getenv("CUBECC_LLVM_PLUGIN"); env && *env)
    candidates.push_back(env);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void *>(&plugin), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    size_t slash = self.rfind('/');
    if (slash != std::string::npos) {
      candidates.push_back(self.substr(0, slash + 1) + "libcubecc_llvm.so");
      // An installed tool (bin/cubecc, the codegen library linked in): the prefix's lib/.
      candidates.push_back(self.substr(0, slash + 1) + "../lib/libcubecc_llvm.so");
    }
  }
  candidates.push_back(CUBECC_LLVM_PLUGIN_PATH);
#endif
  return candidates;
}

/// The plugin, opened once per process (never closed).
const Plugin &plugin() {
  static Plugin p;
  static std::once_flag once;
  std::call_once(once, [] {
#if CUBECC_HAVE_LLVM_PLUGIN
    std::string tried;
    for (const std::string &path : plugin_candidates()) {
      void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        const char *why = dlerror();
        tried += fmt::format("\n  {}: {}", path, why ? why : "cannot be opened");
        continue;
      }
      p.abi_version = reinterpret_cast<uint32_t (*)()>(dlsym(h, "cubecc_llvm_plugin_abi_version"));
      p.version = reinterpret_cast<const char *(*)()>(dlsym(h, "cubecc_llvm_version"));
      p.compile = reinterpret_cast<decltype(p.compile)>(dlsym(h, "cubecc_llvm_compile"));
      if (!p.abi_version || !p.version || !p.compile) {
        tried += fmt::format("\n  {}: not a cubecc LLVM plugin (entry points missing)", path);
        p.compile = nullptr;
        continue;
      }
      if (p.abi_version() != CUBECC_LLVM_PLUGIN_ABI_VERSION) {
        tried += fmt::format("\n  {}: plugin interface version {}, this cubecc needs {}", path,
                             p.abi_version(), CUBECC_LLVM_PLUGIN_ABI_VERSION);
        p.compile = nullptr;
        continue;
      }
      return;
    }
    p.error = "cannot load the LLVM plugin libcubecc_llvm.so; tried:" + tried;
#else
    p.error = "the CPU backend was not built: LLVM 19 with lld (llvm-19-dev, liblld-19-dev) was "
              "not found when cubecc was built";
#endif
  });
  return p;
}

/// The micro-architecture levels as GCC's cpuid check defines them (the psABI's lists: v2 adds
/// SSE4.2, SSSE3, POPCNT, CMPXCHG16B, LAHF; v3 AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE, XSAVE; v4
/// AVX-512 F, BW, CD, DQ, VL).
std::string detected_level() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4"))
    return "x86-64-v4";
  if (__builtin_cpu_supports("x86-64-v3"))
    return "x86-64-v3";
  if (__builtin_cpu_supports("x86-64-v2"))
    return "x86-64-v2";
  return "";
}

int level_rank(std::string_view level) {
  const auto &levels = cpu_levels();
  auto it = std::find(levels.begin(), levels.end(), level);
  return it == levels.end() ? -1 : static_cast<int>(it - levels.begin());
}

/// `options.level` with "native" resolved; empty with `error` set when it is not a level.
std::string resolve_level(std::string_view level, std::string &error) {
  if (level == "native") {
    std::string host = host_cpu_level();
    const char *env = std::getenv("CUBECC_CPU_LEVEL");
    if (env && *env && host != env) {
      error = level_rank(env) < 0
                  ? fmt::format("CUBECC_CPU_LEVEL={} is not a CPU level (x86-64-v2, x86-64-v3, "
                                "x86-64-v4)",
                                env)
                  : fmt::format("CUBECC_CPU_LEVEL={} is above this CPU's level ({})", env, host);
      return {};
    }
    if (host.empty())
      error = "this CPU does not reach x86-64-v2 (SSE4.2, POPCNT, SSSE3), the oldest CPU level "
              "cubecc compiles for";
    return host;
  }
  if (level_rank(level) < 0) {
    error = fmt::format("unknown CPU level '{}' (expected x86-64-v2, x86-64-v3, x86-64-v4 or "
                        "native)",
                        level);
    return {};
  }
  return std::string(level);
}

struct Collected {
  std::string output;
  std::vector<ir::Diagnostic> diagnostics;
};

std::optional<std::string> run_plugin(const ir::Kernel &kernel, const CpuCompileOptions &options,
                                      int emit, std::string &level,
                                      std::vector<ir::Diagnostic> &errors) {
  auto fail = [&](std::string message) {
    errors.push_back(ir::Diagnostic{
        "", 0, 0, fmt::format("kernel {}: {}", ir::format_symbol(kernel.name()), message), {}});
    return std::nullopt;
  };
  std::string why;
  level = resolve_level(options.level, why);
  if (level.empty())
    return fail(why);
  TargetFeatures features = cpu_features(level);
  if (!check_target_support(kernel, features, errors))
    return std::nullopt;
  const Plugin &p = plugin();
  if (!p.compile)
    return fail(p.error);
  // The plugin lowers legalized IR (docs/passes.md, Legal IR); libm has erf and C's pow.
  passes::LegalizeTarget target;
  target.name = "cpu";
  target.native_erf = true;
  target.c_pow = true;
  target.native_libm = true;
  target.native_bit_ops = true;
  target.native_saturating = true;
  std::unique_ptr<ir::Module> legal = ir::copy_kernel(kernel);
  passes::legalize(*legal, target);
  std::string text = "module @cpu {\n" + ir::to_string(*legal->kernels().front()) + "}\n";
  cubecc_llvm_request request{text.data(),   text.size(),     kernel.name().c_str(),
                              level.c_str(), options.checked, emit};
  Collected collected;
  int rc = p.compile(
      &request,
      [](void *user, const char *data, size_t size) {
        static_cast<Collected *>(user)->output.assign(data, size);
      },
      [](void *user, const char *file, uint32_t line, uint32_t column, const char *message) {
        static_cast<Collected *>(user)->diagnostics.push_back(
            ir::Diagnostic{file ? file : "", line, column, message ? message : "", {}});
      },
      &collected);
  if (rc != 0) {
    if (collected.diagnostics.empty())
      return fail("the LLVM plugin failed without a message (a bug in cubecc)");
    for (ir::Diagnostic &d : collected.diagnostics) {
      d.internal = rc == CUBECC_LLVM_INTERNAL_FAILURE;
      errors.push_back(std::move(d));
    }
    return std::nullopt;
  }
  return std::move(collected.output);
}

} // namespace

const std::vector<std::string> &cpu_levels() {
  static const std::vector<std::string> levels = {"x86-64-v2", "x86-64-v3", "x86-64-v4"};
  return levels;
}

std::string host_cpu_level() {
  std::string host = detected_level();
  const char *env = std::getenv("CUBECC_CPU_LEVEL");
  if (!env || !*env)
    return host;
  int want = level_rank(env), have = level_rank(host);
  if (want < 0 || want > have)
    return host; // resolve_level("native") reports the bad variable
  return env;
}

TargetFeatures cpu_features(std::string_view level) {
  std::string why;
  std::string resolved = resolve_level(level, why);
  TargetFeatures f;
  f.target = "cpu:" + (resolved.empty() ? std::string(level) : resolved);
  f.int8 = f.int16 = f.int64 = f.float16 = f.bfloat16 = f.float64 = true;
  f.int64_atomics = f.float32_atomic_add = f.float32_atomics = f.float64_atomic_add = true;
  f.float32_atomic_min_max = true;
  f.narrow_atomics = true;
  f.fused_fma = true;
  f.signed_zero_inf_nan_preserve = true;
  f.subgroup_arithmetic = f.subgroup_extended_types = f.subgroup_shuffle = f.subgroup_ballot = true;
  f.subgroup_size = resolved == "x86-64-v4" ? 16 : resolved == "x86-64-v3" ? 8 : 4;
  f.linear_subgroups = true;
  // Every shape: a gang computes its matrices element by element (codegen/llvm/lower_matrix.cpp).
  f.matrix_shapes = ir::matrix_shape_mask([](const ir::MatrixShape &) { return true; });
  f.max_shared_bytes = 64u << 20;
  f.max_param_block_bytes = 1u << 20;
  f.max_workgroup_invocations = 1024;
  return f;
}

std::optional<CpuBinary> compile_cpu(const ir::Kernel &kernel, const CpuCompileOptions &options,
                                     std::vector<ir::Diagnostic> &errors) {
  std::string level;
  auto object = run_plugin(kernel, options, CUBECC_LLVM_EMIT_SHARED_OBJECT, level, errors);
  if (!object)
    return std::nullopt;
  return CpuBinary{level, std::move(*object), KernelAbi::of(kernel)};
}

std::optional<std::string> emit_cpu_text(const ir::Kernel &kernel, const CpuCompileOptions &options,
                                         CpuText kind, std::vector<ir::Diagnostic> &errors) {
  std::string level;
  return run_plugin(kernel, options,
                    kind == CpuText::LlvmIr ? CUBECC_LLVM_EMIT_LLVM_IR : CUBECC_LLVM_EMIT_ASSEMBLY,
                    level, errors);
}

std::string llvm_version(std::string *why) {
  const Plugin &p = plugin();
  if (!p.compile) {
    if (why)
      *why = p.error;
    return {};
  }
  return p.version();
}

std::string cpu_compiler_identity() {
#if CUBECC_HAVE_LLVM_PLUGIN
  for (const std::string &path : plugin_candidates()) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      return fmt::format("LLVM {} plugin {} {} {}.{:09}", CUBECC_LLVM_BUILD_VERSION, path,
                         st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  }
#endif
  return "no LLVM plugin";
}

} // namespace cubecc::codegen
