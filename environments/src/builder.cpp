//===- builder.cpp - Kernels to bundle entries, for every target, on all cores ----------------===//
#include "cubecc/environments/builder.h"

#include "cubecc/codegen/cpu.h"
#include "cubecc/codegen/cuda.h"
#include "cubecc/codegen/hip.h"
#include "cubecc/codegen/spirv.h"
#include "cubecc/ir/clone.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

namespace cubecc::environments {

namespace {

/// The targets of one compiler run: all listed sm_XX go to one NVRTC call, all gfx archs to one
/// hipRTC call.
struct TargetGroup {
  std::string backend; ///< "vulkan", "interp", "cuda", "hip", "cpu"
  std::vector<std::string> archs;
};

std::vector<TargetGroup> group_targets(const std::vector<std::string> &targets) {
  std::vector<TargetGroup> groups;
  auto group = [&](const std::string &backend) -> TargetGroup & {
    for (TargetGroup &g : groups)
      if (g.backend == backend)
        return g;
    groups.push_back({backend, {}});
    return groups.back();
  };
  for (const std::string &t : targets) {
    size_t colon = t.find(':');
    TargetGroup &g = group(t.substr(0, colon));
    if (colon != std::string::npos)
      g.archs.push_back(t.substr(colon + 1));
  }
  return groups;
}

/// The job: one kernel (already optimized) for one group of targets.
struct Job {
  size_t kernel;
  const TargetGroup *group;
};

/// Artifacts of `kernel` for `group`, or errors.
std::vector<Artifact> compile_group(const ir::Kernel &kernel, const TargetGroup &group,
                                    std::vector<ir::Diagnostic> &errors) {
  std::vector<Artifact> out;
  if (group.backend == "interp") {
    Artifact a;
    a.target = {"interp", "ir", "", ""};
    a.abi = codegen::KernelAbi::of(kernel);
    a.data =
        ir::to_string(*kernel.module()); // the kernel's own module: the text form is a module's
    out.push_back(std::move(a));
  } else if (group.backend == "vulkan") {
    codegen::TargetFeatures features = codegen::TargetFeatures::vulkan_baseline();
    std::optional<codegen::SpirvKernel> spirv = codegen::emit_spirv(kernel, features, errors);
    if (!spirv)
      return {};
    if (std::string problems = codegen::validate_spirv(spirv->words); !problems.empty()) {
      errors.push_back(
          {"",
           0,
           0,
           fmt::format("kernel '{}': the SPIR-V does not validate (a bug in cubecc):\n{}",
                       kernel.name(), problems),
           {}});
      return {};
    }
    Artifact a;
    a.target = {"vulkan", "spirv", features.fingerprint(), ""};
    a.abi = spirv->abi;
    a.data.assign(reinterpret_cast<const char *>(spirv->words.data()), spirv->words.size() * 4);
    out.push_back(std::move(a));
  } else if (group.backend == "cuda") {
    std::optional<codegen::CudaBinary> binary = codegen::compile_cuda(kernel, group.archs, errors);
    if (!binary)
      return {};
    std::string toolkit = codegen::cuda_toolkit();
    for (const codegen::CudaBinary::Cubin &cubin : binary->cubins)
      out.push_back({{"cuda:" + cubin.arch, "cubin", "", toolkit},
                     binary->source.entry,
                     binary->source.abi,
                     cubin.bytes});
    // PTX of the oldest listed arch: the driver JIT-compiles it for GPUs newer than every CUBIN.
    out.push_back({{"cuda:" + binary->ptx_arch, "ptx", "", toolkit},
                   binary->source.entry,
                   binary->source.abi,
                   binary->ptx});
  } else if (group.backend == "cpu") {
    // One shared object per level (no bounds checks: checked mode compiles at run time).
    std::string toolkit = codegen::llvm_version();
    for (const std::string &level : group.archs) {
      std::optional<codegen::CpuBinary> binary =
          codegen::compile_cpu(kernel, {level, false}, errors);
      if (!binary)
        return {};
      out.push_back({{"cpu:" + binary->level, "elf", "", toolkit},
                     "",
                     binary->abi,
                     std::move(binary->object)});
    }
  } else if (group.backend == "hip") {
    std::optional<codegen::HipBinary> binary = codegen::compile_hip(kernel, group.archs, errors);
    if (!binary)
      return {};
    std::string toolkit = codegen::hip_toolkit();
    for (const codegen::HipBinary::CodeObject &object : binary->code_objects)
      out.push_back({{"hip:" + object.arch, "hsaco", "", toolkit},
                     binary->source.entry,
                     binary->source.abi,
                     object.bytes});
  }
  return out;
}

/// Runs `count` jobs on `threads` threads.
template <class F> void parallel_for(size_t count, unsigned threads, F &&body) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < count; i = next++)
      body(i);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads && t < count; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
}

} // namespace

std::optional<std::vector<std::string>> parse_targets(std::span<const std::string> lists,
                                                      std::string &error) {
  static const std::regex sm(R"(cuda:sm_(\d{2,4})[af]?)");
  static const std::regex gfx(R"(hip:gfx[0-9a-f]{3,4})");
  static const std::regex cpu(R"(cpu:x86-64-v[234])");
  std::vector<std::string> targets;
  for (const std::string &list : lists) {
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      std::string t =
          list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? list.size() + 1 : comma + 1;
      if (t.empty())
        continue;
      if (t.size() > 64) { // std::regex recurses per character: a huge name must not reach it
        error = fmt::format("unknown target '{}…' ({} bytes; no target name is over 64)",
                            t.substr(0, 64), t.size());
        return std::nullopt;
      }
      if (t == "cpu:native") { // the level of the machine that builds
        std::string level = codegen::host_cpu_level();
        if (level.empty()) {
          error = "target 'cpu:native': this CPU is below x86-64-v2, the oldest level cubecc "
                  "compiles for";
          return std::nullopt;
        }
        t = "cpu:" + level;
      }
      std::smatch m;
      if (std::regex_match(t, m, sm)) {
        if (std::stoi(m[1]) < 80) {
          error = fmt::format("target '{}': cubecc compiles for sm_80 and newer", t);
          return std::nullopt;
        }
      } else if (std::regex_match(t, gfx)) {
        std::string why;
        if (!codegen::hip_arch_known(t.substr(4), &why)) {
          error = fmt::format("target '{}': {}", t, why);
          return std::nullopt;
        }
      } else if (t != "vulkan" && t != "interp" && !std::regex_match(t, cpu)) {
        // The list matches `cubecc compile`'s (tools/tool_support.cpp), which has no cpu target
        // yet; env build also takes cpu:x86-64-v2|v3|v4 and cpu:native.
        error = fmt::format("unknown target '{}' (targets: vulkan, interp, cuda:sm_80, cuda:sm_90, "
                            "cuda:sm_90a, cuda:sm_100, hip:gfx90a, hip:gfx942)",
                            t);
        return std::nullopt;
      }
      if (std::find(targets.begin(), targets.end(), t) == targets.end())
        targets.push_back(t);
    }
  }
  if (targets.empty()) {
    error = "no target given (e.g. --target cuda:sm_80,cuda:sm_90,hip:gfx90a,vulkan)";
    return std::nullopt;
  }
  return targets;
}

std::string compile_options(int opt_level) {
  return fmt::format("-O{}", opt_level);
}

std::optional<BundleContents> build_entries(std::span<const KernelInput> kernels,
                                            const BuildOptions &options,
                                            std::vector<ir::Diagnostic> &errors) {
  std::vector<KernelInput> unique_kernels;
  unsigned threads =
      options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::vector<TargetGroup> groups = group_targets(options.targets);
  std::string opt = compile_options(options.opt_level);

  // One entry per distinct kernel, keyed by the hash of the kernel as given: the same kernel
  // listed twice (two inputs, or two names for equal IR) is built once, under the first.
  std::vector<ir::Hash128> hashes;
  {
    std::vector<KernelInput> distinct;
    std::set<std::pair<uint64_t, uint64_t>> seen;
    for (const KernelInput &k : kernels) {
      ir::Hash128 hash = ir::structural_hash(*k.kernel);
      if (seen.insert({hash.high, hash.low}).second) {
        distinct.push_back(k);
        hashes.push_back(hash);
      }
    }
    unique_kernels = std::move(distinct);
  }
  kernels = unique_kernels;

  // Each kernel's own module, optimized once.
  std::vector<std::unique_ptr<ir::Module>> optimized(kernels.size());
  std::vector<std::vector<ir::Diagnostic>> problems(kernels.size());
  parallel_for(kernels.size(), threads, [&](size_t i) {
    const ir::Kernel &kernel = *kernels[i].kernel;
    problems[i] = ir::verify(kernel);
    if (!problems[i].empty())
      return;
    optimized[i] = ir::copy_kernel(kernel);
    if (options.opt_level > 0)
      problems[i] = passes::optimize(*optimized[i], options.opt_level);
    if (problems[i].empty())
      problems[i] = ir::verify(*optimized[i]);
  });
  for (size_t i = 0; i < kernels.size(); ++i)
    for (ir::Diagnostic &d : problems[i]) {
      d.message = fmt::format("kernel '{}': {}", kernels[i].kernel->name(), d.message);
      errors.push_back(std::move(d));
    }
  if (!errors.empty())
    return std::nullopt;

  std::vector<Job> jobs;
  for (size_t k = 0; k < kernels.size(); ++k)
    for (const TargetGroup &g : groups)
      jobs.push_back({k, &g});
  std::vector<std::vector<Artifact>> artifacts(jobs.size());
  std::vector<std::vector<ir::Diagnostic>> job_errors(jobs.size());
  std::mutex progress_mutex;
  size_t done = 0;
  parallel_for(jobs.size(), threads, [&](size_t j) {
    const Job &job = jobs[j];
    const ir::Kernel &kernel = *optimized[job.kernel]->kernels().front();
    artifacts[j] = compile_group(kernel, *job.group, job_errors[j]);
    if (options.progress) {
      std::lock_guard lock(progress_mutex);
      std::string what = job.group->backend;
      if (!job.group->archs.empty())
        what += ":" + fmt::format("{}", fmt::join(job.group->archs, ","));
      options.progress(++done, jobs.size(), fmt::format("{} {}", kernel.name(), what));
    }
  });
  for (size_t j = 0; j < jobs.size(); ++j)
    for (ir::Diagnostic &d : job_errors[j]) {
      d.message = fmt::format("{} (target {}): {}", kernels[jobs[j].kernel].kernel->name(),
                              jobs[j].group->backend, d.message);
      errors.push_back(std::move(d));
    }
  if (!errors.empty())
    return std::nullopt;

  BundleContents contents;
  contents.metadata.targets = options.targets;
  for (const TargetGroup &g : groups) {
    if (g.backend == "cuda")
      contents.metadata.toolkits.emplace_back("NVRTC", codegen::nvrtc_version());
    if (g.backend == "hip")
      contents.metadata.toolkits.emplace_back("hipRTC", codegen::hiprtc_version());
    if (g.backend == "cpu") {
      std::string version = codegen::llvm_version(); // "LLVM 19.1.7"
      if (version.starts_with("LLVM "))
        version.erase(0, 5);
      contents.metadata.toolkits.emplace_back("LLVM", version);
    }
  }
  // Jobs are kernel-major: kernel k's artifacts are those of jobs k * groups .. (k + 1) * groups.
  for (size_t k = 0; k < kernels.size(); ++k) {
    Entry entry;
    entry.hash = hashes[k];
    entry.options = opt;
    entry.name = kernels[k].kernel->name();
    entry.configuration = kernels[k].configuration;
    for (size_t j = k * groups.size(); j < (k + 1) * groups.size(); ++j)
      for (Artifact &a : artifacts[j])
        entry.artifacts.push_back(std::move(a));
    contents.entries.push_back(std::move(entry));
  }
  return contents;
}

} // namespace cubecc::environments
