//===- trace_bench.cpp - How long tracing each example kernel takes --------------------------===//
//
// Tracing runs on every launch that misses the kernel cache, so it must be cheap. One benchmark
// per registered example kernel (the examples are linked in), reporting µs per trace, building
// and destroying the module, as the runtime traces (KernelOptions::verify off: the runtime
// verifies only a kernel it must compile). verify/<kernel> times the verifier on the traced
// kernel, which `dsl::trace` runs by default. optimize/<kernel> times the -O3 pipeline on the
// traced kernel (tracing excluded) and reports the op counts before and after.
//   build/bench/trace_bench --benchmark_format=json
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/dsl/registry.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"

#include <benchmark/benchmark.h>

#include <sstream>
#include <stdexcept>

namespace {

void trace_one(benchmark::State &state, const cubecc::dsl::RegisteredKernel *registered) {
  cubecc::dsl::RegisteredKernel unverified = *registered;
  unverified.options.verify = false;
  const cubecc::dsl::RegisteredKernel *kernel = &unverified;
  for (auto _ : state) {
    cubecc::ir::Module module;
    std::vector<cubecc::ir::Diagnostic> errors;
    kernel->trace(module, *kernel, errors);
    if (!errors.empty())
      throw std::runtime_error(cubecc::ir::to_string(errors));
    benchmark::DoNotOptimize(module.kernels().data());
  }
  cubecc::ir::Module module;
  std::vector<cubecc::ir::Diagnostic> errors;
  kernel->trace(module, *kernel, errors);
  int ops = 0;
  module.kernels()[0]->walk([&](cubecc::ir::Operation *) { ++ops; });
  state.counters["ops"] = ops;
}

void verify_one(benchmark::State &state, const cubecc::dsl::RegisteredKernel *kernel) {
  cubecc::ir::Module module;
  std::vector<cubecc::ir::Diagnostic> errors;
  kernel->trace(module, *kernel, errors);
  if (!errors.empty())
    throw std::runtime_error(cubecc::ir::to_string(errors));
  for (auto _ : state) {
    errors = cubecc::ir::verify(*module.kernels()[0]);
    benchmark::DoNotOptimize(errors.data());
  }
}

/// The structural hash of the traced kernel: with the trace, the whole of the work an application
/// does per kernel before it looks the kernel up in an environment bundle.
void hash_one(benchmark::State &state, const cubecc::dsl::RegisteredKernel *kernel) {
  cubecc::ir::Module module;
  std::vector<cubecc::ir::Diagnostic> errors;
  kernel->trace(module, *kernel, errors);
  if (!errors.empty())
    throw std::runtime_error(cubecc::ir::to_string(errors));
  for (auto _ : state)
    benchmark::DoNotOptimize(cubecc::ir::structural_hash(*module.kernels()[0]));
}

int count_ops(const cubecc::ir::Module &module) {
  int ops = 0;
  module.kernels()[0]->walk([&](cubecc::ir::Operation *) { ++ops; });
  return ops;
}

void optimize_one(benchmark::State &state, const cubecc::dsl::RegisteredKernel *kernel) {
  cubecc::passes::PassManagerOptions options;
  options.verify_each = false; // release behaviour: verify once at the end, outside the timing
  cubecc::passes::PassManager manager(options);
  for (std::string_view pass : cubecc::passes::optimization_pipeline(3))
    manager.add(*cubecc::passes::find_pass(pass));
  int before = 0, after = 0;
  for (auto _ : state) {
    state.PauseTiming();
    cubecc::ir::Module module;
    std::vector<cubecc::ir::Diagnostic> errors;
    kernel->trace(module, *kernel, errors);
    before = count_ops(module);
    std::ostringstream out, err;
    state.ResumeTiming();
    errors = manager.run(module, out, err);
    state.PauseTiming();
    if (!errors.empty())
      throw std::runtime_error(cubecc::ir::to_string(errors));
    after = count_ops(module);
    state.ResumeTiming();
  }
  state.counters["ops_before"] = before;
  state.counters["ops_after"] = after;
}

} // namespace

int main(int argc, char **argv) {
  for (const cubecc::dsl::RegisteredKernel &k : cubecc::dsl::registered_kernels())
    benchmark::RegisterBenchmark(("trace/" + k.name).c_str(), trace_one, &k)
        ->Unit(benchmark::kMicrosecond);
  for (const cubecc::dsl::RegisteredKernel &k : cubecc::dsl::registered_kernels())
    benchmark::RegisterBenchmark(("verify/" + k.name).c_str(), verify_one, &k)
        ->Unit(benchmark::kMicrosecond);
  for (const cubecc::dsl::RegisteredKernel &k : cubecc::dsl::registered_kernels())
    benchmark::RegisterBenchmark(("hash/" + k.name).c_str(), hash_one, &k)
        ->Unit(benchmark::kMicrosecond);
  for (const cubecc::dsl::RegisteredKernel &k : cubecc::dsl::registered_kernels())
    benchmark::RegisterBenchmark(("optimize/" + k.name).c_str(), optimize_one, &k)
        ->Unit(benchmark::kMicrosecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
