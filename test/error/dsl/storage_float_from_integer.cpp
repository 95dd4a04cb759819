// EXPECT: cubecc: storage floats (e4m3, e5m2, e2m1, ue8m0) convert to and from float types only
// An integer straight to e5m2: cast it to float first (one rounding either way for small ints).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const int32_t> a, dsl::Tensor<dsl::e5m2> out) {
  auto i = dsl::global_id().x;
  out[i] = dsl::cast<dsl::e5m2>(a[i]);
}
