// EXPECT: cubecc: cannot store to read-only memory
// A vector load from a Tensor<const float> stored back to the same read-only tensor (instead of
// the writable output).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x, dsl::Tensor<float> y) {
  dsl::Val<uint32_t> base = dsl::global_id().x * 4u;
  auto v = x.load<4>(base);
  x.store<4>(base, v * 2.0f);
}
