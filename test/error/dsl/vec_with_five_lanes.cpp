// EXPECT: cubecc: Vec<T, N> needs N = 2, 3, 4, 8 or 16 lanes
// A vector load of 5 lanes: vectors have 2, 3, 4, 8 or 16.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x, dsl::Tensor<float> y) {
  dsl::Val<uint32_t> base = dsl::global_id().x * 5u;
  dsl::Val<dsl::Vec<float, 5>> v = x.load<5>(base);
  y.store<5>(base, v);
}
