//===- cpu_cold_start.cpp - Cold start on the cpu device: JIT, bundle, ahead-of-time C++ ------===//
//
// What an application pays before its first result on the cpu device (or --device), measured side
// by side in one run:
//
//  1. Per example kernel, in a fresh Runtime each time: trace, then load() without an environment
//     (passes -O2, the backend's compile — LLVM for cpu — and the device's load of the binary)
//     against load() with the environment bundle (structural hash, lookup, the device's load of
//     the bundled binary). The bundle is built in-process as `cubecc env build --target <target>`
//     builds it (environments::build_entries, -O2). ratio = (trace + JIT load) / (trace + bundle
//     load).
//  2. From process start to the first result (axpy 2^20, softmax 1024 x 1024): this program
//     starts itself again (posix_spawn of /proc/self/exe); the child reports the time from the
//     parent's spawn to the moment its result is in host memory (CLOCK_MONOTONIC in both), then
//     checks the result (not timed). Modes: `empty` (the child exits at once: exec, dynamic
//     linking, static initializers), `aot` (the same computation written in C++, compiled -O3
//     into this program), `so` (when the LLVM backend is built: the kernel's shared object as the
//     LLVM backend writes it, dlopened and called on one thread over every workgroup: what linking
//     cubecc's code into a program ahead of time gives), `bundle` (Runtime::open, use_environment,
//     trace, load from the bundle, upload, launch, download) and `jit` (the same without the
//     bundle).
//  3. A library of 50 distinct generated kernels (in the same table): from process start to all
//     50 loaded and the last one's result downloaded, with the bundle and without (JIT).
//
// Each measurement runs once to warm up, then --reps times; the median is reported. Prints
// tables, then one JSON object per row.
//
// Usage: cpu_cold_start [--device NAME] [--target TARGET] [--reps N] [--kernel NAME] [--keep DIR]
//
//===-----------------------------------------------------------------------------------------===//
#include "bench_support.h"
#include "cubecc/codegen/cpu_abi.h"
#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/dsl.h"
#include "cubecc/dsl/registry.h"
#include "cubecc/dsl/trace.h"
#include "cubecc/environments/builder.h"
#include "cubecc/environments/bundle.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/passes/pass_manager.h"
#include "cubecc/runtime/runtime.h"

#include <fmt/format.h>

#if CUBECC_BENCH_HAVE_CPU_BACKEND
#include "cubecc/codegen/cpu.h"
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

using namespace cubecc;

namespace {

using bench::Clock;
using bench::json_number;
using bench::ms_since;

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "cpu_cold_start: %s\n", message.c_str());
  std::exit(1);
}

std::unique_ptr<ir::Module> trace_registered(const dsl::RegisteredKernel &k) {
  auto module = std::make_unique<ir::Module>();
  std::vector<ir::Diagnostic> errors;
  k.trace(*module, k, errors);
  if (!errors.empty())
    die(k.name + ": trace failed: " + ir::to_string(errors));
  return module;
}

const dsl::RegisteredKernel &registered(const std::string &name) {
  for (const auto &k : dsl::registered_kernels())
    if (k.name == name)
      return k;
  die("no registered kernel " + name);
}

//===- 50 generated kernels -------------------------------------------------------------------===//

namespace generated {

namespace dsl = cubecc::dsl;

/// Kernel kId of the generated library: y = f_kId(x, y), where f mixes kId's constants with a
/// different sequence of operations per kId (so that every kernel's IR, and hash, differs).
template <int kId> void kernel(dsl::Tensor<const float> x, dsl::Tensor<float> y) {
  dsl::Val<uint32_t> i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] {
    dsl::Var<float> v = x[i];
    for (int step = 0; step <= kId % 4; ++step) {
      switch ((kId + step) % 5) {
      case 0:
        v = dsl::fma(v, float(kId + 1), y[i]);
        break;
      case 1:
        v = dsl::sqrt(dsl::abs(v) + float(kId));
        break;
      case 2:
        v = dsl::exp(v * (1.0f / float(kId + 2)));
        break;
      case 3:
        v = dsl::max(v, float(kId) * 0.25f) - y[i];
        break;
      default:
        v = v * v + float(kId % 7);
      }
    }
    y[i] = v;
  });
}

constexpr int kCount = 50;

template <size_t... I>
std::vector<std::function<std::unique_ptr<ir::Module>()>> make(std::index_sequence<I...>) {
  return {[] {
    std::string name = fmt::format("generated_{:02}", I);
    dsl::TraceResult r = dsl::trace<kernel<int(I)>>(name, {.workgroup = {64, 1, 1}});
    if (!r.module)
      die(name + ": trace failed: " + ir::to_string(r.errors));
    return std::move(r.module);
  }...};
}

/// The tracers of the 50 kernels, in order.
const std::vector<std::function<std::unique_ptr<ir::Module>()>> &tracers() {
  static const auto all = make(std::make_index_sequence<kCount>());
  return all;
}

/// Kernel 49 on the host, for the check of the last launch (the same operations in float).
float host_last(float x, float y) {
  constexpr int kId = kCount - 1; // 49: steps (49 + s) % 5 for s = 0, 1: cases 4, 0
  float v = x;
  v = v * v + float(kId % 7);
  v = std::fma(v, float(kId + 1), y);
  return v;
}

} // namespace generated

//===- The child process: one start, one result -----------------------------------------------===//

/// Inputs that cost nothing to make (a random generator would dominate the `aot` mode).
std::vector<float> ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = float(i % 1000) * scale + offset;
  return v;
}

// The ahead-of-time versions: plain C++ compiled into this program (-O3).
void axpy_aot(const float *x, float *y, float a, size_t n) {
  for (size_t i = 0; i < n; ++i)
    y[i] = a * x[i] + y[i];
}

void softmax_aot(const float *in, float *out, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) {
    const float *row = in + r * cols;
    float max = row[0], sum = 0;
    for (size_t c = 1; c < cols; ++c)
      max = std::max(max, row[c]);
    for (size_t c = 0; c < cols; ++c)
      sum += std::exp(row[c] - max);
    for (size_t c = 0; c < cols; ++c)
      out[r * cols + c] = std::exp(row[c] - max) / sum;
  }
}

constexpr uint32_t kAxpyN = 1u << 20, kSoftmaxRows = 1024, kSoftmaxCols = 1024;

bool axpy_correct(const std::vector<float> &x, const std::vector<float> &y0,
                  const std::vector<float> &y) {
  for (size_t i = 0; i < y.size(); ++i)
    if (!(std::abs(y[i] - (2.0f * x[i] + y0[i])) <= 1e-6f * (2 * std::abs(x[i]) + std::abs(y0[i]))))
      return false;
  return true;
}

bool softmax_correct(const std::vector<float> &in, const std::vector<float> &out) {
  std::vector<float> want(out.size());
  softmax_aot(in.data(), want.data(), kSoftmaxRows, kSoftmaxCols);
  for (size_t i = 0; i < out.size(); ++i)
    if (!(std::abs(out[i] - want[i]) <= 1e-5f * want[i] + 1e-9f))
      return false;
  return true;
}

/// CLOCK_MONOTONIC in nanoseconds: the same clock in the parent and the child.
int64_t monotonic_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

/// The child: computes the first result, writes the milliseconds since `spawned_ns` (the parent's
/// clock just before posix_spawn) to stdout, then checks the result (not timed). Exit codes: 0
/// right, 2 wrong result, 3 the bundle did not serve the kernels.
int child_main(const std::string &mode, const std::string &kernel, const std::string &device,
               const std::string &bundle, int64_t spawned_ns) {
  auto report = [&] {
    std::printf("%.6f\n", (monotonic_ns() - spawned_ns) / 1e6);
    std::fflush(stdout);
  };
  if (mode == "empty") {
    report();
    return 0;
  }
  if (kernel == "library50") {
    runtime::Runtime rt = runtime::Runtime::open(device);
    if (mode == "bundle")
      rt.use_environment(bundle);
    runtime::KernelHandle last; // modes jit and cached: no bundle
    for (const auto &trace : generated::tracers()) {
      std::unique_ptr<ir::Module> module = trace();
      last = rt.load(*module->kernels()[0]);
    }
    const uint32_t n = 4096;
    std::vector<float> x = ramp(n, 0.001f, -0.5f), y = ramp(n, 0.002f, 0.25f);
    runtime::Buffer dx = rt.upload(x), dy = rt.upload(y);
    rt.launch(last, runtime::grid_1d(n, 64), dx, n, 1u, dy, n, 1u);
    std::vector<float> got = rt.download<float>(dy);
    report();
    if (mode == "bundle" && rt.environment_statistics().hits != generated::kCount)
      return 3;
    for (uint32_t i = 0; i < n; ++i) {
      float want = generated::host_last(x[i], y[i]);
      if (!(std::abs(got[i] - want) <= 1e-5f * std::abs(want) + 1e-6f))
        return 2;
    }
    return 0;
  }

  const bool is_axpy = kernel == "axpy";
  std::vector<float> in = is_axpy ? ramp(kAxpyN, 0.001f, -0.5f)
                                  : ramp(size_t(kSoftmaxRows) * kSoftmaxCols, 0.01f, -5.0f);
  std::vector<float> y0 = is_axpy ? ramp(kAxpyN, 0.002f, 0.25f) : std::vector<float>();
  std::vector<float> out;
  bool served = true;
  if (mode == "so") {
    // The kernel's shared object as the backend wrote it (`bundle` is its path), called directly
    // on this thread over every workgroup: what linking cubecc's code into a program gives.
    void *library = dlopen(bundle.c_str(), RTLD_NOW | RTLD_LOCAL);
    auto *kernel_fn =
        library ? reinterpret_cast<cubecc_cpu_kernel_fn>(dlsym(library, CUBECC_CPU_KERNEL_SYMBOL))
                : nullptr;
    if (!kernel_fn)
      die("cannot load " + bundle + ": " + dlerror());
    // The parameter block as KernelAbi lays it out for these two signatures (checked by the
    // parent): every value a 4-byte slot, in order.
    std::array<uint32_t, 8> params{};
    std::array<void *, 2> buffers{};
    std::array<uint64_t, 2> counts{};
    uint32_t groups = 0;
    if (is_axpy) {
      out = y0;
      const float a = 2.0f;
      params = {kAxpyN, 1, kAxpyN, 1, std::bit_cast<uint32_t>(a)};
      buffers = {in.data(), out.data()};
      counts = {kAxpyN, kAxpyN};
      groups = kAxpyN / 256;
    } else {
      out.resize(in.size());
      params = {kSoftmaxRows, kSoftmaxCols, kSoftmaxCols, 1,
                kSoftmaxRows, kSoftmaxCols, kSoftmaxCols, 1};
      buffers = {in.data(), out.data()};
      counts = {in.size(), out.size()};
      groups = kSoftmaxRows;
    }
    cubecc_cpu_launch launch{buffers.data(), counts.data(), params.data(), {groups, 1, 1}, 0,
                             nullptr};
    alignas(64) static std::byte shared[64 * 1024];
    kernel_fn(&launch, 0, groups, shared);
    report();
  } else if (mode == "aot") {
    out = is_axpy ? y0 : std::vector<float>(in.size());
    if (is_axpy)
      axpy_aot(in.data(), out.data(), 2.0f, kAxpyN);
    else
      softmax_aot(in.data(), out.data(), kSoftmaxRows, kSoftmaxCols);
    report();
  } else {
    runtime::Runtime rt = runtime::Runtime::open(device);
    if (mode == "bundle")
      rt.use_environment(bundle);
    std::unique_ptr<ir::Module> module = trace_registered(registered(kernel));
    runtime::KernelHandle k = rt.load(*module->kernels()[0]);
    if (is_axpy) {
      runtime::Buffer dx = rt.upload(in), dy = rt.upload(y0);
      rt.launch(k, runtime::grid_1d(kAxpyN, 256), dx, kAxpyN, 1u, dy, kAxpyN, 1u, 2.0f);
      out = rt.download<float>(dy);
    } else {
      const uint32_t r = kSoftmaxRows, c = kSoftmaxCols;
      runtime::Buffer din = rt.upload(in), dout = rt.allocate<float>(in.size());
      rt.launch(k, {r, 1, 1}, din, r, c, c, 1u, dout, r, c, c, 1u);
      out = rt.download<float>(dout);
    }
    report();
    served = mode != "bundle" || rt.environment_statistics().hits == 1;
  }
  if (!served)
    return 3;
  return (is_axpy ? axpy_correct(in, y0, out) : softmax_correct(in, out)) ? 0 : 2;
}

/// Spawns this program in child mode; returns the milliseconds from the spawn to its first
/// result (as the child measured them on the same clock).
double time_child(const std::vector<std::string> &args) {
  int out[2];
  if (pipe(out) != 0)
    die("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::string self = "/proc/self/exe";
  std::vector<std::string> copy = args;
  int64_t spawned = monotonic_ns();
  copy.push_back(std::to_string(spawned));
  std::vector<char *> argv = {self.data()};
  for (std::string &a : copy)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), environ) != 0)
    die("posix_spawn failed");
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  std::string text;
  char chunk[256];
  for (ssize_t got; (got = read(out[0], chunk, sizeof chunk)) > 0;)
    text.append(chunk, size_t(got));
  close(out[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid)
    die("waitpid failed");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string what = fmt::format("the child '{} {}' ", args[1], args[2]);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
      die(what + "computed a wrong result");
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
      die(what + "did not load every kernel from the bundle");
    die(what + fmt::format("failed (status {:#x})", status));
  }
  return std::atof(text.c_str());
}

//===- 1. Per kernel: JIT against the bundle --------------------------------------------------===//

struct LoadRow {
  std::string kernel;
  double trace_ms = NAN, jit_load_ms = NAN, cached_load_ms = NAN, env_load_ms = NAN;
  bool hit = false;
};

/// `clear_cache` empties the per-user object cache (CUBECC_CACHE_DIR, this run's own folder), so
/// that a JIT load compiles; the cached load right after it finds the object there.
std::vector<LoadRow> per_kernel(const std::vector<const dsl::RegisteredKernel *> &kernels,
                                const std::string &device, const std::string &bundle, int reps,
                                const std::function<void()> &clear_cache) {
  std::vector<LoadRow> rows;
  std::shared_ptr<const environments::Bundle> opened = environments::Bundle::open(bundle);
  enum Way { Jit, Cached, Environment };
  for (const dsl::RegisteredKernel *k : kernels) {
    LoadRow row{k->name};
    std::vector<double> traces, times[3];
    row.hit = true;
    for (int r = 0; r <= reps; ++r)
      for (Way way : {Jit, Cached, Environment}) {
        if (way == Jit)
          clear_cache();
        runtime::Runtime rt = runtime::Runtime::open(device);
        if (way == Environment)
          rt.use_environment(opened);
        auto start = Clock::now();
        std::unique_ptr<ir::Module> module = trace_registered(*k);
        double trace_ms = ms_since(start);
        auto load_start = Clock::now();
        rt.load(*module->kernels()[0]);
        double load_ms = ms_since(load_start);
        if (way == Environment &&
            (rt.environment_statistics().hits != 1 || rt.cache_statistics().compiles != 0))
          row.hit = false;
        if (r == 0)
          continue;
        if (way == Jit)
          traces.push_back(trace_ms);
        times[way].push_back(load_ms);
      }
    row.trace_ms = bench::median(traces);
    row.jit_load_ms = bench::median(times[Jit]);
    row.cached_load_ms = bench::median(times[Cached]);
    row.env_load_ms = bench::median(times[Environment]);
    rows.push_back(row);
  }
  return rows;
}

std::string default_target(const std::string &device) {
#if CUBECC_BENCH_HAVE_CPU_BACKEND
  if (device == "cpu")
    return "cpu:" + codegen::host_cpu_level();
#endif
  return device; // "vulkan", "interp"
}

} // namespace

int main(int argc, char **argv) try {
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  if (argc == 7 && !std::strcmp(argv[1], "--child"))
    return child_main(argv[2], argv[3], argv[4], argv[5], std::atoll(argv[6]));

  std::string device = "cpu", target, only, keep;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc)
      device = argv[++i];
    else if (a == "--target" && i + 1 < argc)
      target = argv[++i];
    else if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--kernel" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--keep" && i + 1 < argc)
      keep = argv[++i];
    else
      die("usage: cpu_cold_start [--device NAME] [--target TARGET] [--reps N] [--kernel NAME] "
          "[--keep DIR]");
  }
  if (target.empty())
    target = default_target(device);
  namespace fs = std::filesystem;
  fs::path dir = keep.empty()
                     ? fs::temp_directory_path() / fmt::format("cpu_cold_start.{}", getpid())
                     : fs::path(keep);
  fs::create_directories(dir);
  // The cpu device keeps compiled objects in the per-user cache: this run uses a folder of its
  // own (inherited by the children), emptied before every JIT measurement.
  const fs::path cache = dir / "cache";
  setenv("CUBECC_CACHE_DIR", cache.c_str(), 1);
  auto clear_cache = [&] { fs::remove_all(cache); };

  std::string device_name;
  try {
    device_name = runtime::Runtime::open(device).info().name;
  } catch (const std::exception &e) {
    die(fmt::format("device '{}' did not open: {} (try --device vulkan)", device, e.what()));
  }
  const std::string bundle = (dir / "cold_start.cubeenv").string();

  // The bundle: every example kernel and the 50 generated ones, for `target`.
  std::vector<const dsl::RegisteredKernel *> kernels;
  std::vector<std::unique_ptr<ir::Module>> traced;
  std::vector<environments::KernelInput> inputs;
  for (const auto &k : dsl::registered_kernels()) {
    if (!only.empty() && k.name != only && k.name != "axpy" && k.name != "softmax")
      continue;
    if (only.empty() || k.name == only)
      kernels.push_back(&k);
    traced.push_back(trace_registered(k));
    inputs.push_back({traced.back()->kernels()[0].get(), k.configuration});
  }
  if (kernels.empty())
    die("no registered kernel " + only);
  for (const auto &trace : generated::tracers()) {
    traced.push_back(trace());
    inputs.push_back({traced.back()->kernels()[0].get(), "generated"});
  }
  std::vector<ir::Diagnostic> errors;
  environments::BuildOptions build;
  build.targets = {target};
  build.opt_level = 2;
  auto build_start = Clock::now();
  std::optional<environments::BundleContents> contents =
      environments::build_entries(inputs, build, errors);
  if (!contents)
    die("building the bundle failed: " + ir::to_string(errors));
#if CUBECC_BENCH_HAVE_CPU_BACKEND
  // build_entries makes no artifacts for cpu targets yet (`cubecc env build` has no cpu branch):
  // add them as the cpu device loads them (format "elf", the level in the target), compiled from
  // the same -O2 kernels, and say so.
  size_t added = 0;
  if (target.starts_with("cpu:"))
    for (size_t i = 0; i < inputs.size(); ++i) {
      ir::Hash128 hash = ir::structural_hash(*inputs[i].kernel);
      for (environments::Entry &entry : contents->entries) {
        if (!(entry.hash == hash) ||
            std::any_of(entry.artifacts.begin(), entry.artifacts.end(),
                        [&](const environments::Artifact &a) { return a.target.target == target; }))
          continue;
        std::vector<ir::Diagnostic> errors = passes::optimize(*traced[i], 2);
        std::optional<codegen::CpuBinary> binary;
        if (errors.empty())
          binary =
              codegen::compile_cpu(*traced[i]->kernels()[0], {.level = target.substr(4)}, errors);
        if (!binary)
          die(fmt::format("{}: compile_cpu failed: {}", entry.name, ir::to_string(errors)));
        entry.artifacts.push_back(
            {{"cpu:" + binary->level, "elf", "", ""}, "", binary->abi, binary->object});
        ++added;
      }
    }
  if (added)
    std::printf("NOTE: the bundle builder made no %s artifacts; the benchmark compiled %zu itself "
                "(compile_cpu after -O2) and added them\n",
                target.c_str(), added);
#endif
  environments::write_bundle(bundle, *contents);
  double load[1] = {NAN};
  getloadavg(load, 1); // how much else the (shared) machine was running
  std::printf("device %s (%s); bundle for %s: %zu kernels, %ju bytes, built in %.1f s; median of "
              "%d runs after one warm-up; load average %.1f\n\n",
              device.c_str(), device_name.c_str(), target.c_str(), inputs.size(),
              (uintmax_t)fs::file_size(bundle), ms_since(build_start) / 1000, reps, load[0]);

  // The shared objects of axpy and softmax as the backend writes them, for the `so` mode.
  std::map<std::string, std::string> shared_objects;
#if CUBECC_BENCH_HAVE_CPU_BACKEND
  std::string why_no_llvm;
  if (!codegen::llvm_version(&why_no_llvm).empty())
    for (const char *name : {"axpy", "softmax"}) {
      std::unique_ptr<ir::Module> module = trace_registered(registered(name));
      std::vector<ir::Diagnostic> errors = passes::optimize(*module, 2);
      std::optional<codegen::CpuBinary> binary;
      if (errors.empty())
        binary = codegen::compile_cpu(*module->kernels()[0], {.level = "native"}, errors);
      if (!binary)
        die(fmt::format("{}: compile_cpu failed: {}", name, ir::to_string(errors)));
      const codegen::KernelAbi &abi = binary->abi;
      uint32_t offset = 0;
      for (const codegen::ParamSlot &slot : abi.params)
        if (slot.kind == codegen::ParamSlot::Value) {
          if (slot.offset != offset || slot.lane_bytes != 4)
            die(fmt::format("{}: the parameter block is not the 4-byte slots the so mode writes",
                            name));
          offset += 4;
        }
      if (abi.shared_bytes > 64 * 1024)
        die(fmt::format("{}: {} bytes of shared memory", name, abi.shared_bytes));
      std::string path = (dir / fmt::format("{}.so", name)).string();
      FILE *file = std::fopen(path.c_str(), "wb");
      if (!file || std::fwrite(binary->object.data(), 1, binary->object.size(), file) !=
                       binary->object.size())
        die("cannot write " + path);
      std::fclose(file);
      shared_objects[name] = path;
    }
#endif

  std::vector<std::string> json;

  // 1. Per kernel, in process.
  std::vector<LoadRow> rows = per_kernel(kernels, device, bundle, reps, clear_cache);
  std::printf(
      "1. Per kernel, fresh Runtime: trace, then load(): JIT (passes, compile, device load; "
      "empty object cache), cached (the object from the per-user cache), bundle (hash, "
      "lookup, device load); ratio = JIT total / bundle total\n");
  std::printf("%-18s %9s %10s %11s %11s %10s %11s %8s %5s\n", "kernel", "trace ms", "JIT load",
              "cached load", "bundle load", "JIT total", "bundle tot.", "ratio", "hit");
  for (const LoadRow &r : rows) {
    double jit = r.trace_ms + r.jit_load_ms, env = r.trace_ms + r.env_load_ms;
    std::printf("%-18s %9.3f %10.3f %11.3f %11.3f %10.3f %11.3f %7.1fx %5s\n", r.kernel.c_str(),
                r.trace_ms, r.jit_load_ms, r.cached_load_ms, r.env_load_ms, jit, env, jit / env,
                r.hit ? "yes" : "NO");
    json.push_back(fmt::format(
        R"({{"bench": "cpu_cold_start_kernel", "device": "{}", "target": "{}", "kernel": "{}", "trace_ms": {}, "jit_load_ms": {}, "cached_load_ms": {}, "bundle_load_ms": {}, "jit_total_ms": {}, "bundle_total_ms": {}, "ratio": {}, "hit": {}}})",
        device, target, r.kernel, json_number(r.trace_ms), json_number(r.jit_load_ms),
        json_number(r.cached_load_ms), json_number(r.env_load_ms), json_number(jit),
        json_number(env), json_number(jit / env), r.hit));
  }

  // 2. and 3. From process start, in child processes; the modes alternate within each rep.
  std::printf("\n2. From process start (spawn) to the first result in host memory, checked "
              "after; empty: a child that exits at once; library50: all 50 loaded, the last run\n");
  std::printf("%-12s %-12s %7s %8s %9s %8s %8s %8s %10s %10s %10s\n", "kernel", "problem", "empty",
              "C++ aot", "cubecc so", "bundle", "cached", "JIT", "bundle/aot", "bundle/so",
              "JIT/bundle");
  std::printf("%-12s %-12s %7s %8s %9s %8s %8s %8s %10s %10s %10s\n", "", "", "ms", "ms", "ms",
              "ms", "ms", "ms", "", "", "");
  struct StartCase {
    std::string kernel, problem;
    bool aot;
  };
  const std::vector<StartCase> starts = {{"axpy", "n = 2^20", true},
                                         {"softmax", "1024 x 1024", true},
                                         {"library50", "50 kernels", false}};
  for (const StartCase &c : starts) {
    // Mode, and the path the child gets as its last argument.
    // `jit` starts with an empty object cache and fills it; `cached`, right after it, finds the
    // objects there (a second start of the same program without a bundle).
    std::vector<std::pair<std::string, std::string>> modes = {
        {"empty", bundle}, {"bundle", bundle}, {"jit", bundle}, {"cached", bundle}};
    if (c.aot)
      modes.push_back({"aot", bundle});
    if (shared_objects.count(c.kernel))
      modes.push_back({"so", shared_objects[c.kernel]});
    std::map<std::string, std::vector<double>> times;
    for (int r = 0; r <= reps; ++r)
      for (const auto &[mode, path] : modes) {
        if (mode == "jit" || mode == "bundle")
          clear_cache();
        double ms = time_child({"--child", mode, c.kernel, device, path});
        if (r > 0)
          times[mode].push_back(ms);
      }
    auto median = [&](const std::string &mode) {
      return times.count(mode) ? bench::median(times[mode]) : NAN;
    };
    double empty = median("empty"), env = median("bundle"), jit = median("jit"),
           cached = median("cached"), aot = median("aot"), so = median("so");
    auto ms_text = [](double v) {
      return std::isnan(v) ? std::string("-") : fmt::format("{:.1f}", v);
    };
    auto ratio_text = [](double v) {
      return std::isnan(v) ? std::string("-") : fmt::format("{:.2f}x", v);
    };
    std::printf("%-12s %-12s %7.1f %8s %9s %8.1f %8.1f %8.1f %10s %10s %10s\n", c.kernel.c_str(),
                c.problem.c_str(), empty, ms_text(aot).c_str(), ms_text(so).c_str(), env, cached,
                jit, ratio_text(env / aot).c_str(), ratio_text(env / so).c_str(),
                ratio_text(jit / env).c_str());
    json.push_back(fmt::format(
        R"({{"bench": "cpu_cold_start_process", "device": "{}", "target": "{}", "kernel": "{}", "problem": "{}", "empty_ms": {}, "aot_ms": {}, "so_ms": {}, "bundle_ms": {}, "cached_ms": {}, "jit_ms": {}, "bundle_over_aot": {}, "bundle_over_so": {}, "jit_over_bundle": {}}})",
        device, target, c.kernel, c.problem, json_number(empty), json_number(aot), json_number(so),
        json_number(env), json_number(cached), json_number(jit), json_number(env / aot),
        json_number(env / so), json_number(jit / env)));
  }

  std::printf("\n");
  for (const std::string &line : json)
    std::printf("%s\n", line.c_str());
  if (keep.empty())
    fs::remove_all(dir);
  return 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "cpu_cold_start: %s\n", e.what());
  return 1;
}
