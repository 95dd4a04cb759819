// EXPECT: cubecc: launch argument 2 does not fit kernel parameter 2
// EXPECT: cubecc: the scalar argument does not convert to the parameter's type without narrowing
// EXPECT: Parameter = cubecc::dsl::Scalar<float>
// EXPECT: Argument = double
// A double for a Scalar<float> parameter (write 2.0f).
#include <cubecc/cubecc.hpp>

namespace dsl = cubecc::dsl;

void axpy(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = a * x[i] + y[i]; });
}

void run(cubecc::Runtime &rt, cubecc::Tensor x, cubecc::Tensor y) {
  auto k = cubecc::kernel<axpy>(rt, "axpy", {.workgroup = {256, 1, 1}});
  cubecc::launch(rt, k, {1, 1, 1}, x, y, 2.0);
}
