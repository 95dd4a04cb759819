// EXPECT: cubecc: a MatrixA or MatrixB holds f16, bf16, e4m3, e5m2, int8_t or uint8_t
// An A operand of f32: tensor cores multiply 16-bit and 8-bit floats.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> a) {
  auto ma = dsl::MatrixA<float, 16, 16>::load(a, 0u, 16u);
  (void)ma;
}
