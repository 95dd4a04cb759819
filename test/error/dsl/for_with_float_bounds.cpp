// EXPECT: cubecc: for_ bounds must be integers
// A for_ loop from 0.0f to a float value.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y, dsl::Scalar<float> n) {
  dsl::for_(0.0f, n, [&](auto k) { y[0u] = k; });
}
