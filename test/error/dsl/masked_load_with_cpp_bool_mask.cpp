// EXPECT: cubecc: dsl::load's mask must be a kernel bool
// A masked load whose mask is a C++ bool: it is comptime, so the load is either plain or absent.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x, dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  y[i] = dsl::load(x, i, true, 0.0f);
}
