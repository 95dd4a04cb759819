// EXPECT: cubecc: no target has this mma shape
// An f16 A times an int8 B: a pair no hardware multiplies.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const dsl::f16> a, dsl::Tensor<const int8_t> b) {
  auto d = dsl::mma(dsl::MatrixA<dsl::f16, 16, 32>::load(a, 0u, 32u),
                    dsl::MatrixB<int8_t, 32, 8>::load(b, 0u, 8u),
                    dsl::Accumulator<float, 16, 8>::fill(0.0f));
  (void)d;
}
