//===- builder.cpp - Kernels to bundle entries, for every target, on all cores ----------------===//
#include "cubecc/environments/builder.h"

#include "cubecc/codegen/backend.h"
#include "cubecc/ir/clone.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

namespace cubecc::environments {

namespace {

/// The targets of one compiler run: all the targets of one backend (every sm_XX in one NVRTC call,
/// every gfx arch in one hipRTC call).
struct TargetGroup {
  const codegen::Backend *backend;
  std::vector<std::string> targets;
};

std::vector<TargetGroup> group_targets(const std::vector<std::string> &targets) {
  std::vector<TargetGroup> groups;
  for (const std::string &t : targets) {
    const codegen::Backend *backend = codegen::find_backend(t);
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const TargetGroup &g) { return g.backend == backend; });
    if (g == groups.end())
      groups.push_back({backend, {t}});
    else
      g->targets.push_back(t);
  }
  return groups;
}

/// The job: one kernel (already optimized) for one group of targets.
struct Job {
  size_t kernel;
  TargetGroup group; ///< the shard's group (less the targets skipped for this kernel)
};

/// Artifacts of `kernel` for `group`, or errors.
std::vector<Artifact> compile_group(const ir::Kernel &kernel, const TargetGroup &group,
                                    std::vector<ir::Diagnostic> &errors) {
  std::vector<Artifact> out;
  for (codegen::Artifact &a : group.backend->compile(kernel, group.targets, errors))
    out.push_back(
        {{std::move(a.target), std::move(a.format), std::move(a.features), std::move(a.toolkit)},
         std::move(a.entry),
         std::move(a.abi),
         std::move(a.bytes)});
  return out;
}

/// The shard (0 .. count - 1) that compiles `kernel` for the targets of `group`: a hash of both,
/// so that it depends on neither the inputs' order nor the other kernels.
unsigned shard_of(const ir::Hash128 &kernel, const TargetGroup &group, unsigned count) {
  std::string key = fmt::format("{}|{}", kernel.hex(), fmt::join(group.targets, ","));
  return static_cast<unsigned>(XXH3_64bits(key.data(), key.size()) % count);
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

std::string library_name_of_input(std::string_view path) {
  std::string stem = std::filesystem::path(path).stem().string();
  if (std::filesystem::path(path).extension() == ".so" && stem.starts_with("lib") &&
      stem.size() > 3)
    stem.erase(0, 3);
  return stem;
}

std::string library_build_of(std::span<const KernelInput> kernels) {
  // Sorted, so that the order the library lists its kernels in does not change the build id.
  std::vector<std::string> lines;
  for (const KernelInput &k : kernels)
    lines.push_back(fmt::format("{}\n{}\n{}\n", k.kernel->name(), k.configuration,
                                ir::structural_hash(*k.kernel).hex()));
  std::sort(lines.begin(), lines.end());
  std::string all;
  for (const std::string &line : lines)
    all += line;
  XXH128_hash_t h = XXH3_128bits(all.data(), all.size());
  return ir::Hash128{h.high64, h.low64}.hex();
}

std::string compile_options(int opt_level) {
  return fmt::format("-O{}", opt_level);
}

std::optional<BundleContents> build_entries(std::span<const KernelInput> kernels,
                                            const BuildOptions &options,
                                            std::vector<ir::Diagnostic> &errors) {
  if (options.shard_count == 0 || options.shard_index >= options.shard_count)
    throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                         fmt::format("build_entries: shard {} of {} does not exist",
                                     options.shard_index, options.shard_count));
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

  // The (kernel, backend) jobs of this shard, kernel-major.
  std::vector<Job> jobs;
  std::vector<bool> has_jobs(kernels.size(), false);
  for (size_t k = 0; k < kernels.size(); ++k)
    for (const TargetGroup &g : groups)
      if (shard_of(hashes[k], g, options.shard_count) == options.shard_index) {
        jobs.push_back({k, g});
        has_jobs[k] = true;
      }

  // Each kernel's own module (those with work in this shard), optimized once.
  std::vector<std::unique_ptr<ir::Module>> optimized(kernels.size());
  std::vector<std::vector<ir::Diagnostic>> problems(kernels.size());
  parallel_for(kernels.size(), threads, [&](size_t i) {
    if (!has_jobs[i])
      return;
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

  // With skip_unsupported, each job keeps the targets that can run its kernel as optimized (the
  // kernel the backend compiles); a kernel left with none gets no entry.
  if (options.skip_unsupported) {
    std::vector<Job> kept_jobs;
    std::fill(has_jobs.begin(), has_jobs.end(), false);
    for (Job &job : jobs) {
      const ir::Kernel &kernel = *optimized[job.kernel]->kernels().front();
      TargetGroup kept{job.group.backend, {}};
      for (const std::string &t : job.group.targets) {
        std::vector<ir::Diagnostic> why;
        if (job.group.backend->check_support(kernel, t, why)) {
          kept.targets.push_back(t);
        } else if (options.skipped) {
          options.skipped(kernel.name(), t, why.empty() ? "" : why[0].message);
        }
      }
      if (kept.targets.empty())
        continue;
      has_jobs[job.kernel] = true;
      kept_jobs.push_back({job.kernel, std::move(kept)});
    }
    jobs = std::move(kept_jobs);
  }

  std::vector<std::vector<Artifact>> artifacts(jobs.size());
  std::vector<std::vector<ir::Diagnostic>> job_errors(jobs.size());
  std::mutex progress_mutex;
  size_t done = 0;
  parallel_for(jobs.size(), threads, [&](size_t j) {
    const Job &job = jobs[j];
    const ir::Kernel &kernel = *optimized[job.kernel]->kernels().front();
    artifacts[j] = compile_group(kernel, job.group, job_errors[j]);
    if (options.progress) {
      std::lock_guard lock(progress_mutex);
      std::string what = fmt::format("{}", fmt::join(job.group.targets, ","));
      options.progress(++done, jobs.size(), fmt::format("{} {}", kernel.name(), what));
    }
  });
  for (size_t j = 0; j < jobs.size(); ++j)
    for (ir::Diagnostic &d : job_errors[j]) {
      d.message = fmt::format("{} (target {}): {}", kernels[jobs[j].kernel].kernel->name(),
                              jobs[j].group.backend->name(), d.message);
      errors.push_back(std::move(d));
    }
  if (!errors.empty())
    return std::nullopt;

  BundleContents contents;
  contents.metadata.targets = options.targets;
  // The compilers that made the binaries (a backend whose artifacts name their toolkit).
  for (const TargetGroup &g : groups)
    if (!g.backend->toolkit_label().empty())
      for (const codegen::Toolkit &t : g.backend->toolkits())
        contents.metadata.toolkits.emplace_back(t.name, t.version);
  // Jobs are kernel-major: kernel k's artifacts are those of its consecutive jobs.
  size_t next_job = 0;
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (!has_jobs[k])
      continue;
    Entry entry;
    entry.hash = hashes[k];
    entry.options = opt;
    entry.name = kernels[k].kernel->name();
    entry.configuration = kernels[k].configuration;
    entry.library = kernels[k].library;
    entry.library_build = kernels[k].library_build;
    for (unsigned p = 0; p < kernels[k].kernel->num_parameters(); ++p) {
      entry.parameter_names.push_back(kernels[k].kernel->parameter(p)->name());
      if (!kernels[k].kernel->parameter(p)->has_uses())
        entry.unread_parameters.push_back(p);
    }
    for (; next_job < jobs.size() && jobs[next_job].kernel == k; ++next_job)
      for (Artifact &a : artifacts[next_job])
        entry.artifacts.push_back(std::move(a));
    contents.entries.push_back(std::move(entry));
  }
  return contents;
}

} // namespace cubecc::environments
