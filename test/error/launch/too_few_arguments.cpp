// EXPECT: cubecc: too few launch arguments: give one per parameter of the kernel function
// EXPECT: auto F = axpy
// The scalar `a` is missing.
#include <cubecc/cubecc.hpp>

namespace dsl = cubecc::dsl;

void axpy(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = a * x[i] + y[i]; });
}

void run(cubecc::Runtime &rt, cubecc::Tensor x, cubecc::Tensor y) {
  auto k = cubecc::kernel<axpy>(rt, "axpy", {.workgroup = {256, 1, 1}});
  cubecc::launch(rt, k, {1, 1, 1}, x, y);
}
