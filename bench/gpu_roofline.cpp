//===- gpu_roofline.cpp - Bandwidth kernels and tensor-core GEMMs against the device's ceilings
//===//
//
// On a CUDA device (default `cuda`, the first GPU), in one run:
//   1. the device-to-device copy bandwidth (cuMemcpyDtoD, 2 x 512 MiB), the bandwidth ceiling;
//   2. each bandwidth kernel's rate as a fraction of it: a 128-bit copy kernel, axpy_w4 (the
//      examples' vectorized axpy), reduce_sum and softmax and their 128-bit twins reduce_sum_w4
//      and softmax_w4 (examples library), on 2^27 floats;
//   3. each GEMM shape, square 256 ... 8192 and the skinny shapes of LLM inference (M = 1 ... 64,
//      N, K = 4096 ... 16384), f16, bf16 and e4m3 (fp8, sm_89+; cuBLAS's reference is its bf16
//      GEMM on the same values) in, f32 out: every variant of the gemm tunable
//      (examples/tensor_cores) timed, the fastest kept (what `cubecc tune` records), against
//      cuBLAS's cublasGemmEx with f32 compute (dlopen'd from the CUDA toolkit), in TFLOP/s and
//      as a ratio. Every GEMM result is compared with cuBLAS's: the inputs are multiples of 1/8
//      in [-1, 1], so every partial sum is exact in f32 and both must agree exactly (the stated
//      bound is 0; a difference is reported as a failure with the worst element).
// Device times are the runtime's per-launch event times (medians of --reps); cuBLAS and the copy
// are timed with CUDA events on the legacy stream. Prints a table, and writes JSON (--json FILE)
// that scripts/roofline-svg.py draws as the roofline chart.
//
// Without a CUDA device (or driver) it prints why and writes {"skipped": ...}, exit status 0:
// the benchmark is ready to run as one command on a GPU machine (scripts/gpu-check.sh runs it).
//
//   gpu_roofline [--device cuda] [--json FILE] [--reps N] [--quick]
//
// --quick: square 256 ... 2048 and M in {1, 16, 64} at N = K = 4096, 2^25 floats (for a check
// under a minute). --smoke: tiny sizes on any device that runs matrix ops (interp), so that the
// benchmark's own code is tested without a GPU (ctest gpu_roofline_smoke_on_the_interpreter).
// Exit status 1 when a result is wrong.
//
//===-----------------------------------------------------------------------------------------===//
#include "bench_support.h"
#include "cubecc/dsl/registry.h"
#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/parser.h"
#include "cubecc/runtime/runtime.h"
#include "gemm.h"

#include <fmt/format.h>

#include <dlfcn.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace cubecc;
using namespace cubecc::runtime;

namespace {

// --- the CUDA driver and cuBLAS, loaded at run time (the build needs no GPU) --------------------

/// The few driver and cuBLAS entry points used here, with C types (handles as void *).
struct Cuda {
  int (*cuInit)(unsigned) = nullptr;
  int (*cuDeviceGet)(int *, int) = nullptr;
  int (*cuDevicePrimaryCtxRetain)(void **, int) = nullptr;
  int (*cuCtxSetCurrent)(void *) = nullptr;
  int (*cuCtxSynchronize)() = nullptr;
  int (*cuEventCreate)(void **, unsigned) = nullptr;
  int (*cuEventRecord)(void *, void *) = nullptr;
  int (*cuEventSynchronize)(void *) = nullptr;
  int (*cuEventElapsedTime)(float *, void *, void *) = nullptr;
  int (*cuMemcpyDtoD)(uint64_t, uint64_t, size_t) = nullptr;
  int (*cublasCreate)(void **) = nullptr;
  int (*cublasDestroy)(void *) = nullptr;
  int (*cublasGemmEx)(void *, int, int, int, int, int, const void *, const void *, int, int,
                      const void *, int, int, const void *, void *, int, int, int, int) = nullptr;
  void *blas = nullptr; ///< the cuBLAS handle
  std::string driver_problem, blas_problem;

  bool driver() const { return driver_problem.empty(); }
  bool blas_ready() const { return driver() && blas_problem.empty(); }
};

template <class F> bool find(void *library, const char *name, F &f) {
  f = reinterpret_cast<F>(dlsym(library, name));
  return f != nullptr;
}

Cuda load_cuda() {
  Cuda c;
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    c.driver_problem = "cannot load libcuda.so.1 (no NVIDIA driver)";
    return c;
  }
  if (!find(driver, "cuInit", c.cuInit) || !find(driver, "cuDeviceGet", c.cuDeviceGet) ||
      !find(driver, "cuDevicePrimaryCtxRetain", c.cuDevicePrimaryCtxRetain) ||
      !find(driver, "cuCtxSetCurrent", c.cuCtxSetCurrent) ||
      !find(driver, "cuCtxSynchronize", c.cuCtxSynchronize) ||
      !find(driver, "cuEventCreate", c.cuEventCreate) ||
      !find(driver, "cuEventRecord", c.cuEventRecord) ||
      !find(driver, "cuEventSynchronize", c.cuEventSynchronize) ||
      !find(driver, "cuEventElapsedTime_v2", c.cuEventElapsedTime) ||
      !find(driver, "cuMemcpyDtoD_v2", c.cuMemcpyDtoD)) {
    c.driver_problem = "the driver lacks an entry point this benchmark uses";
    return c;
  }
  int device = 0;
  void *context = nullptr;
  // The runtime's CUDA device works in device 0's primary context; so do cuBLAS and these calls.
  if (c.cuInit(0) != 0 || c.cuDeviceGet(&device, 0) != 0 ||
      c.cuDevicePrimaryCtxRetain(&context, device) != 0 || c.cuCtxSetCurrent(context) != 0) {
    c.driver_problem = "cuInit or the primary context failed (no usable GPU)";
    return c;
  }
  void *blas = nullptr;
  for (const char *name : {"libcublas.so.13", "libcublas.so"})
    if ((blas = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
      break;
  if (!blas) {
    c.blas_problem = fmt::format("cannot load libcublas.so.13: {} (put the CUDA toolkit's lib64 "
                                 "on LD_LIBRARY_PATH)",
                                 dlerror());
    return c;
  }
  if (!find(blas, "cublasCreate_v2", c.cublasCreate) ||
      !find(blas, "cublasDestroy_v2", c.cublasDestroy) ||
      !find(blas, "cublasGemmEx", c.cublasGemmEx) || c.cublasCreate(&c.blas) != 0)
    c.blas_problem = "cuBLAS loaded but cublasCreate failed";
  return c;
}

/// Milliseconds of `body` on the legacy stream, by CUDA events.
template <class F> double event_ms(const Cuda &c, F &&body) {
  void *start = nullptr, *stop = nullptr;
  c.cuEventCreate(&start, 0);
  c.cuEventCreate(&stop, 0);
  c.cuEventRecord(start, nullptr);
  body();
  c.cuEventRecord(stop, nullptr);
  c.cuEventSynchronize(stop);
  float ms = NAN;
  c.cuEventElapsedTime(&ms, start, stop);
  return ms;
}

// --- kernels -----------------------------------------------------------------------------------

/// A 128-bit copy: each invocation moves four floats (n a multiple of 4).
constexpr const char *kCopy = R"(
module @roofline {
  kernel @copy_v4(%src: buffer<f32, read>, %dst: buffer<f32, readwrite>) workgroup(256, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %four = const 4 : u32
    %base = mul %i, %four : u32
    %n = buffer.size %dst : u32
    %in_range = lt %base, %n : bool
    if %in_range {
      %v = load %src, %base : f32x4
      store %dst, %base, %v
      yield
    }
    return
  }
}
)";

struct Row {
  Row(std::string kind, std::string name, std::string shape, std::string variant)
      : kind(std::move(kind)), name(std::move(name)), shape(std::move(shape)),
        variant(std::move(variant)) {}
  std::string kind, name, shape, variant;
  double ms = NAN, rate = NAN, reference = NAN, ratio = NAN; ///< rate: GB/s or TFLOP/s
  double bytes = NAN, flops = NAN;
  bool correct = true;
  std::string note;
};

double median_launch_ms(Runtime &rt, int reps, const std::function<void()> &launch) {
  launch(); // warm-up (the first launch of a kernel also loads its module)
  rt.synchronize();
  for (int r = 0; r < reps; ++r)
    launch();
  rt.synchronize();
  std::vector<double> ns = rt.last_launch_times_ns();
  std::vector<double> ms;
  for (double t : ns)
    ms.push_back(t / 1e6);
  return bench::median(ms);
}

uint16_t f16_bits(ir::Scalar s, float v) {
  if (s == ir::Scalar::F16)
    return std::bit_cast<uint16_t>(static_cast<_Float16>(v));
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16); // k/8 in [-1, 1]: exact
}

/// Six significant digits (the interpreter's rates are tiny), null for NaN.
std::string number(double v) {
  return std::isnan(v) ? "null" : fmt::format("{:.6g}", v);
}

struct Options {
  std::string device = "cuda", json;
  int reps = 10;
  bool quick = false;
  bool smoke = false;
};

} // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc)
      o.device = argv[++i];
    else if (a == "--json" && i + 1 < argc)
      o.json = argv[++i];
    else if (a == "--reps" && i + 1 < argc)
      o.reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--quick")
      o.quick = true;
    else if (a == "--smoke")
      o.smoke = true;
    else {
      std::fprintf(stderr, "usage: gpu_roofline [--device cuda] [--json FILE] [--reps N] "
                           "[--quick | --smoke]\n");
      return 2;
    }
  }
  auto write_json = [&](const std::string &text) {
    if (o.json.empty())
      return;
    std::ofstream(o.json) << text << "\n";
  };

  std::optional<Runtime> opened;
  try {
    opened.emplace(Runtime::open(o.device));
  } catch (const Error &e) {
    std::printf("gpu_roofline: skipped: device '%s' cannot open: %s\n", o.device.c_str(), e.what());
    write_json(fmt::format(R"({{"bench": "gpu_roofline", "skipped": "{}"}})", "no " + o.device));
    return 0;
  }
  Runtime &rt = *opened;
  if (rt.info().backend != "cuda" && !o.smoke) {
    std::printf("gpu_roofline: skipped: '%s' is not a CUDA device\n", o.device.c_str());
    write_json(R"({"bench": "gpu_roofline", "skipped": "not a CUDA device"})");
    return 0;
  }
  Cuda cuda = rt.info().backend == "cuda" ? load_cuda() : Cuda{};
  if (rt.info().backend != "cuda")
    cuda.driver_problem = "not a CUDA device";
  std::printf("gpu_roofline on %s\n", rt.info().name.c_str());
  if (!cuda.driver())
    std::printf("  no driver calls: %s\n", cuda.driver_problem.c_str());
  else if (!cuda.blas_ready())
    std::printf("  no cuBLAS reference: %s\n", cuda.blas_problem.c_str());

  std::vector<Row> rows;
  bool all_correct = true;

  // 1. The copy ceiling and the bandwidth kernels.
  const size_t n = o.smoke ? size_t{1} << 12 : o.quick ? size_t{1} << 25 : size_t{1} << 27;
  Buffer x = rt.allocate<float>(n), y = rt.allocate<float>(n);
  std::vector<float> host_x(n);
  for (size_t i = 0; i < n; ++i)
    host_x[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  rt.upload(x, std::span<const float>(host_x));
  rt.upload(y, std::span<const float>(std::vector<float>(n, 0.0f)));
  rt.synchronize();
  double copy_gbs = NAN;
  if (cuda.driver()) {
    uint64_t src = rt.native_memory(x).handle, dst = rt.native_memory(y).handle;
    std::vector<double> ms;
    cuda.cuMemcpyDtoD(dst, src, n * 4); // warm-up
    cuda.cuCtxSynchronize();
    for (int r = 0; r < o.reps; ++r)
      ms.push_back(event_ms(cuda, [&] { cuda.cuMemcpyDtoD(dst, src, n * 4); }));
    Row row{"bandwidth", "cuMemcpyDtoD", fmt::format("{} floats", n), "driver"};
    row.ms = bench::median(ms);
    row.bytes = 2.0 * n * 4;
    row.rate = row.bytes / row.ms / 1e6;
    copy_gbs = row.rate;
    row.reference = copy_gbs;
    row.ratio = 1.0;
    rows.push_back(row);
  }
  auto bandwidth = [&](const std::string &name, double bytes, const std::function<void()> &run) {
    Row row{"bandwidth", name, fmt::format("{} floats", n), ""};
    row.ms = median_launch_ms(rt, o.reps, run);
    row.bytes = bytes;
    row.rate = bytes / row.ms / 1e6;
    row.reference = copy_gbs;
    row.ratio = row.rate / copy_gbs;
    rows.push_back(row);
  };
  ir::ParseResult copy_module = ir::parse_module(kCopy, "gpu_roofline.cir");
  KernelHandle copy = rt.load(*copy_module.module->kernels().front());
  const uint32_t groups4 = static_cast<uint32_t>((n / 4 + 255) / 256);
  bandwidth("copy_v4", 2.0 * n * 4, [&] { rt.launch(copy, {groups4, 1, 1}, x, y); });
  if (rt.download<float>(y) != host_x) {
    rows.back().correct = all_correct = false;
    rows.back().note = "the copy differs from its source";
  }

  auto examples_kernel = [&](const std::string &name) -> KernelHandle {
    return rt.kernel(name, [&]() -> std::unique_ptr<ir::Module> {
      auto module = std::make_unique<ir::Module>("examples");
      std::vector<ir::Diagnostic> errors;
      for (const dsl::RegisteredKernel &k : dsl::registered_kernels())
        if (k.name == name)
          k.trace(*module, k, errors);
      return module;
    });
  };
  // axpy_w4, reduce_sum(_w4) and softmax(_w4) come from the examples library (linked in); the
  // scalar-load reduce and softmax beside their 128-bit twins show what the width buys.
  KernelHandle axpy = examples_kernel("axpy_w4");
  const uint32_t n32 = static_cast<uint32_t>(n);
  bandwidth("axpy_w4", 3.0 * n * 4, [&] {
    rt.launch(axpy, {groups4, 1, 1}, x, n32, 1u, y, n32, 1u, 0.5f);
  });
  const uint32_t reduce_groups = o.smoke ? 4 : 1024;
  Buffer partials = rt.allocate<float>(reduce_groups);
  for (const char *name : {"reduce_sum", "reduce_sum_w4"}) {
    KernelHandle reduce = examples_kernel(name);
    bandwidth(name, 1.0 * n * 4, [&] {
      rt.launch(reduce, {reduce_groups, 1, 1}, x, n32, 1u, partials, reduce_groups, 1u);
    });
  }
  const uint32_t cols = 4096, softmax_rows = n32 / cols;
  for (const char *name : {"softmax", "softmax_w4"}) {
    KernelHandle softmax = examples_kernel(name);
    bandwidth(name, 2.0 * n * 4, [&] {
      rt.launch(softmax, {softmax_rows, 1, 1}, x, softmax_rows, cols, cols, 1u, y, softmax_rows,
                cols, cols, 1u);
    });
  }
  x = Buffer();
  y = Buffer();

  // 2. GEMMs.
  std::vector<std::array<uint64_t, 3>> shapes; // m, n, k
  for (uint64_t s : {256, 512, 1024, 2048, 4096, 8192})
    if (!o.smoke && (!o.quick || s <= 2048))
      shapes.push_back({s, s, s});
  if (o.smoke)
    shapes = {{64, 64, 64}, {1, 128, 64}}; // every variant runs: keep them small (ASan in CI)
  for (uint64_t m : {1, 16, 32, 64}) {
    if (o.smoke)
      break;
    if (o.quick && m == 32)
      continue;
    shapes.push_back({m, 4096, 4096});
    if (!o.quick) {
      shapes.push_back({m, 16384, 4096});
      shapes.push_back({m, 4096, 16384});
    }
  }
  // e4m3 runs its own variants (the gemm_e4m3 tunable); cuBLAS's reference for it is its bf16
  // GEMM on the same values (every e4m3 input below is exactly a bf16), so the results must
  // still agree exactly and the ratio says what fp8 buys over cuBLAS in bf16.
  std::map<std::string, KernelHandle> gemm_handles;
  for (ir::Scalar type : {ir::Scalar::BF16, ir::Scalar::F16, ir::Scalar::E4M3}) {
    const std::string tname(ir::scalar_name(type));
    const bool fp8 = type == ir::Scalar::E4M3;
    const std::vector<examples::GemmVariantInfo> &variants =
        fp8 ? examples::gemm_fp8_variants() : examples::gemm_variants();
    const size_t tunable_variants = fp8 ? std::tuple_size_v<examples::GemmFp8Variants>
                                        : std::tuple_size_v<examples::GemmVariants>;
    const ir::Scalar blas_type = fp8 ? ir::Scalar::BF16 : type;
    for (const auto &[m, nn, k] : shapes) {
      std::mt19937 rng(static_cast<uint32_t>(m * 31 + nn * 7 + k));
      std::uniform_int_distribution<int> eighths(-8, 8);
      std::vector<double> a(m * k), b(k * nn); // multiples of 1/8 in [-1, 1]
      for (auto &v : a)
        v = eighths(rng) / 8.0;
      for (auto &v : b)
        v = eighths(rng) / 8.0;
      // The values in `t`'s bits (2 bytes, or 1 for fp8).
      auto upload = [&](ir::Scalar t, const std::vector<double> &values) {
        const size_t bytes = ir::scalar_bits(t) / 8;
        std::vector<uint8_t> raw(values.size() * bytes);
        for (size_t i = 0; i < values.size(); ++i) {
          uint64_t bits = t == ir::Scalar::E4M3 ? ir::storage_float_from_double(t, values[i])
                                                : f16_bits(t, static_cast<float>(values[i]));
          std::memcpy(raw.data() + i * bytes, &bits, bytes);
        }
        Buffer buffer = rt.allocate(t, values.size());
        rt.write(buffer, raw.data(), raw.size());
        return buffer;
      };
      Buffer ba = upload(type, a), bb = upload(type, b);
      Buffer bc = rt.allocate<float>(m * nn);
      const uint32_t m32 = static_cast<uint32_t>(m), n32g = static_cast<uint32_t>(nn),
                     k32 = static_cast<uint32_t>(k);
      Row row{"gemm", "gemm_" + tname, fmt::format("{}x{}x{}", m, nn, k), ""};
      row.flops = 2.0 * m * nn * k;
      double best = INFINITY;
      size_t best_variant = 0;
      for (size_t v = 0; v < tunable_variants; ++v) {
        examples::GemmLaunch launch = examples::gemm_launch(variants[v], m, nn, k);
        if (!launch.valid)
          continue;
        std::string name = variants[v].name(tname);
        auto it = gemm_handles.find(name);
        if (it == gemm_handles.end()) {
          try {
            it = gemm_handles.emplace(name, examples_kernel(name)).first;
          } catch (const Error &e) { // e.g. more shared memory than the device has, or no fp8
            std::printf("  %s: not run: %s\n", name.c_str(), e.what());
            gemm_handles.emplace(name, KernelHandle());
            continue;
          }
        }
        if (!it->second.valid())
          continue;
        double ms = median_launch_ms(rt, o.reps, [&] {
          rt.launch(it->second, launch.grid, ba, m32, k32, k32, 1u, bb, k32, n32g, n32g, 1u, bc,
                    m32, n32g, n32g, 1u);
        });
        if (ms < best) {
          best = ms;
          best_variant = v;
        }
      }
      if (std::isinf(best)) {
        std::printf("  %s %s: no variant runs on this device\n", row.name.c_str(),
                    row.shape.c_str());
        continue;
      }
      // The chosen variant once more, its output kept for the check.
      examples::GemmLaunch launch = examples::gemm_launch(variants[best_variant], m, nn, k);
      std::string best_name = variants[best_variant].name(tname);
      rt.launch(gemm_handles.at(best_name), launch.grid, ba, m32, k32, k32, 1u, bb, k32, n32g, n32g,
                1u, bc, m32, n32g, n32g, 1u);
      rt.synchronize();
      std::vector<float> ours = rt.download<float>(bc);
      row.variant = best_name;
      row.ms = best;
      row.rate = row.flops / best / 1e9;
      if (cuda.blas_ready()) {
        Buffer blas_a = fp8 ? upload(blas_type, a) : Buffer(),
               blas_b = fp8 ? upload(blas_type, b) : Buffer();
        Buffer ref = rt.allocate<float>(m * nn);
        rt.synchronize();
        const float alpha = 1.0f, beta = 0.0f;
        const int cuda_type = blas_type == ir::Scalar::F16 ? 2 : 14; // CUDA_R_16F, CUDA_R_16BF
        const uint64_t pa = rt.native_memory(fp8 ? blas_a : ba).handle,
                       pb = rt.native_memory(fp8 ? blas_b : bb).handle,
                       pc = rt.native_memory(ref).handle;
        // Row-major C = A B is column-major C^T = B^T A^T: (n x k) (k x m).
        auto gemm = [&] {
          cuda.cublasGemmEx(cuda.blas, 0, 0, static_cast<int>(nn), static_cast<int>(m),
                            static_cast<int>(k), &alpha, reinterpret_cast<void *>(pb), cuda_type,
                            static_cast<int>(nn), reinterpret_cast<void *>(pa), cuda_type,
                            static_cast<int>(k), &beta, reinterpret_cast<void *>(pc), 0,
                            static_cast<int>(nn), 68 /* CUBLAS_COMPUTE_32F */,
                            -1 /* CUBLAS_GEMM_DEFAULT */);
        };
        gemm();
        cuda.cuCtxSynchronize();
        std::vector<double> ms;
        for (int r = 0; r < o.reps; ++r)
          ms.push_back(event_ms(cuda, gemm));
        double blas_ms = bench::median(ms);
        row.reference = row.flops / blas_ms / 1e9;
        row.ratio = row.rate / row.reference;
        if (fp8)
          row.note = "reference: cuBLAS bf16";
        std::vector<float> expected = rt.download<float>(ref);
        double worst = 0;
        size_t worst_at = 0;
        for (size_t i = 0; i < ours.size(); ++i)
          if (double d = std::abs(static_cast<double>(ours[i]) - expected[i]); d > worst) {
            worst = d;
            worst_at = i;
          }
        if (worst > 0) {
          row.correct = false;
          row.note = fmt::format("C[{}][{}] = {} where cuBLAS has {}", worst_at / nn, worst_at % nn,
                                 ours[worst_at], expected[worst_at]);
        }
      } else {
        // Without cuBLAS: a sample of elements against the exact host sum.
        for (int s = 0; s < 64; ++s) {
          uint64_t i = rng() % m, j = rng() % nn;
          double exact = 0;
          for (uint64_t kk = 0; kk < k; ++kk)
            exact += a[i * k + kk] * b[kk * nn + j];
          if (ours[i * nn + j] != static_cast<float>(exact)) {
            row.correct = false;
            row.note = fmt::format("C[{}][{}] = {} where the exact sum is {}", i, j,
                                   ours[i * nn + j], exact);
            break;
          }
        }
      }
      all_correct = all_correct && row.correct;
      rows.push_back(row);
    }
  }

  // 3. The table and the JSON.
  std::printf("\n%-10s %-14s %-18s %-40s %10s %12s %12s %8s\n", "kind", "kernel", "shape",
              "variant", "ms", "rate", "reference", "ratio");
  for (const Row &r : rows) {
    const char *unit = r.kind == "gemm" ? "TFLOP/s" : "GB/s";
    std::printf("%-10s %-14s %-18s %-40s %10.4f %8.1f %-3s %8.1f %-3s %8.3f%s%s\n", r.kind.c_str(),
                r.name.c_str(), r.shape.c_str(), r.variant.c_str(), r.ms, r.rate, unit, r.reference,
                unit, r.ratio, r.correct ? "" : "  WRONG: ", r.note.c_str());
  }
  std::string json = fmt::format(R"({{"bench": "gpu_roofline", "device": "{}", "copy_gbs": {}, )"
                                 R"("rows": [)",
                                 rt.info().name, number(copy_gbs));
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row &r = rows[i];
    json += fmt::format(
        R"({}{{"kind": "{}", "kernel": "{}", "shape": "{}", "variant": "{}", "ms": {}, )"
        R"("bytes": {}, "flops": {}, "rate": {}, "reference": {}, "ratio": {}, "correct": {}}})",
        i ? ", " : "", r.kind, r.name, r.shape, r.variant, number(r.ms), number(r.bytes),
        number(r.flops), number(r.rate), number(r.reference), number(r.ratio),
        r.correct ? "true" : "false");
  }
  json += "]}";
  write_json(json);
  std::printf("%s\n", all_correct ? "all results correct" : "SOME RESULTS ARE WRONG");
  return all_correct ? 0 : 1;
}
