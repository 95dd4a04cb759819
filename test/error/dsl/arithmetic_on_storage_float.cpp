// EXPECT: cubecc: e4m3, e5m2, e2m1 and ue8m0 are storage formats: compute in float
// Adding two e4m3 values: convert them with dsl::cast<float> first, and back to store.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const dsl::e4m3> a, dsl::Tensor<dsl::e4m3> out) {
  auto i = dsl::global_id().x;
  dsl::Val<dsl::e4m3> x = a[i];
  out[i] = x + x;
}
