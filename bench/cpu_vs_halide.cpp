//===- cpu_vs_halide.cpp - cubecc on the CPU against Halide 14, with lavapipe alongside -------===//
//
// The same problems, at the same sizes, in one run: axpy 2^24, row softmax 4096 x 1024, transpose
// 4096^2, sum 2^24 (GB/s) and sgemm 512^3, 1024^3 (GFLOP/s). Three implementations per problem:
//
//  - Halide 14, JIT-compiled once for the host (every feature it detects: AVX-512 here) before
//    timing, with schedules written here: vectorized by the native width, parallel over rows or
//    tiles, sgemm register-blocked (3 vectors x 8 rows of C in registers) over a packed panel of B;
//  - cubecc on the `cpu` device (--device): the example kernels (examples/kernels) and kernels
//    written here for SIMD lanes (flat indexing, so that neighbouring invocations touch
//    neighbouring elements; register-blocked sgemm), each a row of the table;
//  - the same cubecc kernels on `vulkan` (lavapipe: Mesa's software Vulkan, on the same cores).
//
// Every implementation is checked against a host reference (double precision where rounding
// matters) before it is timed; that run is also the warm-up. Then up to --reps timed runs (fewer
// when a cell would take longer than --budget-ms); each run is wall-clock from the launch to the
// end of the synchronize (realize for Halide), and the median is reported. Throughput counts the
// bytes a problem must move at least (axpy 12 B per element, softmax and transpose 8, sum 4) or 2 M
// N K flops. Before the problems, the machine's stream bandwidth: copy, triad and an in-place
// update (a = s b + a) over 2^25 floats on every core; the axpy rows are also given as a share of
// the update, which runs in the same alternation (the same accesses, 12 B per element).
//
// Prints a table, then one JSON object per row.
//
// Usage: cpu_vs_halide [--device NAME] [--no-vulkan] [--reps N] [--budget-ms MS] [--only PROBLEM]
//                      [--dump DIR]   (each cubecc kernel's IR after -O2, and its LLVM IR and
//                                      assembly when the CPU backend is built)
//
//===-----------------------------------------------------------------------------------------===//
#include "bench_support.h"
#include "cubecc/dsl.h"
#include "cubecc/dsl/registry.h"
#include "cubecc/dsl/trace.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/printer.h"
#include "cubecc/passes/pass_manager.h"
#include "cubecc/runtime/runtime.h"

#include <Halide.h>
#if CUBECC_BENCH_HAVE_CPU_BACKEND
#include "cubecc/codegen/cpu.h"
#endif
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace cubecc;
namespace hl = Halide;

namespace {

using bench::Clock;
using bench::json_number;
using bench::ms_since;

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "cpu_vs_halide: %s\n", message.c_str());
  std::exit(1);
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

//===- The machine's stream bandwidth ---------------------------------------------------------===//

struct StreamResult {
  int threads = 0;
  double copy_gbs = NAN, triad_gbs = NAN, update_gbs = NAN;
};

/// Over 2^25 floats on every core, each thread on its own contiguous slice (which it also
/// initialized, so its pages are local): STREAM's copy (c = a, counted 8 B per element) and triad
/// (a = b + s c, 12 B), and an in-place update (a = s b + a, 12 B): the access pattern of axpy,
/// which, unlike the triad, has no write-allocate traffic for a separate output.
class Stream {
public:
  static constexpr size_t kFloats = size_t(1) << 25;

  Stream()
      : threads_(std::max(1u, std::thread::hardware_concurrency())), a_(new float[kFloats]),
        b_(new float[kFloats]), c_(new float[kFloats]) {
    on_all_threads([this](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) {
        a_[i] = 1.0f;
        b_[i] = 2.0f;
        c_[i] = 0.5f;
      }
    });
  }

  void copy() {
    on_all_threads([a = a_.get(), c = c_.get()](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i)
        c[i] = a[i];
    });
  }
  void triad() {
    on_all_threads([a = a_.get(), b = b_.get(), c = c_.get()](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i)
        a[i] = b[i] + 3.0f * c[i];
    });
  }
  void update() {
    on_all_threads([a = a_.get(), b = b_.get()](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i)
        a[i] = 0.5f * b[i] + a[i];
    });
  }

  /// Medians of `reps` runs of each after one warm-up.
  StreamResult measure(int reps) {
    auto median_ms = [&](void (Stream::*body)()) {
      std::vector<double> times;
      for (int r = 0; r <= reps; ++r) {
        auto start = Clock::now();
        (this->*body)();
        if (r > 0)
          times.push_back(ms_since(start));
      }
      return bench::median(times);
    };
    double copy_ms = median_ms(&Stream::copy), triad_ms = median_ms(&Stream::triad),
           update_ms = median_ms(&Stream::update);
    return {threads_, 8.0 * kFloats / copy_ms / 1e6, 12.0 * kFloats / triad_ms / 1e6,
            12.0 * kFloats / update_ms / 1e6};
  }

private:
  template <class F> void on_all_threads(F &&body) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads_; ++t)
      pool.emplace_back([&, t] { body(kFloats * t / threads_, kFloats * (t + 1) / threads_); });
    for (auto &thread : pool)
      thread.join();
  }

  int threads_;
  std::unique_ptr<float[]> a_, b_, c_;
};

//===- cubecc kernels written for SIMD lanes --------------------------------------------------===//
//
// The example kernels index tensors through their strides (`t(i, j)`), which the compiler cannot
// prove to be 1; these index the contiguous row-major data directly (`t[i]`), so neighbouring
// invocations touch neighbouring elements and a SIMD target can use vector loads and stores.

namespace kernels {

namespace dsl = cubecc::dsl;

/// y = a x + y, one element per invocation, over a 2-D grid of 256-wide workgroups (a 1-D grid
/// of 2^24 / 256 workgroups exceeds Vulkan's 65,535 per dimension).
void axpy_2d(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a) {
  dsl::Dim3 g = dsl::global_id();
  dsl::Val<uint32_t> i = g.y * (dsl::num_workgroups().x * 256u) + g.x;
  dsl::if_(i < y.size(), [&] { y[i] = a * x[i] + y[i]; });
}

/// Softmax of each row, one workgroup of kWorkgroup invocations per row (as the example, with
/// flat indexing and loops over rounds of columns rather than over each invocation's columns): max,
/// sum of exponentials and the normalized row, each combined over the workgroup by a subgroup
/// reduction, one partial per subgroup in shared memory and a barrier.
template <int kWorkgroup>
void softmax_rows(dsl::Tensor<const float, 2> in, dsl::Tensor<float, 2> out) {
  dsl::Shared<float, kWorkgroup> scratch;
  dsl::Val<uint32_t> row = dsl::workgroup_id().x;
  dsl::Val<uint32_t> cols = in.shape(1);
  dsl::Val<uint32_t> base = row * cols;
  dsl::Val<uint32_t> first = dsl::local_index();
  dsl::Val<uint32_t> lane = dsl::subgroup_lane();
  dsl::Val<uint32_t> subgroup = dsl::subgroup_id();

  auto workgroup_reduce = [&](const dsl::Var<float> &v, bool max) {
    dsl::Val<float> partial = max ? dsl::subgroup_max(v) : dsl::subgroup_sum(v);
    dsl::if_(lane == 0u, [&] { scratch[subgroup] = partial; });
    dsl::barrier();
    dsl::Var<float> acc = max ? -std::numeric_limits<float>::infinity() : 0.0f;
    dsl::for_(0u, dsl::num_subgroups(), [&](dsl::Val<uint32_t> s) {
      if (max)
        acc = dsl::max(acc, scratch[s]);
      else
        acc += scratch[s];
    });
    dsl::Val<float> total = acc;
    dsl::barrier();
    return total;
  };

  dsl::if_(row < in.shape(0), [&] {
    dsl::Var<float> running_max = -std::numeric_limits<float>::infinity();
    // Each sweep counts rounds of kWorkgroup columns (the same for the whole workgroup), so the
    // column of an invocation is uniform + local_index: neighbouring lanes, neighbouring columns.
    dsl::Val<uint32_t> rounds = (cols + (kWorkgroup - 1)) / kWorkgroup;
    auto sweep = [&](auto &&body) {
      dsl::for_(0u, rounds, [&](dsl::Val<uint32_t> k) {
        dsl::Val<uint32_t> c = k * kWorkgroup + first;
        dsl::if_(c < cols, [&] { body(c); });
      });
    };
    sweep([&](dsl::Val<uint32_t> c) { running_max = dsl::max(running_max, in[base + c]); });
    dsl::Val<float> row_max = workgroup_reduce(running_max, true);
    dsl::Var<float> running_sum = 0.0f;
    sweep([&](dsl::Val<uint32_t> c) { running_sum += dsl::exp(in[base + c] - row_max); });
    dsl::Val<float> row_sum = workgroup_reduce(running_sum, false);
    sweep(
        [&](dsl::Val<uint32_t> c) { out[base + c] = dsl::exp(in[base + c] - row_max) / row_sum; });
  });
}

/// out = transpose(in) without shared memory: invocation (x, y) writes out(y, x) (neighbours
/// write neighbouring elements) from in(x, y) (a strided read; the workgroup's kTile rows of
/// `out` read the same kTile cache lines of `in`). Workgroup kTile x kTile.
template <int kTile>
void transpose_direct(dsl::Tensor<const float, 2> in, dsl::Tensor<float, 2> out) {
  dsl::Val<uint32_t> rows = in.shape(0);
  dsl::Val<uint32_t> cols = in.shape(1);
  dsl::Val<uint32_t> x = dsl::global_id().x; // a column of `out`, a row of `in`
  dsl::Val<uint32_t> y = dsl::global_id().y; // a row of `out`, a column of `in`
  dsl::if_(x < rows && y < cols, [&] { out[y * rows + x] = in[x * cols + y]; });
}

/// One partial sum per workgroup over its own contiguous chunk of `in` (ceil(n / groups)
/// elements), in rounds of kWorkgroup consecutive elements; then a subgroup reduction, the
/// subgroups' partials in shared memory, and the first invocation adds them up.
template <int kWorkgroup> void sum_chunks(dsl::Tensor<const float> in, dsl::Tensor<float> out) {
  dsl::Shared<float, kWorkgroup> partials;
  dsl::Val<uint32_t> n = in.size();
  dsl::Val<uint32_t> groups = dsl::num_workgroups().x;
  dsl::Val<uint32_t> chunk = (n + groups - 1u) / groups;
  dsl::Val<uint32_t> begin = dsl::workgroup_id().x * chunk;
  dsl::Val<uint32_t> end = dsl::min(begin + chunk, n);
  dsl::Var<float> acc = 0.0f;
  // Rounds of kWorkgroup elements (a count the whole workgroup shares), so that an invocation's
  // element is uniform + local_index: neighbouring lanes read neighbouring elements.
  dsl::Val<uint32_t> rounds = (dsl::max(end, begin) - begin + (kWorkgroup - 1)) / kWorkgroup;
  dsl::for_(0u, rounds, [&](dsl::Val<uint32_t> k) {
    dsl::Val<uint32_t> i = begin + k * kWorkgroup + dsl::local_index();
    dsl::if_(i < end, [&] { acc += in[i]; });
  });
  dsl::Val<float> mine = dsl::subgroup_sum(acc);
  dsl::if_(dsl::subgroup_lane() == 0u, [&] { partials[dsl::subgroup_id()] = mine; });
  dsl::barrier();
  dsl::if_(dsl::local_index() == 0u, [&] {
    dsl::Var<float> total = 0.0f;
    dsl::for_(0u, dsl::num_subgroups(), [&](dsl::Val<uint32_t> s) { total += partials[s]; });
    out[dsl::workgroup_id().x] = total;
  });
}

/// C = A B (row-major, M x K times K x N), each invocation kRows rows of one column of C in
/// registers: per step of k, one element of B (neighbouring invocations: neighbouring columns)
/// times kRows elements of A (the same for the whole workgroup). Workgroup kCols x 1; launch
/// N / kCols x M / kRows workgroups (the host checks that they divide).
template <int kRows, int kCols>
void sgemm_rows(dsl::Tensor<const float, 2> a, dsl::Tensor<const float, 2> b,
                dsl::Tensor<float, 2> c) {
  dsl::Val<uint32_t> k_size = a.shape(1);
  dsl::Val<uint32_t> n = b.shape(1);
  dsl::Val<uint32_t> col = dsl::global_id().x;
  dsl::Val<uint32_t> row0 = dsl::workgroup_id().y * kRows;
  std::vector<dsl::Var<float>> acc;
  acc.reserve(kRows);
  for (int r = 0; r < kRows; ++r)
    acc.emplace_back(0.0f);
  dsl::for_(
      0u, k_size, 1u,
      [&](dsl::Val<uint32_t> k) {
        dsl::Val<float> bk = b[k * n + col];
        for (int r = 0; r < kRows; ++r)
          acc[r] = dsl::fma(a[(row0 + r) * k_size + k], bk, acc[r]);
      },
      dsl::Unroll{4});
  for (int r = 0; r < kRows; ++r)
    c[(row0 + r) * n + col] = acc[r];
}

} // namespace kernels

//===- Problems -------------------------------------------------------------------------------===//

/// One cubecc kernel for a problem: how to trace it and how to launch it on buffers uploaded from
/// the problem's inputs (the output buffer is the last of them).
struct CubeccVariant {
  std::string label; ///< what the table calls it
  std::function<std::unique_ptr<ir::Module>()> trace;
  std::function<void(runtime::Runtime &, const runtime::KernelHandle &,
                     std::vector<runtime::Buffer> &)>
      launch;
  /// false: not run on vulkan (lavapipe would take tens of seconds).
  bool on_vulkan = true;
};

struct Problem {
  std::string name, size, unit;           ///< unit: "GB/s" or "GFLOP/s"
  double work = 0;                        ///< bytes or flops of one run
  std::vector<std::vector<float>> inputs; ///< the last one is the output (its initial contents)
  /// Checks an output (the last buffer after one run from the initial inputs); "" when right.
  std::function<std::string(const std::vector<float> &)> check;
  /// Compiles the Halide pipeline (jit_ms set) and returns its run over the given host buffers.
  std::function<std::function<void()>(std::vector<std::vector<float>> &, double &jit_ms)> halide;
  std::vector<CubeccVariant> variants;
};

Problem problem(std::string name, std::string size, std::string unit, double work) {
  Problem p;
  p.name = std::move(name);
  p.size = std::move(size);
  p.unit = std::move(unit);
  p.work = work;
  return p;
}

std::unique_ptr<ir::Module> optimized(dsl::TraceResult result, const std::string &name) {
  if (!result.module)
    die(name + ": trace failed: " + ir::to_string(result.errors));
  return std::move(result.module);
}

std::function<std::unique_ptr<ir::Module>()> registered(const std::string &name) {
  return [name] {
    for (const auto &k : dsl::registered_kernels())
      if (k.name == name) {
        auto module = std::make_unique<ir::Module>();
        std::vector<ir::Diagnostic> errors;
        k.trace(*module, k, errors);
        if (!errors.empty())
          die(name + ": trace failed: " + ir::to_string(errors));
        return module;
      }
    die("no example kernel named " + name);
  };
}

/// The first element where |got - want| > tolerance(i), as a message; "" when there is none.
std::string first_mismatch(const std::vector<float> &got, size_t count,
                           const std::function<double(size_t)> &want,
                           const std::function<double(size_t)> &tolerance) {
  for (size_t i = 0; i < count; ++i) {
    double w = want(i);
    if (!(std::abs(got[i] - w) <= tolerance(i)))
      return fmt::format("element {}: got {}, want {}", i, got[i], w);
  }
  return "";
}

hl::Target halide_target() {
  static const hl::Target target = hl::get_host_target();
  return target;
}

double compile_halide(hl::Func &f) {
  auto start = Clock::now();
  f.compile_jit(halide_target());
  return ms_since(start);
}

Problem axpy_problem() {
  const int n = 1 << 24;
  const float a = 1.5f;
  Problem p = problem("axpy", "2^24", "GB/s", 12.0 * n);
  p.inputs = {random_floats(n, 1), random_floats(n, 2)};
  auto x = std::make_shared<std::vector<float>>(p.inputs[0]);
  auto y = std::make_shared<std::vector<float>>(p.inputs[1]);
  p.check = [=](const std::vector<float> &got) {
    return first_mismatch(
        got, n, [&](size_t i) { return double(a) * (*x)[i] + (*y)[i]; },
        [&](size_t i) { return 1e-6 * (std::abs(a * (*x)[i]) + std::abs((*y)[i])); });
  };
  // y = a x + y in place, as the cubecc kernel: 8-lane-aligned slices of 2^16 elements over the
  // threads, each four native vectors at a time.
  p.halide = [=](std::vector<std::vector<float>> &buffers, double &jit_ms) {
    const int v = halide_target().natural_vector_size<float>();
    auto xp = std::make_shared<hl::ImageParam>(hl::Float(32), 1, "x");
    auto yp = std::make_shared<hl::ImageParam>(hl::Float(32), 1, "y");
    hl::Param<float> ap("a", a);
    hl::Var i("i"), io("io"), ii("ii"), iii("iii");
    auto f = std::make_shared<hl::Func>("axpy");
    (*f)(i) = ap * (*xp)(i) + (*yp)(i);
    f->split(i, io, ii, 1 << 16)
        .parallel(io)
        .split(ii, ii, iii, v * 4)
        .vectorize(iii, v)
        .unroll(iii);
    for (auto *param : {xp.get(), yp.get()})
      param->dim(0).set_bounds(0, n);
    f->output_buffer().dim(0).set_bounds(0, n);
    jit_ms = compile_halide(*f);
    auto xb = std::make_shared<hl::Buffer<float>>(buffers[0].data(), n);
    auto yb = std::make_shared<hl::Buffer<float>>(buffers[1].data(), n);
    xp->set(*xb);
    yp->set(*yb);
    return std::function<void()>([=] { f->realize(*yb); });
  };
  auto launch = [=](std::array<uint32_t, 3> grid) {
    return
        [=](runtime::Runtime &rt, const runtime::KernelHandle &k, std::vector<runtime::Buffer> &b) {
          rt.launch(k, grid, b[0], uint32_t(n), 1u, b[1], uint32_t(n), 1u, a);
        };
  };
  p.variants = {{"axpy_w4 (example)", registered("axpy_w4"), launch({n / 4 / 256, 1, 1})},
                {"axpy_2d (flat)",
                 [] {
                   return optimized(
                       dsl::trace<kernels::axpy_2d>("axpy_2d", {.workgroup = {256, 1, 1}}),
                       "axpy_2d");
                 },
                 launch({n / 256 / 64, 64, 1})}};
  return p;
}

Problem softmax_problem() {
  const int rows = 4096, cols = 1024;
  Problem p = problem("softmax", "4096 x 1024", "GB/s", 8.0 * rows * cols);
  p.inputs = {random_floats(size_t(rows) * cols, 3, -8, 8), std::vector<float>(rows * cols)};
  auto in = std::make_shared<std::vector<float>>(p.inputs[0]);
  p.check = [=](const std::vector<float> &got) {
    std::vector<double> want(size_t(rows) * cols);
    for (int r = 0; r < rows; ++r) {
      const float *row = in->data() + size_t(r) * cols;
      double max = *std::max_element(row, row + cols), sum = 0;
      for (int c = 0; c < cols; ++c)
        sum += std::exp(double(row[c]) - max);
      for (int c = 0; c < cols; ++c)
        want[size_t(r) * cols + c] = std::exp(double(row[c]) - max) / sum;
    }
    return first_mismatch(
        got, want.size(), [&](size_t i) { return want[i]; },
        [&](size_t i) { return 1e-5 * want[i] + 1e-10; });
  };
  // Per row: the maximum and the sum of exponentials as one vector of partials each (a manual
  // rfactor: the reduction over the row vectorizes), the exponentials computed once into a
  // row-sized buffer on the stack, rows in parallel.
  p.halide = [=](std::vector<std::vector<float>> &buffers, double &jit_ms) {
    const int v = halide_target().natural_vector_size<float>();
    auto inp = std::make_shared<hl::ImageParam>(hl::Float(32), 2, "in");
    hl::Var c("c"), r("r"), l("l"), ro("ro"), ri("ri");
    hl::RDom k(0, cols / v, "k"), lanes(0, v, "lanes");
    hl::Func max_part("max_part"), row_max("row_max"), e("e"), sum_part("sum_part"),
        row_sum("row_sum");
    auto f = std::make_shared<hl::Func>("softmax");
    max_part(l, r) = hl::Float(32).min();
    max_part(l, r) = hl::max(max_part(l, r), (*inp)(k * v + l, r));
    row_max(r) = hl::maximum(max_part(lanes, r));
    e(c, r) = hl::exp((*inp)(c, r) - row_max(r));
    sum_part(l, r) = 0.0f;
    sum_part(l, r) += e(k * v + l, r);
    row_sum(r) = hl::sum(sum_part(lanes, r));
    (*f)(c, r) = e(c, r) / row_sum(r);

    f->split(r, ro, ri, 4).parallel(ro).vectorize(c, v);
    e.compute_at(*f, ri).vectorize(c, v);
    for (hl::Func *g : {&max_part, &sum_part}) {
      g->compute_at(*f, ri).vectorize(l);
      g->update().vectorize(l);
    }
    row_max.compute_at(*f, ri);
    row_sum.compute_at(*f, ri);
    inp->dim(0).set_bounds(0, cols).dim(1).set_bounds(0, rows).set_stride(cols);
    f->output_buffer().dim(0).set_bounds(0, cols).dim(1).set_bounds(0, rows).set_stride(cols);
    jit_ms = compile_halide(*f);
    auto ib = std::make_shared<hl::Buffer<float>>(buffers[0].data(), cols, rows);
    auto ob = std::make_shared<hl::Buffer<float>>(buffers[1].data(), cols, rows);
    inp->set(*ib);
    return std::function<void()>([=] { f->realize(*ob); });
  };
  auto launch = [=](runtime::Runtime &rt, const runtime::KernelHandle &k,
                    std::vector<runtime::Buffer> &b) {
    const uint32_t r = rows, c = cols;
    rt.launch(k, {r, 1, 1}, b[0], r, c, c, 1u, b[1], r, c, c, 1u);
  };
  p.variants = {{"softmax (example, wg 256)", registered("softmax"), launch},
                {"softmax_rows<64> (flat)",
                 [] {
                   return optimized(dsl::trace<kernels::softmax_rows<64>>(
                                        "softmax_rows_64", {.workgroup = {64, 1, 1}}),
                                    "softmax_rows_64");
                 },
                 launch}};
  return p;
}

Problem transpose_problem() {
  const int rows = 4096, cols = 4096;
  Problem p = problem("transpose", "4096 x 4096", "GB/s", 8.0 * rows * cols);
  p.inputs = {random_floats(size_t(rows) * cols, 5), std::vector<float>(size_t(rows) * cols)};
  auto in = std::make_shared<std::vector<float>>(p.inputs[0]);
  p.check = [=](const std::vector<float> &got) {
    return first_mismatch(
        got, got.size(), [&](size_t i) { return (*in)[(i % rows) * cols + i / rows]; },
        [](size_t) { return 0.0; });
  };
  // Halide's block transpose (test/performance/block_transpose.cpp): native-width square blocks
  // loaded as vectors, transposed in registers, stored as vectors; 64 x 64 tiles in parallel.
  p.halide = [=](std::vector<std::vector<float>> &buffers, double &jit_ms) {
    const int v = halide_target().natural_vector_size<float>();
    auto inp = std::make_shared<hl::ImageParam>(hl::Float(32), 2, "in");
    hl::Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi"), xii("xii"), yii("yii"), t("t");
    hl::Func block("block");
    auto f = std::make_shared<hl::Func>("transpose");
    block(x, y) = (*inp)(x, y);
    (*f)(x, y) = block(y, x);
    f->tile(x, y, xo, yo, xi, yi, 64, 64)
        .fuse(xo, yo, t)
        .parallel(t)
        .tile(xi, yi, xi, yi, xii, yii, v, v)
        .vectorize(xii)
        .unroll(yii);
    block.compute_at(*f, xi).vectorize(x).unroll(y);
    inp->dim(0).set_bounds(0, cols).dim(1).set_bounds(0, rows).set_stride(cols);
    f->output_buffer().dim(0).set_bounds(0, rows).dim(1).set_bounds(0, cols).set_stride(rows);
    jit_ms = compile_halide(*f);
    auto ib = std::make_shared<hl::Buffer<float>>(buffers[0].data(), cols, rows);
    auto ob = std::make_shared<hl::Buffer<float>>(buffers[1].data(), rows, cols);
    inp->set(*ib);
    return std::function<void()>([=] { f->realize(*ob); });
  };
  auto launch = [=](uint32_t tile) {
    return [=](runtime::Runtime &rt, const runtime::KernelHandle &k,
               std::vector<runtime::Buffer> &b) {
      const uint32_t r = rows, c = cols;
      // The example's grid is ceil(cols / 32) x ceil(rows / 32); the direct kernel's is over
      // out's columns (in's rows) in x.
      std::array<uint32_t, 3> grid = tile == 32 ? std::array<uint32_t, 3>{c / 32, r / 32, 1}
                                                : std::array<uint32_t, 3>{r / tile, c / tile, 1};
      rt.launch(k, grid, b[0], r, c, c, 1u, b[1], c, r, r, 1u);
    };
  };
  p.variants = {{"transpose_32x8 (example)", registered("transpose_32x8"), launch(32)},
                {"transpose_direct<16> (flat)",
                 [] {
                   return optimized(dsl::trace<kernels::transpose_direct<16>>(
                                        "transpose_direct_16", {.workgroup = {16, 16, 1}}),
                                    "transpose_direct_16");
                 },
                 launch(16)}};
  return p;
}

Problem sum_problem() {
  const int n = 1 << 24, groups = 256;
  Problem p = problem("sum", "2^24", "GB/s", 4.0 * n);
  p.inputs = {random_floats(n, 7), std::vector<float>(groups), std::vector<float>(1)};
  auto in = std::make_shared<std::vector<float>>(p.inputs[0]);
  double want = 0, magnitude = 0;
  for (float x : *in) {
    want += x;
    magnitude += std::abs(x);
  }
  p.check = [=](const std::vector<float> &got) {
    return first_mismatch(
        got, 1, [=](size_t) { return want; }, [=](size_t) { return 1e-6 * magnitude; });
  };
  // 64 contiguous chunks in parallel, each summed into 4 native vectors of partials (independent
  // add chains), then the 64 x 4 vectors added up.
  p.halide = [=](std::vector<std::vector<float>> &buffers, double &jit_ms) {
    const int v = halide_target().natural_vector_size<float>();
    const int chunks = 64, lanes = 4 * v, per_chunk = n / chunks;
    auto inp = std::make_shared<hl::ImageParam>(hl::Float(32), 1, "in");
    hl::Var l("l"), c("c"), lo("lo"), li("li");
    hl::RDom k(0, per_chunk / lanes, "k"), all(0, lanes, 0, chunks, "all");
    hl::Func part("part");
    auto f = std::make_shared<hl::Func>("sum");
    part(l, c) = 0.0f;
    part(l, c) += (*inp)(c * per_chunk + k * lanes + l);
    (*f)() = hl::sum(part(all.x, all.y));
    part.compute_root().vectorize(l, v);
    part.update().parallel(c).split(l, lo, li, v).vectorize(li).unroll(lo);
    inp->dim(0).set_bounds(0, n);
    jit_ms = compile_halide(*f);
    auto ib = std::make_shared<hl::Buffer<float>>(buffers[0].data(), n);
    auto ob =
        std::make_shared<hl::Buffer<float>>(hl::Buffer<float>::make_scalar(buffers[2].data()));
    inp->set(*ib);
    return std::function<void()>([=] { f->realize(*ob); });
  };
  // Two launches: `groups` partials, then one workgroup adds them up.
  auto launch = [=](runtime::Runtime &rt, const runtime::KernelHandle &k,
                    std::vector<runtime::Buffer> &b) {
    rt.launch(k, {uint32_t(groups), 1, 1}, b[0], uint32_t(n), 1u, b[1], uint32_t(groups), 1u);
    rt.launch(k, {1, 1, 1}, b[1], uint32_t(groups), 1u, b[2], 1u, 1u);
  };
  p.variants = {{"reduce_sum (example)", registered("reduce_sum"), launch},
                {"sum_chunks<64> (flat)",
                 [] {
                   return optimized(dsl::trace<kernels::sum_chunks<64>>("sum_chunks_64",
                                                                        {.workgroup = {64, 1, 1}}),
                                    "sum_chunks_64");
                 },
                 launch}};
  return p;
}

Problem sgemm_problem(int size) {
  const int m = size, n = size, kk = size;
  Problem p = problem("sgemm", fmt::format("{}^3", size), "GFLOP/s", 2.0 * m * n * kk);
  p.inputs = {random_floats(size_t(m) * kk, 11), random_floats(size_t(kk) * n, 12),
              std::vector<float>(size_t(m) * n)};
  auto a = std::make_shared<std::vector<float>>(p.inputs[0]);
  auto b = std::make_shared<std::vector<float>>(p.inputs[1]);
  // Every 7th row of C against a double-precision product (tolerance: a few f32 roundings of the
  // sum of |a| |b|).
  p.check = [=](const std::vector<float> &got) {
    for (int i = 0; i < m; i += 7) {
      std::vector<double> row(n, 0.0), magnitude(n, 0.0);
      for (int q = 0; q < kk; ++q) {
        double aq = (*a)[size_t(i) * kk + q];
        const float *bq = b->data() + size_t(q) * n;
        for (int j = 0; j < n; ++j) {
          row[j] += aq * bq[j];
          magnitude[j] += std::abs(aq * bq[j]);
        }
      }
      for (int j = 0; j < n; ++j) {
        double g = got[size_t(i) * n + j];
        if (!(std::abs(g - row[j]) <= 1e-5 * magnitude[j] + 1e-6))
          return fmt::format("C({}, {}): got {}, want {}", i, j, g, row[j]);
      }
    }
    return std::string();
  };
  // The register-blocked schedule of Halide's test/performance/matrix_multiplication.cpp, sized
  // for the native width: a 3 x 8 block of vectors of C accumulates in registers over the whole
  // of K, within 3v x 64 tiles of C that run in parallel, each over its own packed copy of the
  // 3v columns of B it reads (a contiguous panel: no cache-set conflicts from B's row stride).
  p.halide = [=](std::vector<std::vector<float>> &buffers, double &jit_ms) {
    const int v = halide_target().natural_vector_size<float>();
    auto ap = std::make_shared<hl::ImageParam>(hl::Float(32), 2, "A");
    auto bp = std::make_shared<hl::ImageParam>(hl::Float(32), 2, "B");
    hl::Var x("x"), y("y"), xi("xi"), yi("yi"), yii("yii"), t("t");
    hl::RDom k(0, kk, "k");
    hl::Func packed("packed"), prod("prod");
    auto f = std::make_shared<hl::Func>("sgemm");
    packed(x, y) = (*bp)(x, y);
    prod(x, y) += (*ap)(k, y) * packed(x, k);
    (*f)(x, y) = prod(x, y);
    f->tile(x, y, xi, yi, 3 * v, 64)
        .fuse(x, y, t)
        .parallel(t)
        .split(yi, yi, yii, 8)
        .vectorize(xi, v)
        .unroll(xi)
        .unroll(yii);
    packed.compute_at(*f, t).vectorize(x, v);
    prod.compute_at(*f, yi).vectorize(x, v).unroll(y);
    prod.update().reorder(x, y, k).vectorize(x, v).unroll(x).unroll(y).unroll(k, 2);
    ap->dim(0).set_bounds(0, kk).dim(1).set_bounds(0, m).set_stride(kk);
    bp->dim(0).set_bounds(0, n).dim(1).set_bounds(0, kk).set_stride(n);
    f->output_buffer().dim(0).set_bounds(0, n).dim(1).set_bounds(0, m).set_stride(n);
    jit_ms = compile_halide(*f);
    auto ab = std::make_shared<hl::Buffer<float>>(buffers[0].data(), kk, m);
    auto bb = std::make_shared<hl::Buffer<float>>(buffers[1].data(), n, kk);
    auto cb = std::make_shared<hl::Buffer<float>>(buffers[2].data(), n, m);
    ap->set(*ab);
    bp->set(*bb);
    return std::function<void()>([=] { f->realize(*cb); });
  };
  auto launch = [=](uint32_t tile_cols, uint32_t tile_rows) {
    return [=](runtime::Runtime &rt, const runtime::KernelHandle &k,
               std::vector<runtime::Buffer> &buf) {
      const uint32_t um = m, un = n, uk = kk;
      rt.launch(k, {un / tile_cols, um / tile_rows, 1}, buf[0], um, uk, uk, 1u, buf[1], uk, un, un,
                1u, buf[2], um, un, un, 1u);
    };
  };
  p.variants = {
      {"matmul_16x16x16 (example)", registered("matmul_16x16x16"), launch(16, 16), size <= 512},
      {"sgemm_rows<8, 64> (flat)",
       [] {
         return optimized(
             dsl::trace<kernels::sgemm_rows<8, 64>>("sgemm_rows_8x64", {.workgroup = {64, 1, 1}}),
             "sgemm_rows_8x64");
       },
       launch(64, 8)}};
  return p;
}

//===- Running
//---------------------------------------------------------------------------------===//

struct Options {
  std::string device = "cpu";
  bool vulkan = true;
  int reps = 5;
  double budget_ms = 1500;
  std::string only;
  std::string dump; ///< a folder for each cubecc kernel's IR (and LLVM IR and assembly)
};

/// Writes the variant's kernel after -O2 as IR text to `dir`/<name>.cir and, when the LLVM
/// backend is built, what it makes of it for the host's level: <name>.ll and <name>.s.
void dump_kernel(const std::string &dir, const CubeccVariant &variant) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  std::unique_ptr<ir::Module> module = variant.trace();
  std::vector<ir::Diagnostic> errors = passes::optimize(*module, 2);
  if (!errors.empty())
    die(variant.label + ": " + ir::to_string(errors));
  const ir::Kernel &kernel = *module->kernels()[0];
  auto write = [&](const std::string &extension, const std::string &text) {
    std::string path = (fs::path(dir) / (kernel.name() + extension)).string();
    FILE *file = std::fopen(path.c_str(), "w");
    if (!file || std::fwrite(text.data(), 1, text.size(), file) != text.size())
      die("cannot write " + path);
    std::fclose(file);
  };
  write(".cir", ir::to_string(*module));
#if CUBECC_BENCH_HAVE_CPU_BACKEND
  for (auto [kind, extension] :
       {std::pair{codegen::CpuText::LlvmIr, ".ll"}, std::pair{codegen::CpuText::Assembly, ".s"}}) {
    std::optional<std::string> text =
        codegen::emit_cpu_text(kernel, {.level = "native"}, kind, errors);
    if (!text)
      die(variant.label + ": " + ir::to_string(errors));
    write(extension, *text);
  }
#endif
}

/// One implementation, checked and ready to run again (or `note` says why not).
struct Prepared {
  std::function<void()> run;
  std::string note;
  double jit_ms = NAN; ///< Halide: compile_jit
};

Prepared prepare_halide(const Problem &p) {
  Prepared prepared;
  auto buffers = std::make_shared<std::vector<std::vector<float>>>(p.inputs);
  std::function<void()> run = p.halide(*buffers, prepared.jit_ms);
  run();
  std::string wrong = p.check(buffers->back());
  if (!wrong.empty()) {
    std::fprintf(stderr, "cpu_vs_halide: %s: Halide's result is wrong: %s\n", p.name.c_str(),
                 wrong.c_str());
    prepared.note = "WRONG";
    return prepared;
  }
  prepared.run = [buffers, run] { run(); };
  return prepared;
}

/// Loads the variant on `rt`, uploads the inputs, runs it once and checks the result.
Prepared prepare_cubecc(runtime::Runtime &rt, const Problem &p, const CubeccVariant &variant) {
  Prepared prepared;
  try {
    std::unique_ptr<ir::Module> module = variant.trace();
    runtime::KernelHandle kernel = rt.load(*module->kernels()[0]);
    auto buffers = std::make_shared<std::vector<runtime::Buffer>>();
    for (const auto &input : p.inputs)
      buffers->push_back(rt.upload(input));
    auto launch = variant.launch;
    runtime::Runtime *runtime = &rt;
    auto run = [=] {
      launch(*runtime, kernel, *buffers);
      runtime->synchronize();
    };
    run();
    std::string wrong = p.check(rt.download<float>(buffers->back()));
    if (!wrong.empty()) {
      prepared.note = "WRONG";
      std::fprintf(stderr, "cpu_vs_halide: %s %s on %s: wrong result: %s\n", p.name.c_str(),
                   variant.label.c_str(), rt.info().name.c_str(), wrong.c_str());
      return prepared;
    }
    prepared.run = run;
  } catch (const std::exception &e) {
    prepared.note = "error";
    std::fprintf(stderr, "cpu_vs_halide: %s %s: %s\n", p.name.c_str(), variant.label.c_str(),
                 e.what());
  }
  return prepared;
}

/// Runs the given implementations in turn, round after round (so that a change in the machine's
/// load hits them alike), until `max_reps` rounds or until `budget_ms` is spent (at least one
/// round); returns each one's median ms (NaN for those without a run).
std::vector<double> time_alternating(const std::vector<const Prepared *> &runs, int max_reps,
                                     double budget_ms, int &rounds) {
  std::vector<std::vector<double>> times(runs.size());
  double spent = 0;
  for (rounds = 0; rounds < max_reps && (rounds == 0 || spent < budget_ms); ++rounds)
    for (size_t i = 0; i < runs.size(); ++i)
      if (runs[i]->run) {
        auto start = Clock::now();
        runs[i]->run();
        times[i].push_back(ms_since(start));
        spent += times[i].back();
      }
  std::vector<double> medians;
  for (const auto &t : times)
    medians.push_back(t.empty() ? NAN : bench::median(t));
  return medians;
}

std::optional<runtime::Runtime> open_runtime(const std::string &name, std::string &why) {
  try {
    return runtime::Runtime::open(name);
  } catch (const std::exception &e) {
    why = e.what();
    return std::nullopt;
  }
}

std::string rate_text(double rate, const std::string &note, int width) {
  if (std::isnan(rate))
    return fmt::format("{:>{}}", note.empty() ? "-" : note, width);
  return fmt::format("{:>{}.{}f}", rate, width, rate < 10 ? 2 : 1);
}

std::string ratio_text(double r, int width) {
  return std::isnan(r) ? fmt::format("{:>{}}", "-", width) : fmt::format("{:>{}.2f}", r, width);
}

} // namespace

int main(int argc, char **argv) try {
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc)
      options.device = argv[++i];
    else if (a == "--no-vulkan")
      options.vulkan = false;
    else if (a == "--reps" && i + 1 < argc)
      options.reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--budget-ms" && i + 1 < argc)
      options.budget_ms = std::max(1.0, std::atof(argv[++i]));
    else if (a == "--only" && i + 1 < argc)
      options.only = argv[++i];
    else if (a == "--dump" && i + 1 < argc)
      options.dump = argv[++i];
    else
      die("usage: cpu_vs_halide [--device NAME] [--no-vulkan] [--reps N] [--budget-ms MS] "
          "[--only PROBLEM] [--dump DIR]");
  }
  auto total_start = Clock::now();
  // The cpu device keeps compiled objects in the per-user cache; this run compiles into a folder
  // of its own, so it measures the backend of this build, never an object an older one left.
  namespace fs = std::filesystem;
  const fs::path cache = fs::temp_directory_path() / fmt::format("cpu_vs_halide.{}", getpid());
  setenv("CUBECC_CACHE_DIR", cache.c_str(), 1);

  std::string why_primary, why_vulkan;
  std::optional<runtime::Runtime> primary = open_runtime(options.device, why_primary);
  std::optional<runtime::Runtime> vulkan;
  if (options.vulkan && options.device != "vulkan")
    vulkan = open_runtime("vulkan", why_vulkan);
  else
    why_vulkan = options.vulkan ? "--device is vulkan" : "--no-vulkan";

  // The load average says how much else the machine was running (these machines are shared).
  double load[1] = {NAN};
  getloadavg(load, 1);
  std::printf("Halide 14, target %s (%d f32 lanes); %u hardware threads, L3 %ld MiB, load "
              "average %.1f\n",
              halide_target().to_string().c_str(), halide_target().natural_vector_size<float>(),
              std::thread::hardware_concurrency(), sysconf(_SC_LEVEL3_CACHE_SIZE) >> 20, load[0]);
  if (primary)
    std::printf("cubecc %s: %s\n", options.device.c_str(), primary->info().name.c_str());
  else
    std::printf("NOTE: cubecc device '%s' did not open (%s): its columns are empty\n",
                options.device.c_str(), why_primary.c_str());
  if (vulkan)
    std::printf("cubecc vulkan: %s\n", vulkan->info().name.c_str());
  else
    std::printf("cubecc vulkan: not measured (%s)\n", why_vulkan.c_str());

  Stream stream;
  StreamResult bandwidth = stream.measure(std::max(3, options.reps));
  std::printf("stream (%d threads, 2^25 floats): copy %.1f GB/s, triad %.1f GB/s, in-place update "
              "%.1f GB/s\n",
              bandwidth.threads, bandwidth.copy_gbs, bandwidth.triad_gbs, bandwidth.update_gbs);
  std::printf("Halide and cubecc %s run alternately, up to %d rounds (fewer past %.0f ms per row), "
              "medians; vulkan timed after them; every result checked against the host first\n\n",
              options.device.c_str(), options.reps, options.budget_ms);

  std::vector<std::string> json;
  json.push_back(fmt::format(
      R"({{"bench": "cpu_vs_halide_stream", "threads": {}, "floats": 33554432, "copy_gbs": {}, "triad_gbs": {}, "update_gbs": {}}})",
      bandwidth.threads, json_number(bandwidth.copy_gbs), json_number(bandwidth.triad_gbs),
      json_number(bandwidth.update_gbs)));

  const std::string cpu_column = "cubecc " + options.device;
  std::printf("%-10s %-12s %-28s %-8s %9s %12s %8s %14s %8s\n", "problem", "size", "cubecc kernel",
              "unit", "Halide", cpu_column.c_str(), "/Halide", "cubecc vulkan", "/vulkan");

  std::vector<std::function<Problem()>> problems = {axpy_problem,
                                                    softmax_problem,
                                                    transpose_problem,
                                                    sum_problem,
                                                    [] { return sgemm_problem(512); },
                                                    [] { return sgemm_problem(1024); }};
  for (const auto &make : problems) {
    Problem p = make();
    if (!options.only.empty() && p.name != options.only)
      continue;
    Prepared halide = prepare_halide(p);
    // axpy also alternates with the stream's in-place update (the same accesses), for its share.
    Prepared update;
    if (p.name == "axpy")
      update.run = [&stream] { stream.update(); };
    for (const CubeccVariant &variant : p.variants) {
      if (!options.dump.empty())
        dump_kernel(options.dump, variant);
      Prepared cpu, vk;
      if (primary)
        cpu = prepare_cubecc(*primary, p, variant);
      else
        cpu.note = "n/a";
      int rounds = 0;
      std::vector<double> ms =
          time_alternating({&halide, &cpu, &update}, options.reps, options.budget_ms, rounds);
      cpu.run = nullptr; // its buffers go back to the pool
      if (primary)
        primary->trim();

      int vk_reps = 0;
      double vk_ms = NAN;
      if (vulkan && variant.on_vulkan) {
        vk = prepare_cubecc(*vulkan, p, variant);
        vk_ms = time_alternating({&vk}, options.reps, options.budget_ms, vk_reps)[0];
        if (!vk.run)
          vk_reps = 0;
        vk.run = nullptr;
        vulkan->trim();
      } else {
        vk.note = vulkan ? "skipped" : "n/a";
      }
      double halide_rate = p.work / ms[0] / 1e6, cpu_rate = p.work / ms[1] / 1e6,
             vk_rate = p.work / vk_ms / 1e6;
      double over_halide = cpu_rate / halide_rate, over_vulkan = cpu_rate / vk_rate;
      std::printf("%-10s %-12s %-28s %-8s %9s %12s %8s %14s %8s\n", p.name.c_str(), p.size.c_str(),
                  variant.label.c_str(), p.unit.c_str(),
                  rate_text(halide_rate, halide.note, 9).c_str(),
                  rate_text(cpu_rate, cpu.note, 12).c_str(), ratio_text(over_halide, 8).c_str(),
                  rate_text(vk_rate, vk.note, 14).c_str(), ratio_text(over_vulkan, 8).c_str());
      std::string extra;
      if (update.run) {
        double update_rate = 12.0 * Stream::kFloats / ms[2] / 1e6;
        std::string cpu_share =
            std::isnan(cpu_rate) ? "-" : fmt::format("{:.0f}%", 100 * cpu_rate / update_rate);
        std::printf("%-10s %-12s %-28s %-8s %8.0f%% %12s\n", "", "",
                    fmt::format("  % of stream {:.1f} GB/s", update_rate).c_str(), "",
                    100 * halide_rate / update_rate, cpu_share.c_str());
        extra = fmt::format(
            R"(, "stream_update_gbs": {}, "halide_pct_of_stream": {}, "cpu_pct_of_stream": {})",
            json_number(update_rate), json_number(100 * halide_rate / update_rate),
            json_number(100 * cpu_rate / update_rate));
      }
      json.push_back(fmt::format(
          R"({{"bench": "cpu_vs_halide", "problem": "{}", "size": "{}", "kernel": "{}", "unit": "{}", "halide": {}, "cubecc_cpu": {}, "cpu_over_halide": {}, "cubecc_vulkan": {}, "cpu_over_vulkan": {}, "halide_ms": {}, "cpu_ms": {}, "vulkan_ms": {}, "rounds": {}, "vulkan_reps": {}, "halide_jit_ms": {}, "device": "{}"{}}})",
          p.name, p.size, variant.label, p.unit, json_number(halide_rate), json_number(cpu_rate),
          json_number(over_halide), json_number(vk_rate), json_number(over_vulkan),
          json_number(ms[0]), json_number(ms[1]), json_number(vk_ms), rounds, vk_reps,
          json_number(halide.jit_ms), options.device, extra));
      std::fflush(stdout);
    }
  }
  std::printf("\n(/Halide: cubecc %s throughput / Halide's, above 1 cubecc is faster; /vulkan: "
              "cubecc %s / cubecc vulkan.) Total %.0f s\n\n",
              options.device.c_str(), options.device.c_str(), ms_since(total_start) / 1000);
  for (const std::string &line : json)
    std::printf("%s\n", line.c_str());
  fs::remove_all(cache);
  return 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "cpu_vs_halide: %s\n", e.what());
  return 1;
}
