//===- trace_bench.cpp - How long tracing each example kernel takes --------------------------===//
//
// Tracing runs on every launch that misses the kernel cache, so it must be cheap. One benchmark
// per registered example kernel (the examples are linked in), reporting µs per trace; the
// verifier, which tracing runs too, is included.
//   build/bench/trace_bench --benchmark_format=json
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/dsl/registry.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/printer.h"

#include <benchmark/benchmark.h>

#include <stdexcept>

namespace {

void trace_one(benchmark::State &state, const cubecc::dsl::RegisteredKernel *kernel) {
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

} // namespace

int main(int argc, char **argv) {
  for (const cubecc::dsl::RegisteredKernel &k : cubecc::dsl::registered_kernels())
    benchmark::RegisterBenchmark(("trace/" + k.name).c_str(), trace_one, &k)
        ->Unit(benchmark::kMicrosecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
