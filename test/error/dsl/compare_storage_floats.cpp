// EXPECT: cubecc: e4m3, e5m2, e2m1 and ue8m0 are storage formats: compute in float
// Comparing two e5m2 values: compare their float values (or dsl::bitcast<uint8_t> encodings).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const dsl::e5m2> a, dsl::Tensor<uint32_t> out) {
  auto i = dsl::global_id().x;
  dsl::Val<dsl::e5m2> x = a[i];
  dsl::if_(x < x, [&] { out[i] = 1u; });
}
