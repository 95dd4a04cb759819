//===- external_memory_test.cpp - Buffers over memory the caller owns (Runtime::adopt_memory)
//--===//
//
// On interp (host memory) and vulkan (a VkBuffer the test makes on the runtime's own VkDevice,
// with host-visible memory it maps and reads directly): a kernel writes into the caller's memory
// and the caller sees it in its own allocation; copies and graphs work; the release callback runs
// exactly once, after the last user (the Buffer, a graph that used it); the errors name what is
// wrong. ctest runs these with CUBECC_VULKAN_VALIDATION=1 (utils/test_environment.cpp), so any
// misuse of the adopted VkBuffer fails the operation.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc.h"
#include "cubecc/ir/parser.h"
#include "cubecc/runtime/runtime.h"
#ifdef CUBECC_HAVE_VULKAN
#include "cubecc/runtime/vulkan_device.h"
#endif
#include "test_support.h"
#include "vulkan_test_buffer.h"

#include <gmock/gmock.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

using namespace cubecc;
using namespace cubecc::runtime;
using ::testing::HasSubstr;

namespace {

template <class F> std::string error_of(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "<no error>";
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * float(i % 97) - 3.0f;
  return v;
}

//===- interp: host memory -------------------------------------------------------------------===//

TEST(ExternalMemory, interp_a_kernel_writes_into_adopted_host_memory_without_a_copy) {
  auto m = test::example_module("axpy.cir");
  Runtime rt = Runtime::open("interp");
  KernelHandle axpy = rt.load(*m->kernels()[0]);
  const size_t n = 1000;
  std::vector<float> x = ramp(n, 0.5f), y = ramp(n, -0.25f), expected(n);
  for (size_t i = 0; i < n; ++i)
    expected[i] = std::fma(2.0f, x[i], y[i]);
  PoolStatistics before = rt.pool_statistics();
  Buffer dx = rt.adopt_memory(ExternalMemory::host(x.data(), n * 4), ir::Scalar::F32);
  Buffer dy = rt.adopt_memory(ExternalMemory::host(y.data(), n * 4), ir::Scalar::F32);
  EXPECT_TRUE(dy.adopted());
  EXPECT_EQ(dy.size(), n);
  EXPECT_EQ(rt.pool_statistics().allocations, before.allocations); // not the pool's
  rt.launch(axpy, grid_1d(n, 256), dx, dy, 2.0f);
  rt.synchronize();
  EXPECT_EQ(y, expected); // the caller's own vector, read directly
  EXPECT_EQ(rt.native_memory(dy).handle, reinterpret_cast<uintptr_t>(y.data()));
}

TEST(ExternalMemory, interp_copies_go_to_and_from_the_callers_memory) {
  Runtime rt = Runtime::open("interp");
  std::vector<uint32_t> mine(64, 0);
  Buffer b = rt.adopt_memory(ExternalMemory::host(mine.data(), 64 * 4), ir::Scalar::U32);
  std::vector<uint32_t> in(64);
  for (uint32_t i = 0; i < 64; ++i)
    in[i] = i * 7;
  rt.upload(b, std::span<const uint32_t>(in));
  EXPECT_EQ(mine, in);
  mine[5] = 12345;
  EXPECT_EQ(rt.download<uint32_t>(b)[5], 12345u);
}

TEST(ExternalMemory, the_release_callback_runs_once_when_the_buffer_goes) {
  Runtime rt = Runtime::open("interp");
  std::vector<float> host(16);
  int released = 0;
  {
    Buffer a = rt.adopt_memory(ExternalMemory::host(host.data(), 64), ir::Scalar::F32,
                               [&] { ++released; });
    Buffer b = std::move(a); // the callback follows the memory, not the object
    EXPECT_EQ(released, 0);
    Buffer c;
    c = std::move(b);
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
}

TEST(ExternalMemory, an_adopted_buffer_may_outlive_its_runtime_and_go_on_another_thread) {
  std::vector<float> host(16);
  std::atomic<int> released = 0;
  std::thread::id released_on;
  Buffer b;
  {
    Runtime rt = Runtime::open("interp");
    b = rt.adopt_memory(ExternalMemory::host(host.data(), 64), ir::Scalar::F32, [&] {
      ++released;
      released_on = std::this_thread::get_id();
    });
  }
  EXPECT_EQ(released, 0);
  std::thread::id other;
  std::thread([&] {
    other = std::this_thread::get_id();
    Buffer gone = std::move(b);
  }).join();
  EXPECT_EQ(released, 1);
  EXPECT_EQ(released_on, other);
}

TEST(ExternalMemory, a_graph_that_used_adopted_memory_keeps_it_until_the_graph_goes) {
  auto m = test::example_module("axpy.cir");
  Runtime rt = Runtime::open("interp");
  KernelHandle axpy = rt.load(*m->kernels()[0]);
  const size_t n = 300;
  std::vector<float> x(n, 1.0f), y(n, 0.0f);
  int released = 0;
  Buffer dx = rt.upload(x);
  Graph graph;
  {
    Buffer dy = rt.adopt_memory(ExternalMemory::host(y.data(), n * 4), ir::Scalar::F32,
                                [&] { ++released; });
    rt.begin_capture();
    rt.launch(axpy, grid_1d(n, 256), dx, dy, 3.0f);
    graph = rt.end_capture();
  } // the Buffer is gone; the graph still uses the memory
  EXPECT_EQ(released, 0);
  rt.replay(graph);
  rt.replay(graph);
  rt.synchronize();
  EXPECT_EQ(y[0], 6.0f);
  EXPECT_EQ(y[n - 1], 6.0f);
  graph = Graph();
  EXPECT_EQ(released, 1);
}

TEST(ExternalMemory, adopting_memory_of_another_backend_is_an_error_naming_both) {
  Runtime rt = Runtime::open("interp");
  bool released = false;
  std::string e = error_of([&] {
    rt.adopt_memory(ExternalMemory::cuda(0x10000, 256), ir::Scalar::F32, [&] { released = true; });
  });
  EXPECT_THAT(e, HasSubstr("a CUDA device pointer can be adopted only by a runtime on the cuda "
                           "device; this runtime's device is interp"));
  EXPECT_THAT(
      error_of([&] { rt.adopt_memory(ExternalMemory::vulkan(1, 0, 256), ir::Scalar::F32); }),
      HasSubstr("a VkBuffer can be adopted only by a runtime on the vulkan device"));
  EXPECT_FALSE(released); // a refused adoption leaves the memory with the caller
}

TEST(ExternalMemory, null_empty_and_misaligned_memory_is_refused) {
  Runtime rt = Runtime::open("interp");
  alignas(8) unsigned char host[64] = {};
  EXPECT_THAT(
      error_of([&] { rt.adopt_memory(ExternalMemory::host(nullptr, 64), ir::Scalar::F32); }),
      HasSubstr("adopt_memory: host memory is null"));
  EXPECT_THAT(error_of([&] { rt.adopt_memory(ExternalMemory::host(host, 0), ir::Scalar::F32); }),
              HasSubstr("of 0 bytes: adopted memory must hold at least one f32 element"));
  EXPECT_THAT(error_of([&] { rt.adopt_memory(ExternalMemory::host(host, 6), ir::Scalar::F32); }),
              HasSubstr("6 bytes of host memory are not a whole number of f32 elements"));
  EXPECT_THAT(
      error_of([&] { rt.adopt_memory(ExternalMemory::host(host + 2, 32), ir::Scalar::F32); }),
      HasSubstr("is not aligned to the 4 bytes of a f32 element"));
  EXPECT_THAT(error_of([&] { rt.adopt_memory(ExternalMemory::host(host, 8), ir::Scalar::Bool); }),
              HasSubstr("buffers cannot hold bool"));
}

//===- interp and cpu: a DLPack kDLCPU tensor through the C API ------------------------------===//

TEST(ExternalMemory, a_kdlcpu_tensor_is_imported_without_a_copy_on_interp_and_cpu) {
  for (const char *device : {"interp", "cpu"}) {
    cubecc_runtime rt = nullptr;
    ASSERT_EQ(cubecc_runtime_open(device, &rt), CUBECC_SUCCESS) << cubecc_last_error();
    static int deletes = 0;
    deletes = 0;
    std::vector<float> host = ramp(16, 1.5f);
    int64_t shape[1] = {16};
    DLManagedTensor tensor{};
    tensor.dl_tensor.data = host.data();
    tensor.dl_tensor.device.device_type = kDLCPU;
    tensor.dl_tensor.ndim = 1;
    tensor.dl_tensor.dtype.code = kDLFloat;
    tensor.dl_tensor.dtype.bits = 32;
    tensor.dl_tensor.dtype.lanes = 1;
    tensor.dl_tensor.shape = shape;
    tensor.deleter = [](DLManagedTensor *) { ++deletes; };
    cubecc_buffer buffer = nullptr;
    ASSERT_EQ(cubecc_buffer_from_dlpack(rt, &tensor, &buffer), CUBECC_SUCCESS)
        << device << ": " << cubecc_last_error();
    host[3] = 42.0f; // the buffer is the tensor's memory, not a copy
    std::vector<float> back(16);
    ASSERT_EQ(cubecc_buffer_read(rt, buffer, back.data(), 64), CUBECC_SUCCESS);
    EXPECT_EQ(back, host) << device;
    cubecc_buffer_destroy(buffer);
    EXPECT_EQ(deletes, 1) << device;
    cubecc_runtime_destroy(rt);
  }
}

//===- every device: adopting a buffer's own native memory -----------------------------------===//

// The native handle of a pooled Buffer (a CUdeviceptr on cuda, a HIP pointer on hip, a VkBuffer
// on vulkan, a host pointer on interp) adopted as a second Buffer aliases it: the adoption path of
// each backend, run wherever its device opens (cuda and hip skip without their GPU).
class ExternalMemoryOnEveryDevice : public ::testing::TestWithParam<std::string> {};

TEST_P(ExternalMemoryOnEveryDevice, adopting_a_buffers_native_memory_aliases_it) {
  std::optional<Runtime> opened;
  try {
    opened.emplace(Runtime::open(GetParam()));
  } catch (const Error &e) {
    GTEST_SKIP() << e.what();
  }
  Runtime &rt = *opened;
  auto m = test::example_module("axpy.cir");
  KernelHandle axpy = rt.load(*m->kernels()[0]);
  const size_t n = 777;
  std::vector<float> x = ramp(n, 0.5f), y = ramp(n, -0.25f), expected(n);
  Buffer dx = rt.upload(x), dy = rt.upload(y);
  ExternalMemory native = rt.native_memory(dy);
  EXPECT_EQ(rt.device().memory_kind(), native.kind);
  EXPECT_EQ(native.bytes, n * 4);
  int released = 0;
  {
    Buffer alias = rt.adopt_memory(native, ir::Scalar::F32, [&] { ++released; });
    rt.launch(axpy, grid_1d(n, 256), dx, alias, 2.0f);
    rt.synchronize();
    std::vector<float> through_alias = rt.download<float>(alias);
    std::vector<float> through_buffer = rt.download<float>(dy);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(through_buffer[i], 2.0f * x[i] + y[i], 1e-5f * (std::abs(2.0f * x[i]) + 1))
          << "element " << i;
      ASSERT_EQ(through_alias[i], through_buffer[i]) << "element " << i;
    }
  }
  EXPECT_EQ(released, 1);
  EXPECT_EQ(rt.download<float>(dy).size(), n); // the pool's buffer is untouched by the release
}

INSTANTIATE_TEST_SUITE_P(Devices, ExternalMemoryOnEveryDevice,
                         ::testing::Values("interp", "vulkan", "cpu", "cuda", "hip"),
                         [](const auto &info) { return info.param; });

//===- vulkan: a VkBuffer the test makes on the runtime's VkDevice --------------------------===//

#ifdef CUBECC_HAVE_VULKAN

class ExternalVulkanMemory : public ::testing::Test {
protected:
  void SetUp() override {
    try {
      runtime_.emplace(Runtime::open("vulkan"));
    } catch (const Error &e) {
      GTEST_SKIP() << e.what();
    }
    device_ = dynamic_cast<VulkanDevice *>(&runtime_->device());
    ASSERT_NE(device_, nullptr);
  }
  /// A host-visible, mapped VkBuffer of `bytes` on the runtime's device.
  test_vulkan_buffer make_buffer(uint64_t bytes) {
    VulkanDevice::Handles h = device_->handles();
    test_vulkan_buffer b{};
    char error[256] = "";
    if (test_vulkan_buffer_create(h.instance, h.physical_device, h.device, h.get_instance_proc_addr,
                                  bytes, &b, error, sizeof error))
      ADD_FAILURE() << error;
    return b;
  }
  Runtime &rt() { return *runtime_; }

  std::optional<Runtime> runtime_;
  VulkanDevice *device_ = nullptr;
};

TEST_F(ExternalVulkanMemory, exposes_the_devices_vulkan_handles) {
  VulkanDevice::Handles h = device_->handles();
  EXPECT_NE(h.instance, nullptr);
  EXPECT_NE(h.physical_device, nullptr);
  EXPECT_NE(h.device, nullptr);
  EXPECT_NE(h.get_instance_proc_addr, nullptr);
}

TEST_F(ExternalVulkanMemory, a_kernel_writes_into_the_callers_vkbuffer_read_through_its_mapping) {
  auto m = test::example_module("axpy.cir");
  KernelHandle axpy = rt().load(*m->kernels()[0]);
  const size_t n = 1000;
  const uint64_t x_offset = 256; // a multiple of every device's storage buffer alignment
  test_vulkan_buffer vx = make_buffer(x_offset + n * 4), vy = make_buffer(n * 4);
  ASSERT_TRUE(vx.buffer && vy.buffer);
  std::vector<float> x = ramp(n, 0.5f), y = ramp(n, -0.25f);
  std::memcpy(static_cast<char *>(vx.mapped) + x_offset, x.data(), n * 4);
  std::memcpy(vy.mapped, y.data(), n * 4);
  int released = 0;
  {
    Buffer dx = rt().adopt_memory(ExternalMemory::vulkan(vx.buffer, x_offset, n * 4),
                                  ir::Scalar::F32, [&] { ++released; });
    Buffer dy = rt().adopt_memory(ExternalMemory::vulkan(vy.buffer, 0, n * 4), ir::Scalar::F32,
                                  [&] { ++released; });
    rt().launch(axpy, grid_1d(n, 256), dx, dy, 2.0f);
    rt().synchronize();
    const float *out = static_cast<const float *>(vy.mapped);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], std::fma(2.0f, x[i], y[i])) << "element " << i;
    // Host copies of adopted memory go through staging buffers (the range starts at the offset).
    EXPECT_EQ(rt().download<float>(dx), x);
    std::vector<float> ones(n, 1.0f);
    rt().upload(dx, std::span<const float>(ones));
    rt().synchronize(); // the upload is a copy queued on the stream, like a launch
    EXPECT_EQ(static_cast<const float *>(vx.mapped)[x_offset / 4], 1.0f);
    ExternalMemory native = rt().native_memory(dx);
    EXPECT_EQ(native.handle, vx.buffer);
    EXPECT_EQ(native.offset, x_offset);
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 2);
  test_vulkan_buffer_destroy(&vx); // after the runtime let go: no validation message
  test_vulkan_buffer_destroy(&vy);
}

TEST_F(ExternalVulkanMemory, a_graph_replays_into_adopted_memory_and_releases_it_last) {
  auto m = test::example_module("axpy.cir");
  KernelHandle axpy = rt().load(*m->kernels()[0]);
  const size_t n = 512;
  test_vulkan_buffer vy = make_buffer(n * 4);
  ASSERT_TRUE(vy.buffer);
  std::memset(vy.mapped, 0, n * 4);
  Buffer dx = rt().upload(std::vector<float>(n, 1.0f));
  int released = 0;
  Graph graph;
  {
    Buffer dy = rt().adopt_memory(ExternalMemory::vulkan(vy.buffer, 0, n * 4), ir::Scalar::F32,
                                  [&] { ++released; });
    rt().begin_capture();
    rt().launch(axpy, grid_1d(n, 256), dx, dy, 0.5f);
    graph = rt().end_capture();
  }
  EXPECT_EQ(released, 0);
  for (int i = 0; i < 4; ++i)
    rt().replay(graph);
  rt().synchronize();
  EXPECT_EQ(static_cast<const float *>(vy.mapped)[n - 1], 2.0f);
  graph = Graph();
  EXPECT_EQ(released, 1);
  test_vulkan_buffer_destroy(&vy);
}

// A release callback is the caller's code: deferred until the launches that use the memory are
// done, it runs after the runtime call that found them done has let go of the runtime's lock, so
// it may call the runtime (here: synchronize and allocate; they hung on that lock before).
TEST_F(ExternalVulkanMemory, a_release_callback_may_call_the_runtime) {
  auto m = test::example_module("axpy.cir");
  KernelHandle axpy = rt().load(*m->kernels()[0]);
  const size_t n = 4096;
  test_vulkan_buffer vy = make_buffer(n * 4);
  ASSERT_TRUE(vy.buffer);
  Buffer dx = rt().upload(std::vector<float>(n, 1.0f));
  int released = 0;
  std::vector<Buffer> made_in_callback;
  {
    Buffer dy =
        rt().adopt_memory(ExternalMemory::vulkan(vy.buffer, 0, n * 4), ir::Scalar::F32, [&] {
          rt().synchronize();
          made_in_callback.push_back(rt().allocate<float>(n));
          ++released;
        });
    for (int i = 0; i < 20; ++i)
      rt().launch(axpy, grid_1d(n, 256), dx, dy, 0.5f);
  }
  EXPECT_EQ(released, 0) << "the queued launches still use the memory";
  rt().synchronize();
  EXPECT_EQ(released, 1);
  EXPECT_EQ(made_in_callback.size(), 1u);
  test_vulkan_buffer_destroy(&vy);
}

TEST_F(ExternalVulkanMemory, refuses_host_memory_a_null_vkbuffer_and_a_misaligned_offset) {
  std::vector<float> host(4);
  EXPECT_THAT(
      error_of([&] { rt().adopt_memory(ExternalMemory::host(host.data(), 16), ir::Scalar::F32); }),
      HasSubstr("host memory can be adopted only by a runtime on the interp or cpu device; "
                "this runtime's device is vulkan"));
  EXPECT_THAT(
      error_of([&] { rt().adopt_memory(ExternalMemory::vulkan(0, 0, 16), ir::Scalar::F32); }),
      HasSubstr("a VkBuffer is null"));
  EXPECT_THAT(
      error_of([&] { rt().adopt_memory(ExternalMemory::vulkan(1, 2, 16), ir::Scalar::F32); }),
      HasSubstr("the VkBuffer offset 0x2 is not aligned to the 4 bytes of a f32"));
  uint64_t alignment = 0;
  test_vulkan_buffer vb = make_buffer(1024);
  ASSERT_TRUE(vb.buffer);
  // An element-aligned offset that the device cannot bind, where the device needs more than 4.
  for (uint64_t offset = 4; offset < 256 && !alignment; offset += 4) {
    std::string e = error_of(
        [&] { rt().adopt_memory(ExternalMemory::vulkan(vb.buffer, offset, 16), ir::Scalar::F32); });
    if (e != "<no error>") {
      EXPECT_THAT(e, HasSubstr("minStorageBufferOffsetAlignment"));
      alignment = offset;
    }
  }
  test_vulkan_buffer_destroy(&vb);
}

#endif

} // namespace
