// EXPECT: cubecc: launch argument 1 does not fit kernel parameter 1
// EXPECT: cubecc: a dsl::Tensor or dsl::Array parameter takes a cubecc::Tensor, a cubecc::TypedTensor or a Buffer, not a value
// EXPECT: Argument = unsigned int
// The kernel registered for axpy, with a shape where a tensor goes.
#include <cubecc/cubecc.hpp>

namespace dsl = cubecc::dsl;

void axpy(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = a * x[i] + y[i]; });
}

void run(cubecc::Runtime &rt, cubecc::Tensor x, uint32_t n) {
  cubecc::launch<axpy>(rt, {1, 1, 1}, x, n, 2.0f);
}
