// EXPECT: cubecc: for_'s body takes the loop index
// A for_ body that takes no index.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  dsl::for_(0u, 4u, [&] { y[0u] = 0.0f; });
}
