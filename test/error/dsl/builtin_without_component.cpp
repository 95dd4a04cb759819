// EXPECT: cubecc: this is not a kernel value or a C++ number
// dsl::global_id() (all three components) used as an index value: .x was meant.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  dsl::Val<uint32_t> i = dsl::global_id();
  y[i] = 0.0f;
}
