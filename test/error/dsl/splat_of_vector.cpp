// EXPECT: cubecc: dsl::splat takes a scalar
// dsl::splat of a value that is already a vector.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x, dsl::Tensor<float> y) {
  dsl::Val<uint32_t> base = dsl::global_id().x * 4u;
  auto v = x.load<4>(base);
  auto w = dsl::splat<4>(v);
  y.store<4>(base, w);
}
