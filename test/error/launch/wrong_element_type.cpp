// EXPECT: cubecc: launch argument 1 does not fit kernel parameter 1
// EXPECT: cubecc: the tensor's element type is not the parameter's
// EXPECT: Parameter = cubecc::dsl::Tensor<float>
// EXPECT: Argument = cubecc::TypedTensor<int>
// A tensor of int32_t for a Tensor<float> parameter.
#include <cubecc/cubecc.hpp>

namespace dsl = cubecc::dsl;

void axpy(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = a * x[i] + y[i]; });
}

void run(cubecc::Runtime &rt, cubecc::TypedTensor<float> x, cubecc::TypedTensor<int32_t> y) {
  auto k = cubecc::kernel<axpy>(rt, "axpy", {.workgroup = {256, 1, 1}});
  cubecc::launch(rt, k, {1, 1, 1}, x, y, 2.0f);
}
