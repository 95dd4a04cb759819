// EXPECT: cubecc: cannot store a matrix to read-only memory
// A matrix stored to a tensor declared with a const element type.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> c) {
  dsl::Accumulator<float, 16, 16>::fill(1.0f).store(c, 0u, 16u);
}
