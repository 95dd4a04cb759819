//===- capi_bench.cpp - What the C API costs per launch, against the C++ API ------------------===//
//
// The same kernel (axpy of the example kernel library, 64 elements, one workgroup) launched
// 1,000 times through the C++ runtime (Runtime::launch with typed arguments) and through cubecc.h
// (cubecc_launch with tagged arguments), each on its own runtime on the same device, in
// interleaved repetitions (alternating which goes first). Two figures per path, host wall-clock
// microseconds per launch, medians: the launch calls alone (checks, argument conversion,
// recording; no waiting) and the launches followed by a synchronize. The ratio C / C++ is the C
// API's overhead. Usage:
// capi_bench <libcubecc_examples.so> [--repetitions N] [--devices vulkan,interp,cuda]
// Prints a table, then one JSON object per device.
//
//===-----------------------------------------------------------------------------------------===//
#include "bench_support.h"
#include "cubecc.h"
#include "cubecc/dsl/kernel_library_loader.h"
#include "cubecc/runtime/runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using namespace cubecc;

namespace {

constexpr int kLaunches = 1000;
constexpr uint32_t kElements = 64;

using Clock = std::chrono::steady_clock;
double us_per_launch(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kLaunches;
}

struct Times {
  std::vector<double> calls, synchronized;
};

struct Result {
  std::string device, name, skipped;
  double cpp_calls = 0, cpp_sync = 0, c_calls = 0, c_sync = 0;
  bool correct = false;
};

/// The C++ side: a kernel library's axpy on a Runtime, as an application embedding C++ runs it.
struct CppSide {
  runtime::Runtime rt;
  runtime::KernelHandle axpy;
  runtime::Buffer x, y;

  CppSide(const std::string &device, const dsl::KernelLibrary &library)
      : rt(runtime::Runtime::open(device)), axpy(load(rt, library)),
        x(rt.upload(std::vector<float>(kElements, 1.0f))),
        y(rt.upload(std::vector<float>(kElements, 0.0f))) {}

  static runtime::KernelHandle load(runtime::Runtime &rt, const dsl::KernelLibrary &library) {
    for (size_t i = 0; i < library.kernels().size(); ++i)
      if (library.kernels()[i].name == "axpy")
        return rt.kernel("capi_bench/axpy", [&]() -> std::unique_ptr<ir::Module> {
          auto module = std::make_unique<ir::Module>();
          std::vector<ir::Diagnostic> errors;
          if (!library.trace(i, *module, errors))
            throw runtime::Error(runtime::ErrorKind::Compile, ir::to_string(errors), errors);
          return module;
        });
    throw runtime::Error(runtime::ErrorKind::NotFound, "the library has no kernel 'axpy'");
  }

  void launches() {
    for (int i = 0; i < kLaunches; ++i)
      rt.launch(axpy, {1, 1, 1}, x, kElements, 1u, y, kElements, 1u, 1.0f);
  }
};

/// The C side: the same through cubecc.h.
struct CSide {
  cubecc_runtime rt = nullptr;
  cubecc_library library = nullptr;
  cubecc_kernel axpy = nullptr;
  cubecc_buffer x = nullptr, y = nullptr;
  cubecc_arg args[7] = {};

  static void check(cubecc_status status) {
    if (status != CUBECC_SUCCESS)
      throw runtime::Error(runtime::ErrorKind::Internal,
                           fmt::format("{}: {}", cubecc_status_name(status), cubecc_last_error()));
  }
  CSide(const std::string &device, const std::string &path) {
    check(cubecc_runtime_open(device.c_str(), &rt));
    check(cubecc_library_open(path.c_str(), &library));
    check(cubecc_library_kernel(rt, library, "axpy", nullptr, &axpy));
    check(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, kElements, &x));
    check(cubecc_buffer_allocate(rt, CUBECC_DTYPE_F32, kElements, &y));
    std::vector<float> ones(kElements, 1.0f), zeros(kElements, 0.0f);
    check(cubecc_buffer_write(rt, x, ones.data(), ones.size() * sizeof(float)));
    check(cubecc_buffer_write(rt, y, zeros.data(), zeros.size() * sizeof(float)));
    auto scalar_u32 = [](uint32_t v) {
      cubecc_arg a{};
      a.kind = CUBECC_ARG_SCALAR;
      a.dtype = CUBECC_DTYPE_U32;
      a.value.u = v;
      return a;
    };
    args[0].kind = CUBECC_ARG_BUFFER;
    args[0].buffer = x;
    args[1] = scalar_u32(kElements);
    args[2] = scalar_u32(1);
    args[3].kind = CUBECC_ARG_BUFFER;
    args[3].buffer = y;
    args[4] = scalar_u32(kElements);
    args[5] = scalar_u32(1);
    args[6].kind = CUBECC_ARG_SCALAR;
    args[6].dtype = CUBECC_DTYPE_F32;
    args[6].value.f = 1.0;
  }
  ~CSide() {
    cubecc_buffer_destroy(x);
    cubecc_buffer_destroy(y);
    cubecc_kernel_destroy(axpy);
    cubecc_library_destroy(library);
    cubecc_runtime_destroy(rt);
  }
  void launches() {
    const uint32_t grid[3] = {1, 1, 1};
    for (int i = 0; i < kLaunches; ++i)
      check(cubecc_launch(rt, axpy, grid, args, 7));
  }
  std::vector<float> result() {
    std::vector<float> out(kElements);
    check(cubecc_buffer_read(rt, y, out.data(), out.size() * sizeof(float)));
    return out;
  }
};

template <class Side, class Sync> void measure(Side &side, Sync sync, Times &times) {
  auto start = Clock::now();
  side.launches();
  times.calls.push_back(us_per_launch(start));
  sync();
  times.synchronized.push_back(us_per_launch(start));
}

Result run(const std::string &device, const std::string &path, int repetitions) {
  Result result;
  result.device = device;
  std::string error;
  auto library = dsl::KernelLibrary::open(path, error);
  if (!library) {
    result.skipped = error;
    return result;
  }
  std::optional<CppSide> cpp;
  std::optional<CSide> c;
  try {
    cpp.emplace(device, *library);
    c.emplace(device, path);
  } catch (const runtime::Error &e) {
    result.skipped = e.what();
    return result;
  }
  result.name = cpp->rt.info().name;
  Times cpp_times, c_times;
  auto cpp_sync = [&] { cpp->rt.synchronize(); };
  auto c_sync = [&] { CSide::check(cubecc_synchronize(c->rt)); };
  measure(*cpp, cpp_sync, cpp_times); // warm-up: the first launches compile
  measure(*c, c_sync, c_times);
  cpp_times = {}, c_times = {};
  for (int r = 0; r < repetitions; ++r) { // alternating which goes first
    if (r % 2 == 0)
      measure(*cpp, cpp_sync, cpp_times);
    measure(*c, c_sync, c_times);
    if (r % 2 == 1)
      measure(*cpp, cpp_sync, cpp_times);
  }
  result.cpp_calls = bench::median(cpp_times.calls);
  result.cpp_sync = bench::median(cpp_times.synchronized);
  result.c_calls = bench::median(c_times.calls);
  result.c_sync = bench::median(c_times.synchronized);
  // y = 1 * x + y with x = 1, once per launch: exact in f32 up to 2^24.
  const float expected = float((1 + repetitions) * kLaunches);
  std::vector<float> from_cpp = cpp->rt.download<float>(cpp->y), from_c = c->result();
  result.correct =
      std::all_of(from_cpp.begin(), from_cpp.end(), [&](float v) { return v == expected; }) &&
      from_c == from_cpp;
  return result;
}

} // namespace

int main(int argc, char **argv) {
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  int repetitions = 7;
  std::vector<std::string> devices = {"vulkan", "interp", "cuda"};
  std::string path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--repetitions" && i + 1 < argc) {
      repetitions = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--devices" && i + 1 < argc) {
      devices = bench::split_list(argv[++i]);
    } else if (path.empty() && !arg.starts_with("-")) {
      path = arg;
    } else {
      path.clear();
      break;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: capi_bench <libcubecc_examples.so> [--repetitions N] "
                         "[--devices vulkan,interp,cuda]\n");
    return 2;
  }

  std::vector<Result> results;
  for (const std::string &device : devices)
    results.push_back(run(device, path, repetitions));

  std::printf("%d launches of axpy (%u elements, 1 workgroup), host us per launch, median of %d\n",
              kLaunches, kElements, repetitions);
  std::printf("%-8s %12s %12s %7s %14s %14s %7s %s\n", "device", "C++ calls", "C calls", "C/C++",
              "C++ +sync", "C +sync", "C/C++", "correct");
  bool ok = true;
  for (const Result &r : results) {
    if (!r.skipped.empty()) {
      std::printf("%-8s skipped: %s\n", r.device.c_str(), r.skipped.c_str());
      continue;
    }
    ok = ok && r.correct;
    std::printf("%-8s %12.3f %12.3f %6.2fx %14.3f %14.3f %6.2fx %s\n", r.device.c_str(),
                r.cpp_calls, r.c_calls, r.c_calls / r.cpp_calls, r.cpp_sync, r.c_sync,
                r.c_sync / r.cpp_sync, r.correct ? "yes" : "NO");
  }
  for (const Result &r : results) {
    if (!r.skipped.empty())
      continue;
    std::printf("%s\n", fmt::format("{{\"bench\":\"capi\",\"device\":\"{}\",\"launches\":{},"
                                    "\"repetitions\":{},\"cpp_calls_us\":{:.4f},\"c_calls_us\":{:."
                                    "4f},\"calls_ratio\":{:.3f},\"cpp_sync_us\":{:.4f},\"c_sync_"
                                    "us\":{:.4f},\"sync_ratio\":{:.3f},\"correct\":{}}}",
                                    r.device, kLaunches, repetitions, r.cpp_calls, r.c_calls,
                                    r.c_calls / r.cpp_calls, r.cpp_sync, r.c_sync,
                                    r.c_sync / r.cpp_sync, r.correct)
                            .c_str());
  }
  return ok ? 0 : 1;
}
