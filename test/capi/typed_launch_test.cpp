//===- typed_launch_test.cpp - Host tensors, typed launches and kernel identity (cubecc.hpp) -===//
//
// On the interp device: cubecc::kernel<F> knows a kernel by its function and options (two
// functions under one name are two kernels); host Tensors (contiguous, transposed, sliced,
// adopted) bound by cubecc::launch from the kernel function's signature, with results checked
// against host loops; the launch-time checks of run-time-typed tensors; the kernel registered for
// F; grid_for; graphs of typed launches; tensors to and from DLPack (cubecc/dlpack.hpp). The
// compile-time checks are the must-fail programs of test/error/launch/.
//
//===-----------------------------------------------------------------------------------------===//
#include <cubecc/cubecc.hpp>
#include <cubecc/dlpack.hpp>

#include <gmock/gmock.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace dsl = cubecc::dsl;
using ::testing::HasSubstr;

namespace {

void add_one(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = y[i] + 1.0f; });
}

void times_ten(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = y[i] * 10.0f; });
}

void axpy(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = a * x[i] + y[i]; });
}

/// y(i, j) = a * x(i, j) through both tensors' strides: i along y, j along x of the grid.
void scale_2d(dsl::Tensor<const float, 2> x, dsl::Tensor<float, 2> y, dsl::Scalar<double> a) {
  auto j = dsl::global_id().x;
  auto i = dsl::global_id().y;
  dsl::if_(i < y.shape(0) && j < y.shape(1), [&] { y(i, j) = dsl::cast<float>(a) * x(i, j); });
}

/// out[i] = in[i] + k, over Arrays.
void add_k(dsl::Array<const int32_t> in, dsl::Array<int32_t> out, dsl::Scalar<int32_t> k) {
  auto i = dsl::global_id().x;
  dsl::if_(i < out.size(), [&] { out[i] = in[i] + k; });
}

/// Registered once (for launch<F>) and twice (an ambiguity launch<F> refuses).
void registered_negate(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = 0.0f - y[i]; });
}
void registered_twice(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = 2.0f * y[i]; });
}
void never_registered(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = 0.0f; });
}
const bool registered = dsl::register_kernel<registered_negate>("typed_launch_test_negate", "",
                                                                {.workgroup = {64, 1, 1}}) &&
                        dsl::register_kernel<registered_twice>("typed_launch_test_twice_a", "",
                                                               {.workgroup = {64, 1, 1}}) &&
                        dsl::register_kernel<registered_twice>("typed_launch_test_twice_b", "",
                                                               {.workgroup = {32, 1, 1}});

template <class F> std::string error_of(F &&f, cubecc::ErrorKind *kind = nullptr) {
  try {
    f();
  } catch (const cubecc::Error &e) {
    if (kind)
      *kind = e.kind();
    return e.what();
  }
  return "<no error>";
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = float(i % 29) - 7.0f;
  return v;
}

// The scalar rule, at compile time: what C++ brace initialization of a variable allows.
using cubecc::detail::scalar_accepts;
static_assert(scalar_accepts<float, float>());
static_assert(scalar_accepts<double, float>());
static_assert(scalar_accepts<int32_t, int16_t>());
static_assert(scalar_accepts<int64_t, uint32_t>());
static_assert(scalar_accepts<dsl::f16, float>());
static_assert(scalar_accepts<dsl::Vec<float, 4>, std::array<float, 4>>());
static_assert(!scalar_accepts<float, double>());
static_assert(!scalar_accepts<float, int>());
static_assert(!scalar_accepts<uint32_t, int>());
static_assert(!scalar_accepts<bool, int>());
static_assert(!scalar_accepts<dsl::f16, double>());
static_assert(!scalar_accepts<dsl::Vec<float, 4>, std::array<float, 3>>());

//===- Kernel identity -------------------------------------------------------------------===//

TEST(KernelIdentity, two_functions_under_one_name_are_two_kernels) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  cubecc::Tensor a = rt.upload(std::vector<float>{1, 2, 3}),
                 b = rt.upload(std::vector<float>{1, 2, 3});
  auto first = cubecc::kernel<add_one>(rt, "k", {.workgroup = {64, 1, 1}});
  auto second = cubecc::kernel<times_ten>(rt, "k", {.workgroup = {64, 1, 1}});
  cubecc::launch(rt, first, {1, 1, 1}, a);
  cubecc::launch(rt, second, {1, 1, 1}, b);
  EXPECT_EQ(rt.download<float>(a.buffer()), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(rt.download<float>(b.buffer()), (std::vector<float>{10, 20, 30}));
  EXPECT_EQ(rt.cache_statistics().traces, 2u);
}

TEST(KernelIdentity, one_function_with_two_option_sets_is_two_kernels) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  auto narrow = cubecc::kernel<add_one>(rt, "k", {.workgroup = {32, 1, 1}});
  auto wide = cubecc::kernel<add_one>(rt, "k", {.workgroup = {128, 1, 1}});
  EXPECT_EQ(narrow.abi().workgroup_size, (std::array<uint32_t, 3>{32, 1, 1}));
  EXPECT_EQ(wide.abi().workgroup_size, (std::array<uint32_t, 3>{128, 1, 1}));
  auto named =
      cubecc::kernel<add_one>(rt, "k", {.workgroup = {32, 1, 1}, .parameter_names = {"y"}});
  EXPECT_EQ(rt.cache_statistics().traces, 3u); // parameter names are an option too
  // The same function and options again: from the cache, not traced.
  auto again = cubecc::kernel<add_one>(rt, "k", {.workgroup = {128, 1, 1}});
  EXPECT_EQ(rt.cache_statistics().traces, 3u);
  EXPECT_EQ(again.hash(), wide.hash());
  (void)named;
}

//===- Typed launches ----------------------------------------------------------------------===//

TEST(TypedLaunch, axpy_takes_tensors_typed_tensors_and_buffers) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  const uint32_t n = 1000;
  std::vector<float> x = ramp(n), y(n, 0.5f);
  auto k = cubecc::kernel<axpy>(rt, "axpy", {.workgroup = {256, 1, 1}});
  cubecc::Tensor dx = rt.upload(x);
  cubecc::TypedTensor<float> dy(rt.upload(y));
  cubecc::launch(rt, k, cubecc::grid_for(dx, k), dx, dy, 2.0f);
  cubecc::Buffer raw = rt.upload(x);
  cubecc::launch(rt, k, cubecc::grid_for({n}, k), raw, dy, 1.0f);
  std::vector<float> got = rt.download<float>(dy.buffer());
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i], 3.0f * x[i] + 0.5f) << "element " << i;
}

TEST(TypedLaunch, strided_views_bind_their_shape_strides_and_offset) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  const uint64_t rows = 5, cols = 7;
  std::vector<float> host(rows * cols);
  for (uint64_t i = 0; i < host.size(); ++i)
    host[i] = float(i);
  cubecc::Tensor x(rt.upload(host), {rows, cols});
  auto k = cubecc::kernel<scale_2d>(rt, "scale_2d", {.workgroup = {8, 8, 1}});

  // The transposed view: y (cols x rows) = 2 * x^T.
  cubecc::Tensor y(rt.allocate<float>(rows * cols), {cols, rows});
  cubecc::launch(rt, k, cubecc::grid_for({rows, cols}, k), x.transpose(0, 1), y, 2.0);
  std::vector<float> got = rt.download<float>(y.buffer());
  for (uint64_t i = 0; i < cols; ++i)
    for (uint64_t j = 0; j < rows; ++j)
      ASSERT_EQ(got[i * rows + j], 2.0f * host[j * cols + i]) << i << "," << j;

  // Rows 2 and 3, columns 1 to 5: a view with an offset (2 * cols + 1) and row stride cols.
  cubecc::Tensor window = x.slice(0, 2, 4).slice(1, 1, 6);
  EXPECT_EQ(window.offset(), 2 * cols + 1);
  EXPECT_FALSE(window.contiguous());
  cubecc::Tensor z(rt.allocate<float>(2 * 5), {2, 5});
  cubecc::launch(rt, k, cubecc::grid_for({5, 2}, k), window, z, -1.0);
  got = rt.download<float>(z.buffer());
  for (uint64_t i = 0; i < 2; ++i)
    for (uint64_t j = 0; j < 5; ++j)
      ASSERT_EQ(got[i * 5 + j], -host[(2 + i) * cols + 1 + j]) << i << "," << j;
}

TEST(TypedLaunch, arrays_take_buffers_and_contiguous_1d_tensors) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  std::vector<int32_t> in = {5, -6, 7, 100, 9, 10};
  auto k = cubecc::kernel<add_k>(rt, "add_k", {.workgroup = {4, 1, 1}});
  cubecc::Tensor din = rt.upload(in);
  cubecc::Buffer out = rt.allocate<int32_t>(3);
  // Elements 2..4 of `in`: the Array sees 3 elements from the slice's offset.
  cubecc::launch(rt, k, {1, 1, 1}, din.slice(0, 2, 5), out, int16_t{-1});
  EXPECT_EQ(rt.download<int32_t>(out), (std::vector<int32_t>{6, 99, 8}));
}

TEST(TypedLaunch, a_run_time_typed_tensor_is_checked_at_launch_naming_the_argument) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  auto k = cubecc::kernel<axpy>(rt, "axpy", {.workgroup = {256, 1, 1}});
  cubecc::Tensor ints = rt.upload(std::vector<int32_t>{1, 2, 3});
  cubecc::Tensor y = rt.upload(std::vector<float>{1, 2, 3});
  cubecc::Tensor square(rt.upload(std::vector<float>{1, 2, 3, 4}), {2, 2});
  cubecc::ErrorKind kind{};
  std::string message = error_of([&] { cubecc::launch(rt, k, {1, 1, 1}, ints, y, 1.0f); }, &kind);
  EXPECT_THAT(message, HasSubstr("launch of kernel 'axpy': argument 0"));
  EXPECT_THAT(message, HasSubstr("Tensor of f32 with 1 dimension(s); got a tensor of i32"));
  EXPECT_EQ(kind, cubecc::ErrorKind::InvalidArgument);
  EXPECT_THAT(error_of([&] {
                cubecc::launch(rt, k, {1, 1, 1}, y, square, 1.0f);
              }),
              HasSubstr("argument 1: the parameter is a Tensor of f32 with 1 dimension(s); got a "
                        "tensor of f32 with shape [2, 2]"));
  EXPECT_THAT(error_of([&] { cubecc::TypedTensor<float, 2> t(ints); }),
              HasSubstr("TypedTensor<f32, 2>: got a tensor of i32 with shape [3]"));
}

TEST(TypedLaunch, tensors_refuse_shapes_past_their_buffer) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  cubecc::ErrorKind kind{};
  std::string message = error_of([&] { cubecc::Tensor t(rt.allocate<float>(10), {3, 4}); }, &kind);
  EXPECT_THAT(message, HasSubstr("reaches past the end of its buffer of 10 elements"));
  EXPECT_EQ(kind, cubecc::ErrorKind::InvalidArgument);
  cubecc::Tensor t(rt.allocate<float>(12), {3, 4});
  EXPECT_THAT(error_of([&] { (void)t.slice(1, 2, 5); }),
              HasSubstr("[2, 5) is not inside dimension 1 of size 4"));
  EXPECT_THAT(error_of([&] { (void)t.transpose(0, 2); }),
              HasSubstr("dimension 2 is out of range for a tensor of 2 dimension(s)"));
}

TEST(TypedLaunch, a_tensor_over_adopted_memory_is_written_in_place) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  std::vector<float> mine = {1, 2, 3, 4, 5, 6};
  bool released = false;
  {
    cubecc::Tensor t(rt.adopt_memory(cubecc::runtime::ExternalMemory::host(
                                         mine.data(), mine.size() * sizeof(float)),
                                     cubecc::ir::Scalar::F32, [&] { released = true; }),
                     {2, 3});
    cubecc::Tensor view = t.slice(0, 1, 2); // keeps the storage alive after t is gone
    auto k = cubecc::kernel<add_one>(rt, "add_one", {.workgroup = {64, 1, 1}});
    cubecc::Tensor flat(view.storage(), {6});
    cubecc::launch(rt, k, {1, 1, 1}, flat);
    rt.synchronize();
  }
  EXPECT_TRUE(released);
  EXPECT_EQ(mine, (std::vector<float>{2, 3, 4, 5, 6, 7}));
}

TEST(TypedLaunch, launch_of_f_uses_the_kernel_registered_for_f) {
  ASSERT_TRUE(registered);
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  cubecc::Tensor y = rt.upload(std::vector<float>{1, -2, 3});
  cubecc::launch<registered_negate>(rt, {1, 1, 1}, y);
  EXPECT_EQ(rt.download<float>(y.buffer()), (std::vector<float>{-1, 2, -3}));
  auto k = cubecc::registered_kernel<registered_negate>(rt);
  EXPECT_EQ(k.name(), "typed_launch_test_negate");
  EXPECT_EQ(k.abi().workgroup_size, (std::array<uint32_t, 3>{64, 1, 1}));
  EXPECT_EQ(rt.cache_statistics().traces, 1u);

  cubecc::ErrorKind kind{};
  EXPECT_THAT(error_of(
                  [&] {
                    cubecc::launch<registered_twice>(rt, {1, 1, 1}, y);
                  },
                  &kind),
              HasSubstr("F is registered more than once ('typed_launch_test_twice_a', "
                        "'typed_launch_test_twice_b')"));
  EXPECT_EQ(kind, cubecc::ErrorKind::InvalidArgument);
  EXPECT_THAT(error_of(
                  [&] {
                    cubecc::launch<never_registered>(rt, {1, 1, 1}, y);
                  },
                  &kind),
              HasSubstr("no kernel is registered for F"));
  EXPECT_EQ(kind, cubecc::ErrorKind::NotFound);
}

TEST(TypedLaunch, a_graph_captures_typed_launches) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  auto k = cubecc::kernel<axpy>(rt, "axpy", {.workgroup = {64, 1, 1}});
  cubecc::Tensor x = rt.upload(std::vector<float>{1, 2, 3, 4});
  cubecc::Tensor y = rt.upload(std::vector<float>{0, 0, 0, 0});
  rt.begin_capture();
  cubecc::launch(rt, k, {1, 1, 1}, x.slice(0, 1, 4), y.slice(0, 0, 3), 1.0f);
  cubecc::Graph graph = rt.end_capture();
  rt.replay(graph);
  rt.replay(graph);
  EXPECT_EQ(rt.download<float>(y.buffer()), (std::vector<float>{4, 6, 8, 0}));
}

//===- DLPack ----------------------------------------------------------------------------===//

struct HostDlpack {
  DLManagedTensor managed{};
  int64_t shape[2];
  int64_t strides[2];
  bool *deleted;
};

TEST(TensorDlpack, a_strided_dlpack_tensor_becomes_a_strided_tensor_without_a_copy) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  // A 3 x 4 view with a row stride of 8 over the framework's 24 floats.
  std::vector<float> mine(24);
  for (size_t i = 0; i < mine.size(); ++i)
    mine[i] = float(i);
  bool deleted = false;
  auto *h = new HostDlpack{{}, {3, 4}, {8, 1}, &deleted};
  DLTensor &t = h->managed.dl_tensor;
  t.data = mine.data();
  t.device = {kDLCPU, 0};
  t.ndim = 2;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = h->shape;
  t.strides = h->strides;
  h->managed.manager_ctx = h;
  h->managed.deleter = [](DLManagedTensor *self) {
    auto *owner = static_cast<HostDlpack *>(self->manager_ctx);
    *owner->deleted = true;
    delete owner;
  };
  {
    cubecc::Tensor x = cubecc::tensor_from_dlpack(rt, &h->managed);
    EXPECT_EQ(std::vector<uint64_t>(x.shape().begin(), x.shape().end()),
              (std::vector<uint64_t>{3, 4}));
    EXPECT_EQ(std::vector<uint64_t>(x.strides().begin(), x.strides().end()),
              (std::vector<uint64_t>{8, 1}));
    EXPECT_EQ(x.buffer().size(), 2 * 8 + 4u); // the elements the view reaches
    auto k = cubecc::kernel<scale_2d>(rt, "scale_2d", {.workgroup = {8, 8, 1}});
    cubecc::Tensor y(rt.allocate<float>(12), {3, 4});
    cubecc::launch(rt, k, cubecc::grid_for({4, 3}, k), x, y, 3.0);
    std::vector<float> got = rt.download<float>(y.buffer());
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < 4; ++j)
        ASSERT_EQ(got[i * 4 + j], 3.0f * mine[i * 8 + j]) << i << "," << j;
    EXPECT_FALSE(deleted);
  }
  rt.synchronize();
  EXPECT_TRUE(deleted);
}

TEST(TensorDlpack, a_view_is_exported_with_its_shape_strides_and_offset) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  std::vector<float> host(12);
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = float(i) * 0.5f;
  cubecc::Tensor m(rt.upload(host), {3, 4});
  DLManagedTensor *out = cubecc::tensor_to_dlpack(rt, m.slice(1, 1, 3).transpose(0, 1));
  const DLTensor &t = out->dl_tensor;
  ASSERT_EQ(t.ndim, 2);
  EXPECT_EQ(t.shape[0], 2);
  EXPECT_EQ(t.shape[1], 3);
  EXPECT_EQ(t.strides[0], 1);
  EXPECT_EQ(t.strides[1], 4);
  EXPECT_EQ(t.byte_offset, sizeof(float));
  EXPECT_EQ(t.device.device_type, kDLCPU);
  // The framework reads element (j, i) of the transposed view: host element (i, 1 + j).
  const auto *base = static_cast<const char *>(t.data) + t.byte_offset;
  for (int64_t j = 0; j < 2; ++j)
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(reinterpret_cast<const float *>(base)[j * t.strides[0] + i * t.strides[1]],
                host[i * 4 + 1 + j]);
  m = cubecc::Tensor(); // the exported tensor keeps the memory alive
  EXPECT_EQ(reinterpret_cast<const float *>(base)[0], host[1]);
  out->deleter(out);
}

TEST(TensorDlpack, a_tensor_of_another_device_is_unsupported) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  int64_t shape[1] = {4};
  float data[4] = {};
  DLManagedTensor managed{};
  managed.dl_tensor.data = data;
  managed.dl_tensor.device = {kDLCUDA, 0};
  managed.dl_tensor.ndim = 1;
  managed.dl_tensor.dtype = {kDLFloat, 32, 1};
  managed.dl_tensor.shape = shape;
  cubecc::ErrorKind kind{};
  EXPECT_THAT(error_of([&] { (void)cubecc::tensor_from_dlpack(rt, &managed); }, &kind),
              HasSubstr("cubecc::tensor_from_dlpack: the tensor is on kDLCUDA"));
  EXPECT_EQ(kind, cubecc::ErrorKind::Unsupported);
}

TEST(TypedLaunch, streams_take_typed_launches_from_their_own_threads) {
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      cubecc::Stream stream = rt.create_stream();
      cubecc::Tensor y = stream.upload(std::vector<float>{float(t), 2});
      cubecc::launch<registered_negate>(stream, {1, 1, 1}, y);
      auto k = cubecc::kernel<times_ten>(stream, "times_ten", {.workgroup = {64, 1, 1}});
      cubecc::launch(stream, k, {1, 1, 1}, y);
      results[t] = stream.download<float>(y.buffer());
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(results[t], (std::vector<float>{-10.0f * float(t), -20})) << "thread " << t;
  EXPECT_EQ(rt.cache_statistics().traces, 2u) << "each kernel traced once for all threads";
}

TEST(GridFor, covers_the_invocations_with_the_kernels_workgroup) {
  EXPECT_EQ(cubecc::grid_for({1000}, {256, 1, 1}), (std::array<uint32_t, 3>{4, 1, 1}));
  EXPECT_EQ(cubecc::grid_for({1024, 5}, {256, 2, 1}), (std::array<uint32_t, 3>{4, 3, 1}));
  EXPECT_EQ(cubecc::grid_for({0, 1, 17}, {8, 8, 4}), (std::array<uint32_t, 3>{0, 1, 5}));
  cubecc::Runtime rt = cubecc::Runtime::open("interp");
  auto k = cubecc::kernel<scale_2d>(rt, "scale_2d", {.workgroup = {8, 4, 1}});
  EXPECT_EQ(cubecc::grid_for({20, 20}, k), (std::array<uint32_t, 3>{3, 5, 1}));
  cubecc::Tensor t(rt.allocate<float>(1000), {10, 100});
  EXPECT_EQ(cubecc::grid_for(t, 256), (std::array<uint32_t, 3>{4, 1, 1}));
  EXPECT_EQ(cubecc::grid_for(t, k), (std::array<uint32_t, 3>{125, 1, 1}));
  EXPECT_THAT(error_of([] {
                (void)cubecc::grid_for({uint64_t{1} << 40}, {1, 1, 1});
              }),
              HasSubstr("need 1099511627776 workgroups, more than a launch can have"));
  EXPECT_THAT(error_of([] {
                (void)cubecc::grid_for({1, 1, 1, 1}, {1, 1, 1});
              }),
              HasSubstr("1 to 3 axes"));
}

} // namespace
