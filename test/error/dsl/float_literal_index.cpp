// EXPECT: cubecc: indices must be integers (a float index?
// A C++ float used as a tensor index.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  y[1.5f] = 1.0f;
}
