//===- runtime_test.cpp - The runtime: pools, kernel cache, argument checks, devices ----------===//
//
// The interp device runs kernels of the IR text form against host computations; the Vulkan device
// runs SPIR-V compiled from GLSL by glslangValidator at test time (following the kernel ABI) and
// the SPIR-V writer's output, on whatever Vulkan device is present (lavapipe in CI). The Vulkan
// tests skip only when no Vulkan device opens. ctest runs them with CUBECC_VULKAN_VALIDATION=1, so
// any validation message fails the operation that caused it.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/dsl/registry.h"
#include "cubecc/runtime/cuda_device.h"
#include "cubecc/runtime/hip_device.h"
#include "cubecc/runtime/runtime.h"
#include "cubecc/runtime/tensor.h"
#ifdef CUBECC_HAVE_VULKAN
#include "cubecc/runtime/vulkan_device.h"
#endif
#include "test_support.h"

#include <dlfcn.h>
#include <gmock/gmock.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>

using namespace cubecc;
using namespace cubecc::runtime;
using ::testing::HasSubstr;

namespace {

using test::read_file;

using test::ScopedEnv;

template <class F> std::string error_of(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "<no error>";
}

std::vector<float> random_floats(size_t n, unsigned seed, float lo = -10, float hi = 10) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// a * x + y as a device may compute GLSL's fma(): fused, or rounded after the product (SPIR-V's
/// GLSL.std.450 Fma does not promise a single rounding, and lavapipe does not fuse).
bool fma_or_unfused(float result, float a, float x, float y) {
  return result == std::fma(a, x, y) || result == a * x + y;
}

/// Small whole numbers: sums of them are exact in any order.
std::vector<float> whole_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-8, 8);
  std::vector<float> v(n);
  for (float &x : v)
    x = static_cast<float>(dist(rng));
  return v;
}

constexpr std::string_view kScaleKernel = R"(
// out[i] = f32(in[i]) * scale + f32(bias): values of three widths in the parameter block.
module @m {
  kernel @scale(%out: buffer<f32, write>, %in: buffer<u32, read>, %n: u32, %scale: f32, %bias: i64) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      %v = load %in, %i : u32
      %f = cast %v : f32
      %s = mul %f, %scale : f32
      %b = cast %bias : f32
      %r = add %s, %b : f32
      store %out, %i, %r
      yield
    }
    return
  }
}
)";

constexpr std::string_view kVectorKernel = R"(
module @m {
  kernel @dot2(%out: buffer<f32, write>, %v: f32x2, %flag: bool) workgroup(1, 1, 1) {
    %c0 = const 0 : u32
    %x = vec.extract %v {lane = 0} : f32
    %y = vec.extract %v {lane = 1} : f32
    %s = add %x, %y : f32
    %z = const 0.0 : f32
    %r = select %flag, %s, %z : f32
    store %out, %c0, %r
    return
  }
}
)";

constexpr std::string_view kUnguardedKernel = R"(
module @m {
  kernel @unguarded(%out: buffer<u32, write>) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    store %out, %i, %i
    return
  }
}
)";

/// 2^30 f32 elements: 4 GiB of shared memory, which a 32-bit byte count wraps to 0.
constexpr std::string_view kHugeSharedKernel = R"(
module @m {
  kernel @huge(%out: buffer<f32, write>) workgroup(1, 1, 1) {
    %s = shared.alloc : shared<f32, 1073741824>
    %zero = const 0 : u32
    %v = load %s, %zero : f32
    store %out, %zero, %v
    return
  }
}
)";

} // namespace

//===- Devices and opening -------------------------------------------------------------------===//

TEST(Runtime, lists_every_backend_with_interp_available) {
  auto devices = list_devices();
  auto find = [&](std::string_view name) {
    for (const DeviceEntry &e : devices)
      if (e.backend == name)
        return e;
    return DeviceEntry{};
  };
  EXPECT_TRUE(find("interp").available);
  EXPECT_TRUE(find("interp").info.has_value());
  EXPECT_TRUE(find("cuda").built); // whether a device opens: test/unit/gpu_device_test.cpp
  EXPECT_TRUE(find("hip").built);
  EXPECT_FALSE(find("vulkan").backend.empty());
}

TEST(Runtime, opens_the_device_named_by_cubecc_device) {
  ScopedEnv env("CUBECC_DEVICE", "interp");
  Runtime rt = Runtime::open();
  EXPECT_EQ(rt.info().backend, "interp");
}

TEST(Runtime, refuses_unknown_devices_by_name) {
  EXPECT_EQ(error_of([] { Runtime::open("nope"); }),
            "no device: unknown device 'nope' (known: cuda, hip, vulkan, cpu, interp)");
}

TEST(Runtime, interp_subgroup_size_comes_from_the_environment) {
  {
    ScopedEnv env("CUBECC_INTERP_SUBGROUP_SIZE", "8");
    EXPECT_EQ(Runtime::open("interp").info().subgroup_size, 8u);
  }
  ScopedEnv env("CUBECC_INTERP_SUBGROUP_SIZE", "3");
  EXPECT_THAT(error_of([] { Runtime::open("interp"); }),
              HasSubstr("CUBECC_INTERP_SUBGROUP_SIZE=3 is not a power of two"));
}

//===- CUDA and HIP devices without their GPUs ------------------------------------------------===//
//
// These machines have no NVIDIA driver (libcuda.so.1 does not load; the CUDA toolkit's stub
// library answers cuInit with CUDA_ERROR_STUB_LIBRARY) and no AMD GPU (the HIP runtime is
// installed: hipGetDeviceCount says hipErrorNoDevice). Opening either must say so precisely and
// never crash; a machine with the GPU skips these (scripts/gpu-check.sh runs the e2e suite there).

namespace {

bool library_loads(const char *name) {
  void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (library)
    dlclose(library);
  return library != nullptr;
}

DeviceEntry entry_of(std::string_view backend) {
  for (DeviceEntry &e : list_devices())
    if (e.backend == backend)
      return e;
  return DeviceEntry{};
}

constexpr const char *kCudaStub = "/usr/local/cuda/lib64/stubs/libcuda.so";

/// The kind of the Error `f` throws; nullopt when it throws none.
template <class F> std::optional<ErrorKind> kind_of(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return e.kind();
  }
  return std::nullopt;
}

} // namespace

TEST(CudaDevice, no_driver_a_stub_driver_and_no_device_are_no_device_errors) {
  {
    ScopedEnv library("CUBECC_CUDA_LIBRARY", "/nonexistent/libcuda.so.1");
    EXPECT_EQ(kind_of([] { CudaDevice::open(); }), ErrorKind::NoDevice);
    EXPECT_EQ(kind_of([] { open_device("cuda"); }), ErrorKind::NoDevice);
  }
  if (library_loads(kCudaStub)) {
    ScopedEnv library("CUBECC_CUDA_LIBRARY", kCudaStub);
    EXPECT_EQ(kind_of([] { CudaDevice::open(); }), ErrorKind::NoDevice);
  }
  ScopedEnv library("CUBECC_CUDA_LIBRARY", nullptr);
  if (!library_loads("libcuda.so.1")) {
    EXPECT_EQ(kind_of([] { CudaDevice::open(); }), ErrorKind::NoDevice);
  }
}

TEST(HipDevice, no_runtime_and_no_amd_gpu_are_no_device_errors) {
  {
    ScopedEnv library("CUBECC_HIP_LIBRARY", "/nonexistent/libamdhip64.so");
    EXPECT_EQ(kind_of([] { HipDevice::open(); }), ErrorKind::NoDevice);
  }
  ScopedEnv library("CUBECC_HIP_LIBRARY", nullptr);
  std::optional<ErrorKind> kind = kind_of([] { HipDevice::open(); });
  if (!kind)
    GTEST_SKIP() << "this machine has an AMD GPU";
  EXPECT_EQ(kind, ErrorKind::NoDevice);
}

TEST(CudaDevice, without_a_driver_there_is_no_device) {
  ScopedEnv library("CUBECC_CUDA_LIBRARY", nullptr);
  if (library_loads("libcuda.so.1"))
    GTEST_SKIP() << "this machine has an NVIDIA driver (libcuda.so.1)";
  const std::string message = "no device: cuda: libcuda.so.1 not found (no NVIDIA driver)";
  EXPECT_EQ(error_of([] { Runtime::open("cuda"); }), message);
  EXPECT_EQ(error_of([] { CudaDevice::open(); }), message);
  EXPECT_EQ(error_of([] { Runtime::open("cuda"); }), message); // the failed load is remembered
  ScopedEnv device("CUBECC_DEVICE", "cuda");
  EXPECT_EQ(error_of([] { Runtime::open(); }), message);
}

TEST(CudaDevice, the_toolkit_stub_library_is_no_driver) {
  if (!library_loads(kCudaStub))
    GTEST_SKIP() << "no CUDA toolkit stub library at " << kCudaStub;
  ScopedEnv library("CUBECC_CUDA_LIBRARY", kCudaStub);
  EXPECT_EQ(error_of([] { Runtime::open("cuda"); }),
            std::string("no device: cuda: CUDA_ERROR_STUB_LIBRARY from cuInit: ") + kCudaStub +
                " is the CUDA toolkit's stub library, not an NVIDIA driver");
  DeviceEntry cuda = entry_of("cuda");
  EXPECT_TRUE(cuda.built);
  EXPECT_FALSE(cuda.available);
  EXPECT_FALSE(cuda.info.has_value());
  EXPECT_THAT(cuda.detail, HasSubstr("CUDA_ERROR_STUB_LIBRARY"));
}

TEST(CudaDevice, a_library_that_does_not_load_is_named) {
  ScopedEnv library("CUBECC_CUDA_LIBRARY", "/nonexistent/libcuda.so.1");
  std::string message = error_of([] { Runtime::open("cuda"); });
  EXPECT_THAT(message, testing::StartsWith("no device: cuda: cannot load "
                                           "CUBECC_CUDA_LIBRARY=/nonexistent/libcuda.so.1: "));
  EXPECT_THAT(message, HasSubstr("No such file"));
}

TEST(HipDevice, without_an_amd_gpu_there_is_no_device) {
  ScopedEnv library("CUBECC_HIP_LIBRARY", nullptr);
  std::string message = error_of([] { Runtime::open("hip"); });
  if (message == "<no error>")
    GTEST_SKIP() << "this machine has an AMD GPU";
  if (library_loads("libamdhip64.so.5") || library_loads("libamdhip64.so.6") ||
      library_loads("libamdhip64.so"))
    EXPECT_THAT(message, // ROCm 5 describes the error by its name; later ones add a text
                testing::StartsWith("no device: hip: no AMD GPU (hipGetDeviceCount: "
                                    "hipErrorNoDevice"));
  else
    EXPECT_EQ(message, "no device: hip: libamdhip64.so not found (no ROCm HIP runtime)");
  EXPECT_EQ(error_of([] { HipDevice::open(); }), message);
  ScopedEnv other("CUBECC_HIP_LIBRARY", "/nonexistent/libamdhip64.so");
  EXPECT_THAT(error_of([] { Runtime::open("hip"); }),
              testing::StartsWith("no device: hip: cannot load "
                                  "CUBECC_HIP_LIBRARY=/nonexistent/libamdhip64.so: "));
}

TEST(Runtime, lists_cuda_and_hip_first_and_unavailable_with_the_reason) {
  ScopedEnv cuda_library("CUBECC_CUDA_LIBRARY", nullptr);
  ScopedEnv hip_library("CUBECC_HIP_LIBRARY", nullptr);
  std::vector<DeviceEntry> devices = list_devices();
  ASSERT_EQ(devices.size(), 5u);
  EXPECT_EQ(devices[0].backend, "cuda");
  EXPECT_EQ(devices[1].backend, "hip");
  EXPECT_EQ(devices[2].backend, "vulkan");
  EXPECT_EQ(devices[3].backend, "cpu");
  EXPECT_EQ(devices[4].backend, "interp");
  for (size_t i = 0; i < 2; ++i) {
    const DeviceEntry &e = devices[i];
    EXPECT_TRUE(e.built) << e.backend;
    if (e.available)
      continue; // a machine with the GPU
    EXPECT_FALSE(e.info.has_value()) << e.backend;
    EXPECT_EQ(e.detail, error_of([&] { Runtime::open(e.backend); }));
    EXPECT_THAT(e.detail, testing::StartsWith("no device: " + e.backend + ": "));
  }
}

TEST(Runtime, opens_the_first_gpu_else_the_best_kind_of_device_when_none_is_named) {
  ScopedEnv device("CUBECC_DEVICE", nullptr);
  ScopedEnv cuda_library("CUBECC_CUDA_LIBRARY", nullptr);
  ScopedEnv hip_library("CUBECC_HIP_LIBRARY", nullptr);
  // The first GPU in list order, else the first device of the best class (DeviceClass's order).
  std::string expected;
  std::optional<DeviceClass> best;
  for (const DeviceEntry &e : list_devices())
    if (e.available && (!best || e.info->device_class < *best)) {
      expected = e.backend;
      best = e.info->device_class;
    }
  Runtime rt = Runtime::open();
  EXPECT_EQ(rt.info().backend, expected);
  // Here: no NVIDIA or AMD GPU, and Vulkan is lavapipe (a CPU implementation), so cpu.
  if (!entry_of("cuda").available && !entry_of("hip").available &&
      (!entry_of("vulkan").available ||
       entry_of("vulkan").info->device_class != DeviceClass::Gpu)) {
    EXPECT_EQ(rt.info().backend, "cpu");
  }
}

//===- Memory pool ---------------------------------------------------------------------------===//

TEST(MemoryPool, rounds_requests_up_to_power_of_two_buckets_from_256_bytes) {
  Runtime rt = Runtime::open("interp", {.policy = PoolPolicy::PowerOfTwo});
  EXPECT_EQ(rt.allocate<uint8_t>(1).memory().bytes, 256u);
  EXPECT_EQ(rt.allocate<uint8_t>(257).memory().bytes, 512u);
  EXPECT_EQ(rt.allocate<float>(1024).memory().bytes, 4096u);
  Buffer b = rt.allocate<double>(3);
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(b.bytes(), 24u);
  EXPECT_EQ(b.element(), ir::Scalar::F64);
}

TEST(MemoryPool, reuses_a_freed_block_of_the_same_bucket_and_counts_it) {
  Runtime rt = Runtime::open("interp", {.policy = PoolPolicy::PowerOfTwo});
  {
    Buffer a = rt.allocate<float>(100); // 400 bytes: the 512 bucket
    PoolStatistics s = rt.pool_statistics();
    EXPECT_EQ(s.allocations, 1u);
    EXPECT_EQ(s.device_allocations, 1u);
    EXPECT_EQ(s.bytes_live, 512u);
    EXPECT_EQ(s.bytes_cached, 0u);
  }
  PoolStatistics s = rt.pool_statistics();
  EXPECT_EQ(s.bytes_live, 0u);
  EXPECT_EQ(s.bytes_cached, 512u);
  {
    Buffer b = rt.allocate<int32_t>(120); // 480 bytes: the same bucket
    Buffer c = rt.allocate<int32_t>(120); // nothing cached left: a new block
    s = rt.pool_statistics();
    EXPECT_EQ(s.allocations, 3u);
    EXPECT_EQ(s.reuses, 1u);
    EXPECT_EQ(s.device_allocations, 2u);
    EXPECT_EQ(s.bytes_requested, 960u);
    EXPECT_EQ(s.bytes_live, 1024u);
    EXPECT_EQ(s.peak_bytes_live, 1024u);
  }
  EXPECT_EQ(rt.pool_statistics().bytes_cached, 1024u);
  rt.trim();
  s = rt.pool_statistics();
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(s.device_frees, 2u);
  EXPECT_EQ(s.peak_bytes_reserved, 1024u);
}

TEST(MemoryPool, the_default_policy_is_adaptive_and_fits_recurring_sizes_closely) {
  Runtime rt = Runtime::open("interp");
  EXPECT_EQ(rt.pool_options().policy, PoolPolicy::Adaptive);
  for (int i = 0; i < 3; ++i) {
    Buffer a = rt.allocate<float>(300'000), b = rt.allocate<float>(300'000); // 1,200,000 bytes
    if (i > 0) {
      EXPECT_EQ(a.memory().bytes, 1'200'128u); // the exact class: 256-byte granule
      EXPECT_EQ(b.memory().bytes, 1'200'128u);
    }
  }
  PoolStatistics s = rt.pool_statistics();
  EXPECT_EQ(s.bytes_cached, 2 * 1'200'128u);
  EXPECT_LT(s.peak_reserved_ratio(), 1.1);
}

TEST(MemoryPool, a_moved_buffer_returns_its_block_once) {
  Runtime rt = Runtime::open("interp");
  Buffer a = rt.allocate<float>(10);
  Buffer b = std::move(a);
  EXPECT_FALSE(a.valid()); // NOLINT(bugprone-use-after-move): the moved-from state is the point
  Buffer c;
  c = std::move(b);
  EXPECT_EQ(rt.pool_statistics().bytes_live, 256u);
  c = Buffer();
  EXPECT_EQ(rt.pool_statistics().bytes_live, 0u);
  EXPECT_EQ(rt.pool_statistics().bytes_cached, 256u);
}

TEST(MemoryPool, buffers_may_outlive_their_runtime) {
  Buffer kept;
  {
    Runtime rt = Runtime::open("interp");
    kept = rt.upload(std::vector<int32_t>{1, 2, 3});
  }
  EXPECT_EQ(kept.size(), 3u); // destroyed after the runtime: the pool and device stay alive
}

TEST(MemoryPool, host_copies_check_element_type_and_size) {
  Runtime rt = Runtime::open("interp");
  Buffer b = rt.upload(std::vector<float>{1, 2, 3});
  std::vector<int32_t> wrong(3);
  EXPECT_EQ(error_of([&] { rt.download(b, std::span<int32_t>(wrong)); }),
            "download: the buffer holds f32, the host data is i32");
  std::vector<float> big(4);
  EXPECT_EQ(error_of([&] { rt.download(b, std::span<float>(big)); }),
            "download: 4 elements do not fit a buffer of 3");
  EXPECT_EQ(rt.download<float>(b), (std::vector<float>{1, 2, 3}));
}

//===- The interp device ---------------------------------------------------------------------===//

TEST(InterpDevice, runs_axpy_like_the_host) {
  auto m = test::example_module("axpy.cir");
  Runtime rt = Runtime::open("interp");
  KernelHandle axpy = rt.load(*m->kernels()[0]);
  const size_t n = 1000; // not a multiple of 256: the bounds check matters
  std::vector<float> x = random_floats(n, 1), y = random_floats(n, 2);
  Buffer dx = rt.upload(x), dy = rt.upload(y);
  rt.launch(axpy, grid_1d(n, 256), dx, dy, 2.5f);
  rt.synchronize();
  std::vector<float> out = rt.download<float>(dy);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], std::fma(2.5f, x[i], y[i])) << "element " << i;
  ASSERT_EQ(rt.last_launch_times_ns().size(), 1u);
  EXPECT_GT(rt.last_launch_times_ns()[0], 0.0);
}

TEST(InterpDevice, runs_reduce_sum_with_shared_memory_subgroups_and_atomics) {
  auto m = test::example_module("reduce_sum.cir");
  Runtime rt = Runtime::open("interp");
  KernelHandle reduce = rt.load(*m->kernels()[0]);
  const size_t n = 3000;
  std::vector<float> in = whole_floats(n, 3);
  Buffer din = rt.upload(in), dout = rt.upload(std::vector<float>{0.0f});
  rt.launch(reduce, grid_1d(n, 256), din, dout);
  EXPECT_EQ(rt.download<float>(dout)[0], std::accumulate(in.begin(), in.end(), 0.0f));
}

TEST(InterpDevice, passes_values_of_three_widths) {
  auto m = test::parse_valid(kScaleKernel);
  Runtime rt = Runtime::open("interp");
  KernelHandle k = rt.load(*m->kernels()[0]);
  std::vector<uint32_t> in(100);
  std::iota(in.begin(), in.end(), 0u);
  Buffer din = rt.upload(in), dout = rt.allocate<float>(100);
  rt.launch(k, grid_1d(100, 64), dout, din, 100u, 0.5f, int64_t(-7));
  std::vector<float> out = rt.download<float>(dout);
  for (size_t i = 0; i < 100; ++i)
    ASSERT_EQ(out[i], float(i) * 0.5f - 7.0f);
}

TEST(InterpDevice, passes_vectors_from_std_arrays_and_bools) {
  auto m = test::parse_valid(kVectorKernel);
  Runtime rt = Runtime::open("interp");
  KernelHandle k = rt.load(*m->kernels()[0]);
  Buffer out = rt.allocate<float>(1);
  rt.launch(k, {1, 1, 1}, out, std::array<float, 2>{1.5f, 2.0f}, true);
  EXPECT_EQ(rt.download<float>(out)[0], 3.5f);
  rt.launch(k, {1, 1, 1}, out, std::array<float, 2>{1.5f, 2.0f}, false);
  EXPECT_EQ(rt.download<float>(out)[0], 0.0f);
}

/// A DSL Tensor<f32, 2> `x` as the DSL traces it (x, x.shape0, x.shape1, x.stride0, x.stride1),
/// an Array `y`, a value, and a buffer whose shape parameters are not followed by strides.
constexpr std::string_view kDslLayoutKernel = R"(
module @m {
  kernel @layout(%x: buffer<f32, read>, %x.shape0: u32, %x.shape1: u32, %x.stride0: u32, %x.stride1: u32, %y: buffer<f32, write>, %a: f32, %v: f32x2, %t: buffer<u32, read>, %t.shape0: u32, %w: u32) workgroup(1, 1, 1) {
    return
  }
}
)";

TEST(KernelHandle, groups_the_ir_parameters_into_the_dsl_functions_parameters) {
  Runtime rt = Runtime::open("interp");
  KernelHandle k = rt.load(*test::parse_valid(kDslLayoutKernel)->kernels()[0]);
  std::vector<std::string> described;
  for (const KernelParameter &p : k.parameters())
    described.push_back(p.describe());
  EXPECT_THAT(described,
              ::testing::ElementsAre("x: Tensor[f32, 2]", "y: Array[f32]", "a: f32", "v: f32x2",
                                     "t: Array[u32]", "t.shape0: u32", "w: u32"));
  ASSERT_EQ(k.parameters().size(), 7u);
  EXPECT_EQ(k.parameters()[0].first, 0u);
  EXPECT_EQ(k.parameters()[0].rank, 2u);
  EXPECT_EQ(k.parameters()[1].first, 5u);
  EXPECT_EQ(k.parameters()[6].first, 10u);
  EXPECT_EQ(k.signature(), "layout(x: Tensor[f32, 2], y: Array[f32], a: f32, v: f32x2, t: "
                           "Array[u32], t.shape0: u32, w: u32)");
  KernelHandle scale = rt.load(*test::parse_valid(kScaleKernel)->kernels()[0]);
  EXPECT_EQ(scale.signature(),
            "scale(out: Array[f32], in: Array[u32], n: u32, scale: f32, bias: i64)");
}

// kDslLayoutKernel's layout, with a body that reads x's strides.
constexpr std::string_view kDslStridedKernel = R"(
module @m {
  kernel @strided(%x: buffer<f32, read>, %x.shape0: u32, %x.shape1: u32, %x.stride0: u32, %x.stride1: u32, %y: buffer<f32, write>, %a: f32, %v: f32x2, %t: buffer<u32, read>, %t.shape0: u32, %w: u32) workgroup(1, 1, 1) {
    %s = add %x.stride0, %x.stride1 : u32
    %f = load %x, %s : f32
    %i = const 0 : u32
    store %y, %i, %f
    return
  }
}
)";

TEST(KernelHandle, binds_a_tensor_view_to_its_parameter_and_refuses_a_mismatch) {
  Runtime rt = Runtime::open("interp");
  KernelHandle strided = rt.load(*test::parse_valid(kDslStridedKernel)->kernels()[0]);
  KernelHandle k = rt.load(*test::parse_valid(kDslLayoutKernel)->kernels()[0]);
  std::span<const KernelParameter> p = k.parameters();
  EXPECT_TRUE(strided.parameters()[0].reads_strides);
  EXPECT_FALSE(p[0].reads_strides);
  Tensor m(rt.allocate<float>(6 * 4), {6, 4});
  std::vector<ArgumentValue> values;
  bind_tensor(strided, 0, strided.parameters()[0], m.transpose(0, 1).slice(1, 2, 5), values);
  ASSERT_EQ(values.size(), 5u); // the buffer from the view's offset, 2 sizes, 2 strides
  EXPECT_EQ(values[0].kind, ArgumentValue::BufferArg);
  EXPECT_EQ(values[0].first, 8u); // row 2 of the 6 x 4 matrix
  EXPECT_EQ(values[0].count, ArgumentValue::kWholeBuffer);
  EXPECT_EQ(values[1].bits[0], 4u);
  EXPECT_EQ(values[2].bits[0], 3u);
  EXPECT_EQ(values[3].bits[0], 1u);
  EXPECT_EQ(values[4].bits[0], 4u);
  // An Array takes contiguous elements: a range of the buffer.
  values.clear();
  bind_tensor(k, 1, p[1], m.slice(0, 1, 3), values);
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].first, 4u);
  EXPECT_EQ(values[0].count, 8u);
  auto refused = [&](size_t param, const Tensor &t) {
    try {
      bind_tensor(k, param, p[param], t, values);
    } catch (const Error &e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      return std::string(e.what());
    }
    ADD_FAILURE() << "bound " << t.describe() << " to " << p[param].describe();
    return std::string();
  };
  EXPECT_THAT(refused(0, Tensor(rt.allocate<float>(8))),
              HasSubstr("argument 0 (x: Tensor[f32, 2]): the kernel's tensor has 2 dimension(s); "
                        "got a tensor of f32 with shape [8]"));
  EXPECT_THAT(refused(0, Tensor(rt.allocate<int32_t>(8), {2, 4})),
              HasSubstr("the kernel takes f32 elements; got a tensor of i32"));
  EXPECT_THAT(refused(1, m.transpose(0, 1)),
              HasSubstr("(y: Array[f32]): an Array parameter takes contiguous elements"));
  // A kernel that never reads x's strides indexes it flat: a view that is not dense is refused,
  // a contiguous one (a slice of whole rows, at an offset) is taken.
  EXPECT_THAT(refused(0, m.transpose(0, 1)),
              HasSubstr("(x: Tensor[f32, 2]): the kernel indexes this tensor by flat position "
                        "alone (x[i], never its strides), so it takes a contiguous tensor; got a "
                        "tensor of f32 with shape [4, 6] and strides [1, 4]"));
  values.clear();
  bind_tensor(k, 0, p[0], m.slice(0, 1, 3), values);
  EXPECT_EQ(values.size(), 5u);
  EXPECT_THAT(refused(2, m), HasSubstr("(a: f32): the parameter is a value, not a tensor"));
  EXPECT_THAT(refused(1, Tensor()), HasSubstr("the tensor is empty"));
}

TEST(InterpDevice, an_out_of_bounds_store_is_an_error_with_the_interpreters_text) {
  auto m = test::parse_valid(kUnguardedKernel);
  Runtime rt = Runtime::open("interp");
  KernelHandle k = rt.load(*m->kernels()[0]);
  Buffer out = rt.allocate<uint32_t>(10);
  std::string error = error_of([&] { rt.launch(k, {1, 1, 1}, out); });
  EXPECT_THAT(error, HasSubstr("interp: launch of kernel 'unguarded' failed"));
  EXPECT_THAT(error, HasSubstr("index 10 is out of bounds"));
}

TEST(InterpDevice, refuses_more_shared_memory_than_it_advertises) {
  auto m = test::parse_valid(kHugeSharedKernel);
  Runtime rt = Runtime::open("interp");
  EXPECT_EQ(rt.info().features.max_shared_bytes, 32u << 10); // lavapipe's
  EXPECT_THAT(error_of([&] { rt.load(*m->kernels()[0]); }),
              HasSubstr("interp: kernel 'huge' uses 4294967296 bytes of shared memory; the device "
                        "has 32768"));
  // One byte over lavapipe's 32 KiB is refused here as there (the array rounded up to 16 bytes,
  // docs/dsl.md); exactly 32 KiB runs.
  auto over = test::parse_valid(R"(module @m {
  kernel @over(%out: buffer<u32, readwrite>) workgroup(1, 1, 1) {
    %s = shared.alloc : shared<u8, 32769>
    %z = const 0 : u32
    %v = const 7 : u8
    store %s, %z, %v
    %w = load %s, %z : u8
    %x = cast %w : u32
    store %out, %z, %x
    return
  }
  kernel @fits(%out: buffer<u32, readwrite>) workgroup(1, 1, 1) {
    %s = shared.alloc : shared<u32, 8192>
    %z = const 0 : u32
    %v = const 7 : u32
    store %s, %z, %v
    %w = load %s, %z : u32
    store %out, %z, %w
    return
  }
})");
  EXPECT_THAT(error_of([&] { rt.load(*over->kernels()[0]); }),
              HasSubstr("interp: kernel 'over' uses 32784 bytes of shared memory; the device has "
                        "32768"));
  KernelHandle fits = rt.load(*over->kernels()[1]);
  Buffer out = rt.allocate<uint32_t>(1);
  rt.launch(fits, {1, 1, 1}, out);
  EXPECT_EQ(rt.download<uint32_t>(out), std::vector<uint32_t>{7});
}

TEST(InterpDevice, refuses_a_grid_vulkan_refuses) {
  auto m = test::parse_valid(kUnguardedKernel);
  Runtime rt = Runtime::open("interp");
  KernelHandle k = rt.load(*m->kernels()[0]);
  Buffer out = rt.allocate<uint32_t>(64);
  // 65,535 per dimension is Vulkan's minimum maxComputeWorkGroupCount.
  EXPECT_EQ(error_of([&] {
              rt.launch(k, {65536, 1, 1}, out);
            }),
            "interp: launch of kernel 'unguarded': a grid of 65536x1x1 workgroups exceeds the "
            "device's maximum of 65535x65535x65535");
  EXPECT_EQ(error_of([&] {
              rt.launch(k, {1, 1, 65536}, out);
            }),
            "interp: launch of kernel 'unguarded': a grid of 1x1x65536 workgroups exceeds the "
            "device's maximum of 65535x65535x65535");
}

TEST(InterpDevice, a_kernel_sees_exactly_the_bound_range) {
  auto m = test::parse_valid(kUnguardedKernel);
  Runtime rt = Runtime::open("interp");
  KernelHandle k = rt.load(*m->kernels()[0]);
  Buffer out = rt.upload(std::vector<uint32_t>(128, 7));
  LaunchArg range = out.arg();
  range.offset = 64 * 4;
  range.bytes = 64 * 4;
  rt.launch(k, {1, 1, 1}, std::span<const LaunchArg>(&range, 1));
  std::vector<uint32_t> host = rt.download<uint32_t>(out);
  for (uint32_t i = 0; i < 64; ++i) {
    ASSERT_EQ(host[i], 7u);
    ASSERT_EQ(host[64 + i], i);
  }
  range.offset = 100 * 4;
  EXPECT_THAT(error_of([&] {
                rt.launch(k, {1, 1, 1}, std::span<const LaunchArg>(&range, 1));
              }),
              HasSubstr("parameter 0 (%out: buffer<u32, write>): the range [400, 656) lies "
                        "outside the 512 bytes of the memory"));
}

//===- Kernel cache --------------------------------------------------------------------------===//

TEST(KernelCache, a_second_load_of_an_equal_kernel_does_not_compile) {
  Runtime rt = Runtime::open("interp");
  auto first = test::example_module("axpy.cir");
  auto second = test::example_module("axpy.cir"); // another module: equal by structure
  KernelHandle a = rt.load(*first->kernels()[0]);
  KernelHandle b = rt.load(*second->kernels()[0]);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(&a.compiled(), &b.compiled());
  KernelCacheStatistics s = rt.cache_statistics();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.hits, 1u);
}

TEST(KernelCache, a_keyed_load_traces_and_compiles_only_when_cold) {
  const dsl::RegisteredKernel *axpy = nullptr;
  for (const auto &k : dsl::registered_kernels())
    if (k.name == "axpy")
      axpy = &k;
  ASSERT_TRUE(axpy);
  Runtime rt = Runtime::open("interp");
  int traces = 0;
  auto trace = [&]() -> std::unique_ptr<ir::Module> {
    ++traces;
    auto module = std::make_unique<ir::Module>();
    std::vector<ir::Diagnostic> errors;
    axpy->trace(*module, *axpy, errors);
    EXPECT_TRUE(errors.empty()) << ir::to_string(errors);
    return module;
  };
  std::string key = axpy->name + "/" + axpy->configuration;
  KernelHandle cold = rt.kernel(key, trace);
  KernelHandle warm = rt.kernel(key, trace);
  EXPECT_EQ(traces, 1);
  EXPECT_EQ(&cold.compiled(), &warm.compiled());
  KernelCacheStatistics s = rt.cache_statistics();
  EXPECT_EQ(s.traces, 1u);
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.hits, 1u);

  // A new key whose trace gives an equal kernel: traced, but found by hash, not compiled.
  KernelHandle other = rt.kernel("another key", trace);
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(rt.cache_statistics().compiles, 1u);
  EXPECT_EQ(&other.compiled(), &cold.compiled());

  // The kernel-reference form of the callback.
  auto m = test::example_module("reduce_sum.cir");
  int calls = 0;
  auto by_reference = [&]() -> const ir::Kernel & {
    ++calls;
    return *m->kernels()[0];
  };
  rt.kernel("reduce", by_reference);
  rt.kernel("reduce", by_reference);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(rt.cache_statistics().compiles, 2u);
}

// The environment's statistics and tuning records are read without waiting for a compile: here
// another thread reads them while the trace (which runs under the compile lock) waits for it.
TEST(KernelCache, statistics_and_tuning_records_are_read_during_a_compile) {
  Runtime rt = Runtime::open("interp");
  auto m = test::example_module("reduce_sum.cir");
  bool read_during_the_trace = false;
  // Outside the trace: a reader that took the compile lock would wait for the trace, which gives
  // up after a minute and returns, and the test fails instead of hanging (the future's destructor
  // waits for the reader, which it must not do inside the trace).
  std::future<std::optional<std::string>> reader;
  rt.kernel("reduce", [&]() -> const ir::Kernel & {
    reader = std::async(std::launch::async, [&] {
      (void)rt.environment_statistics();
      return rt.find_tuning_record("no such key");
    });
    read_during_the_trace = reader.wait_for(std::chrono::minutes(1)) == std::future_status::ready;
    return *m->kernels()[0];
  });
  EXPECT_TRUE(read_during_the_trace);
}

TEST(KernelCache, an_invalid_kernel_is_refused_with_the_verifiers_message) {
  ir::Module m;
  ir::Kernel &k = m.add_kernel("empty"); // no return: does not verify
  Runtime rt = Runtime::open("interp");
  EXPECT_THAT(error_of([&] { rt.load(k); }), HasSubstr("kernel 'empty' does not verify"));
}

//===- Argument checks -----------------------------------------------------------------------===//

class ArgumentChecks : public ::testing::Test {
protected:
  void SetUp() override {
    axpy = rt.load(*module->kernels()[0]);
    scale = rt.load(*scale_module->kernels()[0]);
  }
  std::unique_ptr<ir::Module> module = test::example_module("axpy.cir");
  std::unique_ptr<ir::Module> scale_module = test::parse_valid(kScaleKernel);
  Runtime rt = Runtime::open("interp");
  KernelHandle axpy, scale;
  Buffer x = rt.upload(std::vector<float>(8, 1.0f));
  Buffer y = rt.upload(std::vector<float>(8, 2.0f));
  Buffer ints = rt.upload(std::vector<int32_t>(8, 1));
  Buffer words = rt.upload(std::vector<uint32_t>(8, 1));
};

TEST_F(ArgumentChecks, a_wrong_count_names_the_kernel_and_its_parameters) {
  EXPECT_EQ(error_of([&] {
              rt.launch(axpy, {1, 1, 1}, x, y);
            }),
            "launch of kernel 'axpy': 2 argument(s) given, the kernel has 3 parameter(s): "
            "parameter 0 (%x: buffer<f32, read>), parameter 1 (%y: buffer<f32, readwrite>), "
            "parameter 2 (%a: f32)");
}

TEST_F(ArgumentChecks, a_buffer_for_a_scalar_is_refused) {
  EXPECT_EQ(error_of([&] {
              rt.launch(axpy, {1, 1, 1}, x, y, y);
            }),
            "launch of kernel 'axpy': parameter 2 (%a: f32): needs a value of type f32, got a "
            "buffer");
  EXPECT_EQ(error_of([&] {
              rt.launch(axpy, {1, 1, 1}, 1.0f, y, 2.0f);
            }),
            "launch of kernel 'axpy': parameter 0 (%x: buffer<f32, read>): needs a buffer, got a "
            "floating-point value");
}

TEST_F(ArgumentChecks, a_buffer_of_another_element_type_is_refused) {
  EXPECT_EQ(error_of([&] {
              rt.launch(axpy, {1, 1, 1}, ints, y, 2.0f);
            }),
            "launch of kernel 'axpy': parameter 0 (%x: buffer<f32, read>): needs a buffer of "
            "f32, got a buffer of i32");
}

TEST_F(ArgumentChecks, numbers_go_only_to_parameters_of_their_kind_and_range) {
  EXPECT_EQ(error_of([&] {
              rt.launch(axpy, {1, 1, 1}, x, y, 2);
            }),
            "launch of kernel 'axpy': parameter 2 (%a: f32): needs a floating-point value, got "
            "an integer (convert it explicitly)");
  EXPECT_EQ(error_of([&] {
              rt.launch(scale, {1, 1, 1}, y, words, 1.0, 0.5f, int64_t(1));
            }),
            "launch of kernel 'scale': parameter 2 (%n: u32): needs an integer, got a "
            "floating-point value");
  EXPECT_EQ(error_of([&] {
              rt.launch(scale, {1, 1, 1}, y, words, -1, 0.5f, int64_t(1));
            }),
            "launch of kernel 'scale': parameter 2 (%n: u32): the value -1 does not fit u32");
  EXPECT_EQ(error_of([&] {
              rt.launch(scale, {1, 1, 1}, y, words, uint64_t(1) << 32, 0.5f, 1);
            }),
            "launch of kernel 'scale': parameter 2 (%n: u32): the value 4294967296 does not fit "
            "u32");
  EXPECT_EQ(error_of([&] {
              rt.launch(scale, {1, 1, 1}, y, words, 8u, std::array<float, 2>{1, 2}, 1);
            }),
            "launch of kernel 'scale': parameter 3 (%scale: f32): needs 1 lane(s), got 2");
  // Integers of any C++ type convert when the value fits.
  rt.launch(scale, {1, 1, 1}, y, words, uint8_t(8), 0.5f, 3u);
  EXPECT_EQ(rt.download<float>(y)[0], 3.5f);
  // A double too large for f32 would become an infinity: refused. What rounds to FLT_MAX, and
  // infinities given as such, pass.
  EXPECT_EQ(error_of([&] {
              rt.launch(axpy, {1, 1, 1}, x, y, 1e300);
            }),
            "launch of kernel 'axpy': parameter 2 (%a: f32): the value 1e+300 does not fit f32 "
            "(it would become an infinity)");
  EXPECT_EQ(error_of([&] {
              rt.launch(axpy, {1, 1, 1}, x, y, -0x1.ffffffp127);
            }),
            "launch of kernel 'axpy': parameter 2 (%a: f32): the value -3.4028235677973366e+38 "
            "does not fit f32 (it would become an infinity)");
  rt.launch(axpy, {1, 1, 1}, x, y, 0x1.fffffefp127);
  rt.launch(axpy, {1, 1, 1}, x, y, -std::numeric_limits<double>::infinity());
}

TEST_F(ArgumentChecks, an_empty_handle_or_buffer_is_refused) {
  EXPECT_EQ(error_of([&] {
              rt.launch(KernelHandle(), {1, 1, 1}, x);
            }),
            "launch: the kernel handle is empty");
  Buffer empty;
  EXPECT_EQ(error_of([&] {
              rt.launch(axpy, {1, 1, 1}, empty, y, 1.0f);
            }),
            "launch of kernel 'axpy': parameter 0 (%x: buffer<f32, read>): the buffer is empty "
            "(moved from or default-constructed)");
}

//===- The Vulkan device ---------------------------------------------------------------------===//

#ifdef CUBECC_HAVE_VULKAN

namespace {

/// SPIR-V from GLSL through glslangValidator, or nothing (with the reason in `error`).
std::optional<std::vector<uint32_t>> glsl_to_spirv(const std::string &name,
                                                   const std::string &source, std::string &error) {
  std::string base = ::testing::TempDir() + "cubecc_runtime_test_" + name;
  std::ofstream(base + ".comp") << source;
  std::string command = std::string(CUBECC_GLSLANG) + " -V --target-env vulkan1.2 -S comp -o " +
                        base + ".spv " + base + ".comp > " + base + ".log 2>&1";
  if (std::system(command.c_str()) != 0) {
    error = read_file(base + ".log");
    return std::nullopt;
  }
  std::string bytes = read_file(base + ".spv");
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), words.size() * 4);
  return words;
}

constexpr const char *kAxpyGlsl = R"(#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Params { float a; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < uint(y.length()))
    y[i] = fma(p.a, x[i], y[i]);
}
)";

constexpr const char *kScaleGlsl = R"(#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) writeonly buffer Out { float out_[]; };
layout(set = 0, binding = 1) readonly buffer In { uint in_[]; };
layout(push_constant) uniform Params { uint n; float scale; int64_t bias; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < p.n)
    out_[i] = float(in_[i]) * p.scale + float(p.bias);
}
)";

// reduce_sum.cir in GLSL: subgroup sums, shared memory, a barrier, a float atomic add.
constexpr const char *kReduceGlsl = R"(#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_shader_atomic_float : require
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer In { float in_[]; };
layout(set = 0, binding = 1) buffer Out { float out_[]; };
shared float partials[256];
void main() {
  uint i = gl_GlobalInvocationID.x;
  float v = i < uint(in_.length()) ? in_[i] : 0.0;
  float s = subgroupAdd(v);
  if (gl_SubgroupInvocationID == 0)
    partials[gl_SubgroupID] = s;
  barrier();
  if (gl_LocalInvocationIndex == 0) {
    float total = 0.0;
    for (uint k = 0; k < gl_NumSubgroups; ++k)
      total += partials[k];
    atomicAdd(out_[0], total);
  }
}
)";

constexpr const char *kDoubleAtomicGlsl = R"(#version 450
#extension GL_EXT_shader_atomic_float : require
#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Out { double out_[]; };
void main() { atomicAdd(out_[0], 1.0lf); }
)";

// Uses binding 1 while its ABI (one buffer) declares only binding 0.
constexpr const char *kWrongBindingGlsl = R"(#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 1) buffer Out { uint out_[]; };
void main() { out_[gl_GlobalInvocationID.x] = 1u; }
)";

constexpr std::string_view kOneBufferSignature = R"(
module @m {
  kernel @one(%out: buffer<u32, readwrite>) workgroup(64, 1, 1) {
    return
  }
}
)";

} // namespace

class VulkanDeviceTest : public ::testing::Test {
protected:
  void SetUp() override {
    try {
      rt.emplace(Runtime::open("vulkan"));
    } catch (const Error &e) {
      GTEST_SKIP() << "no Vulkan device: " << e.what();
    }
    vk = dynamic_cast<VulkanDevice *>(&rt->device());
    ASSERT_NE(vk, nullptr);
  }
  void TearDown() override {
    rt.reset();
    EXPECT_THAT(VulkanDevice::teardown_messages(), ::testing::IsEmpty());
  }

  /// A handle for GLSL `source` with the ABI of `signature`'s first kernel.
  KernelHandle glsl_kernel(const std::string &name, const char *source,
                           const ir::Module &signature) {
    std::string error;
    auto words = glsl_to_spirv(name, source, error);
    EXPECT_TRUE(words) << error;
    if (!words)
      return {};
    const ir::Kernel &k = *signature.kernels()[0];
    codegen::SpirvKernel spirv{*words, codegen::KernelAbi::of(k)};
    return rt->adopt(k, vk->compile_spirv(spirv));
  }

  std::optional<Runtime> rt;
  VulkanDevice *vk = nullptr;
};

TEST_F(VulkanDeviceTest, reports_the_device_and_its_features) {
  const DeviceInfo &info = rt->info();
  EXPECT_EQ(info.backend, "vulkan");
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.subgroup_size, 0u);
  EXPECT_GT(info.features.max_param_block_bytes, 0u);
  EXPECT_GT(info.features.max_shared_bytes, 0u);
  EXPECT_THAT(info.features.target, HasSubstr(info.name));
}

TEST_F(VulkanDeviceTest, runs_glsl_axpy_with_buffers_and_push_constants) {
  auto m = test::example_module("axpy.cir");
  KernelHandle axpy = glsl_kernel("axpy", kAxpyGlsl, *m);
  ASSERT_TRUE(axpy.valid());
  const size_t n = 1000;
  std::vector<float> x = random_floats(n, 1), y = random_floats(n, 2);
  Buffer dx = rt->upload(x), dy = rt->upload(y);
  rt->launch(axpy, grid_1d(n, 256), dx, dy, 2.5f);
  rt->synchronize();
  std::vector<float> out = rt->download<float>(dy);
  for (size_t i = 0; i < n; ++i)
    ASSERT_PRED4(fma_or_unfused, out[i], 2.5f, x[i], y[i]) << "element " << i;
  std::vector<double> times = rt->last_launch_times_ns();
  ASSERT_EQ(times.size(), 1u);
  EXPECT_GT(times[0], 0.0);
}

TEST_F(VulkanDeviceTest, packs_values_of_three_widths_like_the_interpreter) {
  auto m = test::parse_valid(kScaleKernel);
  KernelHandle k = glsl_kernel("scale", kScaleGlsl, *m);
  ASSERT_TRUE(k.valid());
  std::vector<uint32_t> in(100);
  std::iota(in.begin(), in.end(), 0u);
  Buffer din = rt->upload(in), dout = rt->upload(std::vector<float>(100, -1.0f));
  rt->launch(k, grid_1d(100, 64), dout, din, 90u, 0.5f, int64_t(-7));
  std::vector<float> out = rt->download<float>(dout);

  Runtime interp = Runtime::open("interp");
  Buffer iin = interp.upload(in), iout = interp.upload(std::vector<float>(100, -1.0f));
  interp.launch(interp.load(*m->kernels()[0]), grid_1d(100, 64), iout, iin, 90u, 0.5f, int64_t(-7));
  EXPECT_EQ(out, interp.download<float>(iout));
  EXPECT_EQ(out[89], 89 * 0.5f - 7.0f);
  EXPECT_EQ(out[90], -1.0f);
}

TEST_F(VulkanDeviceTest, runs_a_reduction_with_subgroups_shared_memory_and_float_atomics) {
  if (!rt->info().features.float32_atomic_add)
    GTEST_SKIP() << "the device has no float atomic add";
  auto m = test::example_module("reduce_sum.cir");
  KernelHandle reduce = glsl_kernel("reduce", kReduceGlsl, *m);
  ASSERT_TRUE(reduce.valid());
  const size_t n = 3000;
  std::vector<float> in = whole_floats(n, 3);
  Buffer din = rt->upload(in), dout = rt->upload(std::vector<float>{0.0f});
  rt->launch(reduce, grid_1d(n, 256), din, dout);
  EXPECT_EQ(rt->download<float>(dout)[0], std::accumulate(in.begin(), in.end(), 0.0f));
}

TEST_F(VulkanDeviceTest, binds_exactly_the_launch_arguments_range) {
  auto m = test::example_module("axpy.cir");
  KernelHandle axpy = glsl_kernel("axpy_range", kAxpyGlsl, *m);
  ASSERT_TRUE(axpy.valid());
  // 1024 elements in memory, the kernel sees 1000: y.length() is 1000, the rest is untouched.
  Buffer x = rt->upload(std::vector<float>(1024, 1.0f));
  Buffer y = rt->upload(std::vector<float>(1024, 5.0f));
  LaunchArg args[3] = {x.arg(), y.arg(), {}};
  args[0].bytes = args[1].bytes = 1000 * 4;
  args[2].bits = {std::bit_cast<uint32_t>(1.0f)};
  rt->launch(axpy, {4, 1, 1}, std::span<const LaunchArg>(args));
  std::vector<float> out = rt->download<float>(y);
  for (size_t i = 0; i < 1024; ++i)
    ASSERT_EQ(out[i], i < 1000 ? 6.0f : 5.0f) << "element " << i;
}

TEST_F(VulkanDeviceTest, accumulates_launches_past_one_batch_with_a_time_for_each) {
  auto m = test::example_module("axpy.cir");
  KernelHandle axpy = glsl_kernel("axpy_batch", kAxpyGlsl, *m);
  ASSERT_TRUE(axpy.valid());
  Buffer x = rt->upload(std::vector<float>(256, 1.0f));
  Buffer y = rt->upload(std::vector<float>(256, 0.0f));
  const int launches = 300; // more than one batch (256)
  for (int i = 0; i < launches; ++i)
    rt->launch(axpy, {1, 1, 1}, x, y, 1.0f);
  rt->synchronize();
  std::vector<double> times = rt->last_launch_times_ns();
  ASSERT_EQ(times.size(), size_t(launches));
  for (double t : times)
    ASSERT_GT(t, 0.0);
  EXPECT_EQ(rt->download<float>(y)[255], float(launches));
}

TEST_F(VulkanDeviceTest, refuses_a_kernel_needing_an_absent_feature) {
  if (rt->info().features.float64_atomic_add)
    GTEST_SKIP() << "the device has float64 atomic add";
  std::string error;
  auto words = glsl_to_spirv("double_atomic", kDoubleAtomicGlsl, error);
  ASSERT_TRUE(words) << error;
  codegen::SpirvKernel spirv{*words, {}};
  spirv.abi.name = "double_atomic";
  spirv.abi.workgroup_size = {64, 1, 1};
  spirv.abi.num_buffers = 1;
  spirv.abi.params.resize(1);
  EXPECT_THAT(error_of([&] { vk->compile_spirv(spirv); }),
              HasSubstr("kernel 'double_atomic' needs SPIR-V capabilities this device does not "
                        "support: AtomicFloat64AddEXT"));
}

TEST_F(VulkanDeviceTest, refuses_a_kernel_beyond_the_device_limits) {
  std::string error;
  auto words = glsl_to_spirv("limits", kWrongBindingGlsl, error);
  ASSERT_TRUE(words) << error;
  codegen::SpirvKernel spirv{*words, {}};
  spirv.abi.name = "big";
  spirv.abi.workgroup_size = {64, 1, 1};
  spirv.abi.param_block_bytes = rt->info().features.max_param_block_bytes + 4;
  EXPECT_THAT(error_of([&] { vk->compile_spirv(spirv); }),
              HasSubstr("kernel 'big' has " + std::to_string(spirv.abi.param_block_bytes) +
                        " bytes of value parameters"));
  spirv.abi.param_block_bytes = 0;
  spirv.abi.workgroup_size = {4096, 1, 1};
  EXPECT_THAT(error_of([&] { vk->compile_spirv(spirv); }),
              HasSubstr("kernel 'big' has workgroup size (4096, 1, 1)"));
}

TEST_F(VulkanDeviceTest, refuses_shared_memory_whose_32_bit_size_wraps_to_zero) {
  auto m = test::parse_valid(kHugeSharedKernel);
  EXPECT_THAT(error_of([&] { rt->load(*m->kernels()[0]); }),
              HasSubstr("kernel 'huge' uses 4294967296 bytes of shared memory; target 'vulkan ("));
}

TEST_F(VulkanDeviceTest, refuses_a_grid_beyond_the_device_limit) {
  auto m = test::example_module("axpy.cir");
  KernelHandle axpy = glsl_kernel("axpy_grid", kAxpyGlsl, *m);
  ASSERT_TRUE(axpy.valid());
  Buffer x = rt->allocate<float>(4), y = rt->allocate<float>(4);
  EXPECT_THAT(error_of([&] {
                rt->launch(axpy, {~0u, 1, 1}, x, y, 1.0f);
              }),
              HasSubstr("exceeds the device's maximum"));
}

TEST_F(VulkanDeviceTest, a_validation_message_fails_the_operation_that_caused_it) {
  if (!vk->validation_enabled())
    GTEST_SKIP() << "CUBECC_VULKAN_VALIDATION is not set";
  std::string error;
  auto words = glsl_to_spirv("wrong_binding", kWrongBindingGlsl, error);
  ASSERT_TRUE(words) << error;
  auto signature = test::parse_valid(kOneBufferSignature);
  codegen::SpirvKernel spirv{*words, codegen::KernelAbi::of(*signature->kernels()[0])};
  EXPECT_THAT(error_of([&] { vk->compile_spirv(spirv); }),
              HasSubstr("vulkan validation, during compiling kernel 'one'"));
}

TEST_F(VulkanDeviceTest, runs_the_spirv_writers_kernels_like_the_interpreter) {
  auto m = test::example_module("axpy.cir");
  KernelHandle axpy;
  std::string error = error_of([&] { axpy = rt->load(*m->kernels()[0]); });
  ASSERT_EQ(error, "<no error>");
  const size_t n = 1000;
  std::vector<float> x = random_floats(n, 4), y = random_floats(n, 5);
  Buffer dx = rt->upload(x), dy = rt->upload(y);
  rt->launch(axpy, grid_1d(n, 256), dx, dy, -1.5f);
  std::vector<float> out = rt->download<float>(dy);
  for (size_t i = 0; i < n; ++i)
    ASSERT_PRED4(fma_or_unfused, out[i], -1.5f, x[i], y[i]) << "element " << i;

  auto reduce_module = test::example_module("reduce_sum.cir");
  KernelHandle reduce = rt->load(*reduce_module->kernels()[0]);
  std::vector<float> in = whole_floats(5000, 6);
  Buffer din = rt->upload(in), dout = rt->upload(std::vector<float>{0.0f});
  rt->launch(reduce, grid_1d(in.size(), 256), din, dout);
  EXPECT_EQ(rt->download<float>(dout)[0], std::accumulate(in.begin(), in.end(), 0.0f));
}

TEST_F(VulkanDeviceTest, refuses_an_ir_kernel_needing_an_absent_feature_with_the_writers_message) {
  if (rt->info().features.float64_atomic_add)
    GTEST_SKIP() << "the device has float64 atomic add";
  auto m = test::parse_valid(R"(
module @m {
  kernel @datomic(%out: buffer<f64, readwrite>) workgroup(1, 1, 1) {
    %c0 = const 0 : u32
    %one = const 1.0 : f64
    %old = atomic.add %out, %c0, %one : f64
    return
  }
}
)");
  std::string error = error_of([&] { rt->load(*m->kernels()[0]); });
  EXPECT_THAT(error, HasSubstr("vulkan: cannot compile kernel 'datomic'"));
  EXPECT_THAT(error, HasSubstr("atomic.add"));
}

TEST(VulkanDevice, copies_through_staging_buffers_when_forced) {
  ScopedEnv env("CUBECC_VULKAN_FORCE_STAGING", "1");
  std::optional<Runtime> rt;
  try {
    rt.emplace(Runtime::open("vulkan"));
  } catch (const Error &e) {
    GTEST_SKIP() << "no Vulkan device: " << e.what();
  }
  auto *vk = dynamic_cast<VulkanDevice *>(&rt->device());
  std::string error;
  auto words = glsl_to_spirv("axpy_staging", kAxpyGlsl, error);
  ASSERT_TRUE(words) << error;
  auto m = test::example_module("axpy.cir");
  codegen::SpirvKernel spirv{*words, codegen::KernelAbi::of(*m->kernels()[0])};
  KernelHandle axpy = rt->adopt(*m->kernels()[0], vk->compile_spirv(spirv));
  std::vector<float> x = random_floats(300, 7), y = random_floats(300, 8);
  Buffer dx = rt->upload(x), dy = rt->upload(y);
  rt->launch(axpy, grid_1d(300, 256), dx, dy, 3.0f);
  std::vector<float> out = rt->download<float>(dy);
  for (size_t i = 0; i < 300; ++i)
    ASSERT_PRED4(fma_or_unfused, out[i], 3.0f, x[i], y[i]) << "element " << i;
  rt.reset();
  EXPECT_THAT(VulkanDevice::teardown_messages(), ::testing::IsEmpty());
}

#endif // CUBECC_HAVE_VULKAN
