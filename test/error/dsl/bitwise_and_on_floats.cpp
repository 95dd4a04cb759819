// EXPECT: cubecc: bitwise operators need integers or bool, not floats
// & on two float values (a mask on the bits? use dsl::bitcast<uint32_t> first).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x, dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  y[i] = x[i] & y[i];
}
