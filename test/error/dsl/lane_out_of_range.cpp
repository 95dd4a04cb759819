// EXPECT: cubecc: vector lane out of range
// lane<4>() of a 4-lane vector (lanes are 0 to 3).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x, dsl::Tensor<float> y) {
  dsl::Val<uint32_t> base = dsl::global_id().x * 4u;
  auto v = x.load<4>(base);
  y[base] = v.lane<4>();
}
