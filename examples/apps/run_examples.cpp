//===- run_examples.cpp - Example kernels on the default device, as an application runs them --===//
//
// What an application embedding cubecc does: open the runtime (CUBECC_DEVICE, or the best device:
// vulkan, then interp), upload data as tensors, launch registered DSL kernels typed
// (cubecc::launch<F>: the arguments are checked against the kernel function's signature, and the
// kernel registered for F is traced, optimized and compiled at the first launch; the second finds
// the compiled kernel in the in-process cache without tracing), download and check the results
// against the host. With CUBECC_ENV naming an environment bundle (cubecc env build), the first
// launch loads the kernel from it instead of compiling. Last, a graph of launches is captured once
// and replayed. Prints the device, each kernel's device time and the cache, pool and environment
// statistics. Exit code 1 on a wrong result.
//
// Each kernel's first result is timed on the host, from asking for the kernel (trace and compile,
// or load from the bundle) to its output downloaded: with `--summary FILE`, one line per kernel
// "name<TAB>ok|WRONG<TAB>milliseconds" goes to FILE (scripts/demo.sh tabulates a JIT run against
// a bundle run).
//
//===-----------------------------------------------------------------------------------------===//
#include "../kernels/kernels.h"

#include <cubecc/launch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace cubecc;

namespace {

int failures = 0;
FILE *summary = nullptr;

using Clock = std::chrono::steady_clock;

/// Reports one check: `ns` is device time; `since`, when given, starts the host time to the first
/// result (kernel request to downloaded output) written to the summary.
void report(const char *what, bool ok, double ns, const std::string &detail,
            const Clock::time_point *since = nullptr) {
  std::printf("  %-34s %-5s %10.1f us  %s\n", what, ok ? "ok" : "WRONG", ns / 1000, detail.c_str());
  failures += !ok;
  if (summary && since) {
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - *since).count();
    std::fprintf(summary, "%s\t%s\t%.2f\n", what, ok ? "ok" : "WRONG", ms);
  }
}

double total(const std::vector<double> &ns) {
  double sum = 0;
  for (double t : ns)
    sum += t;
  return sum;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

} // namespace

int main(int argc, char **argv) try {
  if (argc == 3 && std::strcmp(argv[1], "--summary") == 0) {
    summary = std::fopen(argv[2], "w");
    if (!summary) {
      std::fprintf(stderr, "run_examples: cannot write %s\n", argv[2]);
      return 2;
    }
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: run_examples [--summary FILE]\n");
    return 2;
  }
  runtime::Runtime rt = runtime::Runtime::open();
  std::printf("device: %s (%s), subgroup size %u\n", rt.info().name.c_str(),
              rt.info().backend.c_str(), rt.info().subgroup_size);

  { // axpy, twice: the second launch is warm (no trace, no compile)
    const uint32_t n = 1 << 20;
    std::vector<float> x = random_floats(n, 1), y = random_floats(n, 2);
    Tensor dx = rt.upload(x), dy = rt.upload(y);
    for (int round = 0; round < 2; ++round) {
      Clock::time_point start = Clock::now();
      launch<examples::axpy<1>>(rt, runtime::grid_1d(n, 256), dx, dy, 2.0f);
      rt.synchronize();
      double ns = rt.last_launch_times_ns().at(0);
      std::vector<float> got = rt.download<float>(dy.buffer());
      bool ok = true;
      for (uint32_t i = 0; i < n; ++i) {
        volatile float product = 2.0f * x[i];
        y[i] = product + y[i];
        ok &= got[i] == y[i];
      }
      if (round == 0)
        report("axpy", ok, ns, "n = 2^20, bit-exact; first launch", &start);
      else
        report("axpy (warm: cached)", ok, ns, "n = 2^20, bit-exact");
    }
  }
  { // reduce_sum: 64 partial sums, then one
    const uint32_t n = 1 << 20, groups = 64;
    std::vector<float> in = random_floats(n, 3);
    Tensor din = rt.upload(in), partial = rt.allocate<float>(groups), sum = rt.allocate<float>(1);
    Clock::time_point start = Clock::now();
    auto reduce = registered_kernel<examples::reduce<examples::ReduceOp::Sum, 256>>(rt);
    launch(rt, reduce, {groups, 1, 1}, din, partial);
    launch(rt, reduce, {1, 1, 1}, partial, sum);
    rt.synchronize();
    std::vector<double> ns = rt.last_launch_times_ns();
    double exact = 0, magnitude = 0;
    for (float v : in) {
      exact += v;
      magnitude += std::abs(v);
    }
    float got = rt.download<float>(sum.buffer())[0];
    report("reduce_sum", std::abs(got - exact) <= n * 0x1p-24 * magnitude, total(ns),
           "n = 2^20, " + std::to_string(got) + " (exact " + std::to_string(exact) + ")", &start);
  }
  { // matmul 256 x 256 x 256
    const uint32_t m = 256, k = 256, n = 256;
    std::vector<float> a = random_floats(m * k, 4), b = random_floats(k * n, 5);
    Tensor da(rt.upload(a), {m, k}), db(rt.upload(b), {k, n}),
        dc(rt.allocate<float>(m * n), {m, n});
    Clock::time_point start = Clock::now();
    launch<examples::matmul<16, 16, 16>>(rt, {n / 16, m / 16, 1}, da, db, dc);
    rt.synchronize();
    std::vector<float> c = rt.download<float>(dc.buffer());
    bool ok = true;
    for (uint32_t i = 0; i < m; ++i)
      for (uint32_t j = 0; j < n; ++j) {
        float acc = 0; // the kernel's order: fma over k, single rounding each
        for (uint32_t p = 0; p < k; ++p)
          acc = std::fma(a[i * k + p], b[p * n + j], acc);
        ok &= c[i * n + j] == acc;
      }
    report("matmul_16x16x16", ok, total(rt.last_launch_times_ns()), "256^3, bit-exact fma chain",
           &start);
  }
  { // histogram of 2^20 values below 300 into 256 bins (values >= 256 are not counted)
    const uint32_t n = 1 << 20, bins = 256;
    std::mt19937 rng(7);
    std::vector<uint32_t> in(n);
    for (uint32_t &v : in)
      v = rng() % 300;
    Tensor din = rt.upload(in), dhist = rt.upload(std::vector<uint32_t>(bins, 0));
    Clock::time_point start = Clock::now();
    launch<examples::histogram<256, 256>>(rt, {64, 1, 1}, din, dhist);
    rt.synchronize();
    double ns = total(rt.last_launch_times_ns());
    std::vector<uint32_t> got = rt.download<uint32_t>(dhist.buffer()), want(bins, 0);
    for (uint32_t v : in)
      if (v < bins)
        ++want[v];
    report("histogram_256", got == want, ns, "n = 2^20, exact counts", &start);
  }
  { // prefix sums of 2^16 u32 values in blocks of 256, and the blocks' sums
    const uint32_t n = 1 << 16, block = 256, blocks = n / block;
    std::mt19937 rng(8);
    std::vector<uint32_t> in(n);
    for (uint32_t &v : in)
      v = rng() % 1000;
    Tensor din = rt.upload(in), dout = rt.allocate<uint32_t>(n),
           dsums = rt.allocate<uint32_t>(blocks);
    Clock::time_point start = Clock::now();
    launch<examples::prefix_sum<uint32_t, 256>>(rt, {blocks, 1, 1}, din, dout, dsums);
    rt.synchronize();
    double ns = total(rt.last_launch_times_ns());
    std::vector<uint32_t> out = rt.download<uint32_t>(dout.buffer()),
                          sums = rt.download<uint32_t>(dsums.buffer());
    bool ok = true;
    for (uint32_t b = 0; b < blocks; ++b) {
      uint32_t running = 0;
      for (uint32_t i = b * block; i < (b + 1) * block; ++i) {
        running += in[i];
        ok &= out[i] == running;
      }
      ok &= sums[b] == running;
    }
    report("prefix_sum_u32", ok, ns, "n = 2^16, exact, per block of 256", &start);
  }
  { // softmax over 512 rows of 1000 columns
    const uint32_t rows = 512, cols = 1000;
    std::vector<float> in = random_floats(rows * cols, 9);
    for (float &v : in)
      v *= 20; // exponents far from 0: the row maximum must be subtracted
    Tensor din(rt.upload(in), {rows, cols}), dout(rt.allocate<float>(rows * cols), {rows, cols});
    Clock::time_point start = Clock::now();
    launch<examples::softmax<256>>(rt, {rows, 1, 1}, din, dout);
    rt.synchronize();
    double ns = total(rt.last_launch_times_ns());
    std::vector<float> out = rt.download<float>(dout.buffer());
    double worst = 0;
    for (uint32_t r = 0; r < rows; ++r) {
      double max = -INFINITY, sum = 0;
      for (uint32_t c = 0; c < cols; ++c)
        max = std::max(max, double(in[r * cols + c]));
      for (uint32_t c = 0; c < cols; ++c)
        sum += std::exp(double(in[r * cols + c]) - max);
      for (uint32_t c = 0; c < cols; ++c) {
        double want = std::exp(double(in[r * cols + c]) - max) / sum;
        worst = std::max(worst, std::abs(out[r * cols + c] - want) / std::max(want, 1e-30));
      }
    }
    // The bound of the e2e suite (test/e2e/example_cases.cpp): the row's sum of `cols` terms
    // rounds with a relative error up to (cols - 1) units, exp and the subtraction add ~32.
    const double limit = (cols + 32) * 0x1p-24;
    char detail[96];
    std::snprintf(detail, sizeof detail, "512 x 1000, max relative error %.1e (limit %.1e)", worst,
                  limit);
    report("softmax", worst <= limit, ns, detail, &start);
  }
  { // transpose of a 1000 x 700 matrix (partial tiles at both edges)
    const uint32_t rows = 1000, cols = 700;
    std::vector<float> in = random_floats(rows * cols, 10);
    Tensor din(rt.upload(in), {rows, cols}), dout(rt.allocate<float>(rows * cols), {cols, rows});
    Clock::time_point start = Clock::now();
    launch<examples::transpose<32, 8>>(rt, {(cols + 31) / 32, (rows + 31) / 32, 1}, din, dout);
    rt.synchronize();
    double ns = total(rt.last_launch_times_ns());
    std::vector<float> out = rt.download<float>(dout.buffer());
    bool ok = true;
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c)
        ok &= out[c * rows + r] == in[r * cols + c];
    report("transpose_32x8", ok, ns, "1000 x 700, exact", &start);
  }

  { // a graph: 8 dependent axpy launches captured once, replayed 16 times (128 launches)
    const uint32_t n = 4096;
    std::vector<float> x = random_floats(n, 5), y = random_floats(n, 6);
    Tensor dx = rt.upload(x), dy = rt.upload(y);
    auto axpy = registered_kernel<examples::axpy<1>>(rt);
    rt.begin_capture();
    for (int i = 0; i < 8; ++i)
      launch(rt, axpy, grid_for(dy, axpy), dx, dy, 0.5f);
    runtime::Graph graph = rt.end_capture();
    for (int r = 0; r < 16; ++r)
      rt.replay(graph);
    rt.synchronize();
    double ns = total(rt.last_launch_times_ns());
    std::vector<float> got = rt.download<float>(dy.buffer());
    bool ok = true;
    for (uint32_t i = 0; i < n; ++i) {
      float v = y[i];
      for (int k = 0; k < 8 * 16; ++k) {
        volatile float product = 0.5f * x[i];
        v = product + v;
      }
      ok &= got[i] == v;
    }
    report("axpy graph (8 launches, 16 replays)", ok, ns, "n = 4096, bit-exact");
  }

  auto cache = rt.cache_statistics();
  runtime::PoolStatistics pool = rt.pool_statistics();
  std::printf("kernel cache: %llu hits, %llu misses, %llu traces, %llu compiles\n",
              (unsigned long long)cache.hits, (unsigned long long)cache.misses,
              (unsigned long long)cache.traces, (unsigned long long)cache.compiles);
  std::printf("memory pool: %llu allocations, %llu reused, peak %llu bytes requested, %llu "
              "reserved (x%.3f)\n",
              (unsigned long long)pool.allocations, (unsigned long long)pool.reuses,
              (unsigned long long)pool.peak_bytes_requested,
              (unsigned long long)pool.peak_bytes_reserved, pool.peak_reserved_ratio());
  if (const runtime::EnvironmentSource *env = rt.environment()) {
    runtime::EnvironmentStatistics e = rt.environment_statistics();
    std::printf("environment %s: %llu kernels loaded from it, %llu not in it, %llu unusable\n",
                env->name().c_str(), (unsigned long long)e.hits, (unsigned long long)e.misses,
                (unsigned long long)e.rejected);
  }
  if (summary)
    std::fclose(summary);
  if (failures)
    std::printf("run_examples: %d wrong result(s)\n", failures);
  return failures ? 1 : 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "run_examples: %s\n", e.what());
  return 1;
}
