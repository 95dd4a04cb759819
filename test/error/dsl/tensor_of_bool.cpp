// EXPECT: cubecc: Tensor<T> holds scalars (bool: use uint8_t)
// A Tensor<bool> parameter: buffers of bool have no memory layout; use uint8_t.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<bool> flags) {
  auto i = dsl::global_id().x;
  flags[i] = i < 10u;
}
