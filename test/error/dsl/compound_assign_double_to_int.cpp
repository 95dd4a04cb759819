// EXPECT: cubecc: a C++ floating-point number meets an integer kernel value
// += 0.5 on an int32_t tensor element.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<int32_t> y) {
  auto i = dsl::global_id().x;
  y[i] += 0.5;
}
