// EXPECT: cubecc: launch argument 0 does not fit kernel parameter 0
// EXPECT: cubecc: the tensor's rank is not the parameter's
// EXPECT: Parameter = cubecc::dsl::Tensor<const float>
// EXPECT: Argument = cubecc::TypedTensor<float, 2>
// A 2-D tensor for a 1-D Tensor parameter.
#include <cubecc/cubecc.hpp>

namespace dsl = cubecc::dsl;

void axpy(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = a * x[i] + y[i]; });
}

void run(cubecc::Runtime &rt, cubecc::TypedTensor<float, 2> x, cubecc::TypedTensor<float> y) {
  auto k = cubecc::kernel<axpy>(rt, "axpy", {.workgroup = {256, 1, 1}});
  cubecc::launch(rt, k, {1, 1, 1}, x, y, 2.0f);
}
