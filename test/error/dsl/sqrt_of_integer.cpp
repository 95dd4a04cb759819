// EXPECT: cubecc: this math function needs a float value
// dsl::sqrt of an int32_t value.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<int32_t> y) {
  auto i = dsl::global_id().x;
  y[i] = dsl::sqrt(y[i]);
}
