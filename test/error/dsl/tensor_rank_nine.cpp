// EXPECT: cubecc: tensors have 1 to 8 dimensions
// A tensor of rank 9.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float, 9> y) {
  y[0u] = 0.0f;
}
