// EXPECT: cubecc: dsl::cast keeps the lane count
// dsl::cast of a Vec<float, 4> to a scalar int32_t.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x, dsl::Tensor<int32_t> y) {
  dsl::Val<uint32_t> base = dsl::global_id().x * 4u;
  auto v = x.load<4>(base);
  y[base] = dsl::cast<int32_t>(v);
}
