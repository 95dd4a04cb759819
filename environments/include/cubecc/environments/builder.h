//===- builder.h - Compiling kernels for every listed target into a bundle's entries ----------===//
//
// What `cubecc env build` does, as a library: every kernel is optimized once with the options
// the runtime loads with (-O2), then compiled for every target — SPIR-V for `vulkan`, the
// optimized IR for `interp`, CUBIN per listed sm_XX plus PTX of the oldest for `cuda:*`, a code
// object per listed gfx arch for `hip:*` — on all cores. Nothing here needs a GPU.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/environments/bundle.h"
#include "cubecc/ir/diagnostic.h"

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::ir {
class Kernel;
}

namespace cubecc::environments {

struct BuildOptions {
  /// "vulkan", "interp", "cuda:sm_80", "hip:gfx90a", ... (checked by codegen::parse_targets).
  std::vector<std::string> targets;
  /// The pipeline level; the runtime loads at -O2 (runtime::kRuntimeCompileOptions). 0 builds
  /// kernels exactly as given (for callers that optimize themselves).
  int opt_level = 2;
  /// Compile jobs at once; 0: one per core.
  unsigned jobs = 0;
  /// Build only share `shard_index` (0 .. shard_count - 1) of the (kernel, backend) work, for a
  /// build spread over machines: a job's share is a hash of its kernel and targets, so the
  /// shares are the same on every machine and for any order of the inputs, and merging the
  /// shards' bundles (merge_contents, then serialize_bundle) gives the bytes of the whole build.
  /// A shard's bundle holds the kernels that have work in it, with their binaries from it.
  unsigned shard_index = 0;
  unsigned shard_count = 1;
  /// Leave a kernel out of a target that cannot run it (a type, atomic, matrix shape or subgroup
  /// size the target lacks, shared memory or a workgroup over its limits: Backend::check_support
  /// on the optimized kernel) instead of failing the build, calling `skipped` for each (kernel,
  /// target) left out. For a library with per-vendor variants (the tensor-core GEMM's warp-32
  /// and wave-64 kernels): each target gets those it runs.
  bool skip_unsupported = false;
  std::function<void(const std::string &kernel, const std::string &target, const std::string &why)>
      skipped;
  /// Called after each job (any thread, serialized): jobs done, jobs in all, what finished.
  std::function<void(size_t done, size_t total, const std::string &what)> progress;
};

/// One kernel to build, as traced (its structural hash is the key).
struct KernelInput {
  const ir::Kernel *kernel = nullptr;
  std::string configuration;
  /// The kernel library it was traced from (library_name_of_input) and that library's build
  /// (library_build_of): recorded in its entry, so that an application without the library can
  /// ask for the kernel by name (Runtime::kernel_from_environment). "" for kernels from IR text.
  std::string library = {};
  std::string library_build = {};
};

/// The name a kernel library input goes by in a bundle: its file name without directories and
/// extension, and without "lib" for a shared library ("build/libexamples.so" -> "examples",
/// "kernels/axpy.cpp" -> "axpy").
std::string library_name_of_input(std::string_view path);

/// Which build of a library made its kernels: xxh3-128 (32 hex digits) of every kernel's name,
/// configuration and structural hash (as traced), independent of their order. The same source
/// traced by the same cubecc gives the same id; any change to a kernel, to its comptime
/// configurations or to the set of kernels gives another.
std::string library_build_of(std::span<const KernelInput> kernels);

/// "-O2" for level 2.
std::string compile_options(int opt_level);

/// Compiles every kernel for every target. On failure returns nothing and fills `errors` (each
/// names the kernel and the target); nothing is half-built.
std::optional<BundleContents> build_entries(std::span<const KernelInput> kernels,
                                            const BuildOptions &options,
                                            std::vector<ir::Diagnostic> &errors);

} // namespace cubecc::environments
