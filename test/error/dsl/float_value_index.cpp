// EXPECT: cubecc: indices must be integer scalars
// A float kernel value used as a tensor index.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x, dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::Val<float> where = x[i];
  y[where] = 1.0f;
}
