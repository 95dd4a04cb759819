// EXPECT: cubecc: integer matrices are only loaded, multiplied and stored
// An int32 accumulator converted into an int8 operand (no target requantizes fragments).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const int32_t> c) {
  auto acc = dsl::Accumulator<int32_t, 16, 16>::load(c, 0u, 16u);
  auto a = dsl::convert<dsl::MatrixA<int8_t, 16, 16>>(acc);
  (void)a;
}
