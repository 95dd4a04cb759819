// EXPECT: cubecc: no target has this mma shape
// float (tf32) operands multiply 8 deep (16x8x8, 16x16x8), not 16.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> a, dsl::Tensor<float> c) {
  auto ma = dsl::MatrixA<float, 16, 16>::load(a, 0u, 16u);
  auto mb = dsl::MatrixB<float, 16, 8>::load(a, 0u, 8u);
  auto mc = dsl::mma(ma, mb, dsl::Accumulator<float, 16, 8>::fill(0.0f));
  mc.store(c, 0u, 8u);
}
