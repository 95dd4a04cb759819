// EXPECT: cubecc: dsl::select's condition must be bool
// dsl::select on a uint32_t value instead of a comparison.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y, dsl::Tensor<const uint32_t> mask) {
  auto i = dsl::global_id().x;
  y[i] = dsl::select(mask[i], y[i], 0.0f);
}
