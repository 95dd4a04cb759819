// EXPECT: cubecc: cannot store to read-only memory
// An element of a Tensor<const float> (read-only) assigned to.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x) {
  auto i = dsl::global_id().x;
  x[i] = 0.0f;
}
