// EXPECT: cubecc: the memory's element type must be the matrix's
// An f16 A operand loaded from a bf16 tensor.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const dsl::bf16> a) {
  auto ma = dsl::MatrixA<dsl::f16, 16, 16>::load(a, 0u, 16u);
  (void)ma;
}
