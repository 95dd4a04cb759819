// EXPECT: cubecc: negation and abs need a signed integer or a float, not an unsigned one
// Unary minus on a uint32_t value.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> y) {
  auto i = dsl::global_id().x;
  y[i] = -i;
}
