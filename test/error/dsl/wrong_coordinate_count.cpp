// EXPECT: cubecc: give one coordinate per tensor dimension
// A rank-2 tensor indexed with three coordinates.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float, 2> y) {
  auto id = dsl::global_id();
  y(id.x, id.y, 0u) = 0.0f;
}
