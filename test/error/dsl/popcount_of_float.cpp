// EXPECT: cubecc: bit counting, mulhi and saturating arithmetic need integers
// dsl::popcount of a float: count the bits of dsl::bitcast<uint32_t>(x) instead.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> x, dsl::Tensor<int32_t> y) {
  auto i = dsl::global_id().x;
  y[i] = dsl::cast<int32_t>(dsl::popcount(x[i]));
}
