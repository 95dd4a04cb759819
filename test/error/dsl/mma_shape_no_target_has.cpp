// EXPECT: cubecc: no target has this mma shape
// A 16x16x32 product of f16 operands: 32-deep shapes exist for fp8 only.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const dsl::f16> a, dsl::Tensor<float> c) {
  auto ma = dsl::MatrixA<dsl::f16, 16, 32>::load(a, 0u, 32u);
  auto mb = dsl::MatrixB<dsl::f16, 32, 16>::load(a, 0u, 16u);
  auto mc = dsl::mma(ma, mb, dsl::Accumulator<float, 16, 16>::fill(0.0f));
  mc.store(c, 0u, 16u);
}
