// EXPECT: cubecc: a C++ bool meets a kernel value that is not bool
// A C++ true stored into a uint32_t tensor element.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> y) {
  auto i = dsl::global_id().x;
  y[i] = true;
}
