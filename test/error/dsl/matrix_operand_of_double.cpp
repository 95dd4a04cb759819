// EXPECT: cubecc: a MatrixA or MatrixB holds f16, bf16, e4m3, e5m2, int8_t, uint8_t or float
// An A operand of f64: tensor cores multiply tf32, 16-bit and 8-bit floats and 8-bit integers.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const double> a) {
  auto ma = dsl::MatrixA<double, 16, 8>::load(a, 0u, 8u);
  (void)ma;
}
