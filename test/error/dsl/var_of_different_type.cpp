// EXPECT: cubecc: operands have different types
// A float Var initialized from a uint32_t value (no implicit conversions between kernel types).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::Var<float> acc = i;
  y[i] = acc;
}
