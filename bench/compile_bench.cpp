//===- compile_bench.cpp - Where the time of compiling a kernel goes, stage by stage ----------===//
//
// For every example kernel: trace (the registered kernel's trace function into a fresh module),
// passes (-O2), emit (CUDA C++ from the C-family emitter), NVRTC to PTX (compute_80), NVRTC to
// CUBIN (sm_90), hipRTC to a code object (gfx90a), and, for comparison, the SPIR-V writer. Each
// stage runs once to warm up, then `--reps` times; the median is reported. The last columns show
// how much of a CUDA compile (trace + passes + emit + PTX + CUBIN) is cubecc's own code: the rest
// is NVRTC. Prints a table, then one JSON object per kernel.
//
// Usage: compile_bench [--reps N] [--kernel NAME]
//
//===-----------------------------------------------------------------------------------------===//
#include "bench_support.h"
#include "cubecc/codegen/cuda.h"
#include "cubecc/codegen/hip.h"
#include "cubecc/codegen/spirv.h"
#include "cubecc/dsl/registry.h"
#include "cubecc/passes/pass_manager.h"

// Not public headers: the NVRTC and hipRTC steps on their own.
#include "cuda/nvrtc_internal.h"
#include "hip/hiprtc_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace cubecc;

namespace {

/// The median time in milliseconds of `reps` runs of `body` after one warm-up run; NaN when
/// `body` fails (returns false), with the reason in `failure`.
double time_ms(int reps, const std::function<bool()> &setup_and_check,
               const std::function<bool()> &body, std::string &failure) {
  std::vector<double> times;
  for (int r = 0; r <= reps; ++r) {
    if (!setup_and_check())
      return NAN;
    auto start = std::chrono::steady_clock::now();
    bool ok = body();
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!ok) {
      if (failure.empty())
        failure = "failed";
      return NAN;
    }
    if (r > 0)
      times.push_back(ms);
  }
  return bench::median(times);
}

std::string cell(double ms) {
  return std::isnan(ms) ? "fail" : fmt::format("{:.3f}", ms);
}
std::string json_number(double ms) {
  return std::isnan(ms) ? "null" : fmt::format("{:.3f}", ms);
}

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "compile_bench: %s\n", message.c_str());
  std::exit(1);
}

} // namespace

int main(int argc, char **argv) {
  int reps = 5;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--kernel") && i + 1 < argc)
      only = argv[++i];
    else
      die("usage: compile_bench [--reps N] [--kernel NAME]");
  }
  std::string why_cuda, why_hip;
  std::string nvrtc = codegen::nvrtc_version(&why_cuda);
  std::string hiprtc = codegen::hiprtc_version(&why_hip);
  std::printf("NVRTC %s; hipRTC %s; median of %d runs after one warm-up, milliseconds\n\n",
              nvrtc.empty() ? ("not available: " + why_cuda).c_str() : nvrtc.c_str(),
              hiprtc.empty() ? ("not available: " + why_hip).c_str() : hiprtc.c_str(), reps);
  std::printf("%-16s %7s %7s %7s %9s %10s %8s %7s %8s %7s\n", "kernel", "trace", "-O2", "emit",
              "NVRTC ptx", "NVRTC sm90", "hipRTC", "SPIR-V", "CUDA all", "cubecc%");
  std::vector<std::string> json;
  for (const auto &k : dsl::registered_kernels()) {
    if (!only.empty() && k.name != only)
      continue;
    std::string failure;
    std::unique_ptr<ir::Module> module;
    std::vector<ir::Diagnostic> errors;
    auto fresh = [&] {
      module = std::make_unique<ir::Module>();
      errors.clear();
      return true;
    };
    auto traced = [&] {
      fresh();
      k.trace(*module, k, errors);
      return errors.empty();
    };
    double trace = time_ms(
        reps, fresh,
        [&] {
          k.trace(*module, k, errors);
          return errors.empty();
        },
        failure);
    double passes = time_ms(
        reps, traced, [&] { return passes::optimize(*module, 2).empty(); }, failure);
    if (!traced() || !passes::optimize(*module, 2).empty())
      die(k.name + ": trace or -O2 failed: " + ir::to_string(errors));
    const ir::Kernel &kernel = *module->kernels()[0];
    auto none = [] { return true; };

    std::optional<codegen::CSource> cuda_source;
    double emit = time_ms(
        reps, none,
        [&] {
          errors.clear();
          cuda_source = codegen::emit_cuda(kernel, codegen::cuda_features("sm_80"), errors);
          return cuda_source.has_value();
        },
        failure);
    double ptx = NAN, cubin = NAN, hip = NAN;
    if (cuda_source) {
      ptx = time_ms(
          reps, none,
          [&] {
            errors.clear();
            return codegen::cuda_detail::nvrtc_compile(*cuda_source, "compute_80", errors)
                .has_value();
          },
          failure);
      cubin = time_ms(
          reps, none,
          [&] {
            errors.clear();
            return codegen::cuda_detail::nvrtc_compile(*cuda_source, "sm_90", errors).has_value();
          },
          failure);
    }
    if (!errors.empty())
      std::fprintf(stderr, "%s: %s\n", k.name.c_str(), errors.front().message.c_str());
    errors.clear();
    auto hip_source = codegen::emit_hip(kernel, codegen::hip_features("gfx90a"), errors);
    if (hip_source)
      hip = time_ms(
          reps, none,
          [&] {
            errors.clear();
            return codegen::hip_detail::hiprtc_compile(*hip_source, "gfx90a", errors).has_value();
          },
          failure);
    if (!errors.empty())
      std::fprintf(stderr, "%s: %s\n", k.name.c_str(), errors.front().message.c_str());
    double spirv = time_ms(
        reps, none,
        [&] {
          errors.clear();
          return codegen::emit_spirv(kernel, codegen::TargetFeatures::vulkan_baseline(), errors)
              .has_value();
        },
        failure);
    double own = trace + passes + emit, all = own + ptx + cubin;
    std::string name = k.name;
    std::printf("%-16s %7s %7s %7s %9s %10s %8s %7s %8s %6.2f%%\n", name.c_str(),
                cell(trace).c_str(), cell(passes).c_str(), cell(emit).c_str(), cell(ptx).c_str(),
                cell(cubin).c_str(), cell(hip).c_str(), cell(spirv).c_str(), cell(all).c_str(),
                100 * own / all);
    json.push_back(fmt::format(
        R"({{"kernel": "{}", "configuration": "{}", "trace_ms": {}, "passes_ms": {}, "emit_cuda_ms": {}, "nvrtc_ptx_ms": {}, "nvrtc_cubin_sm90_ms": {}, "hiprtc_gfx90a_ms": {}, "spirv_ms": {}, "cubecc_share_of_cuda_compile": {}}})",
        k.name, k.configuration, json_number(trace), json_number(passes), json_number(emit),
        json_number(ptx), json_number(cubin), json_number(hip), json_number(spirv),
        std::isnan(all) ? "null" : fmt::format("{:.4f}", own / all)));
  }
  std::printf("\n");
  for (const std::string &line : json)
    std::printf("%s\n", line.c_str());
  return 0;
}
