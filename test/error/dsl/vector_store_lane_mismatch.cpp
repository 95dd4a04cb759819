// EXPECT: cubecc: operands have different types
// A 2-lane vector stored with store<4>: the lane counts of the value and the store differ.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x, dsl::Tensor<float> y) {
  dsl::Val<uint32_t> base = dsl::global_id().x * 4u;
  auto v = x.load<2>(base);
  y.store<4>(base, v);
}
