// EXPECT: cubecc: mma multiplies M x K by K x N into M x N: the shapes do not fit
// A 16x16 A operand times a B operand of 32 rows.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const dsl::e4m3> a, dsl::Tensor<float> c) {
  auto ma = dsl::MatrixA<dsl::e4m3, 16, 16>::load(a, 0u, 16u);
  auto mb = dsl::MatrixB<dsl::e4m3, 32, 16>::load(a, 0u, 16u);
  auto mc = dsl::mma(ma, mb, dsl::Accumulator<float, 16, 16>::fill(0.0f));
  mc.store(c, 0u, 16u);
}
