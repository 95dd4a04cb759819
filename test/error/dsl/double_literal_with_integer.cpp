// EXPECT: cubecc: a C++ floating-point number meets an integer kernel value
// A C++ double (2.5) meets a uint32_t value: a literal adopts the value's type, and an integer
// type cannot hold 2.5.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> y) {
  auto i = dsl::global_id().x;
  y[i] = i * 2.5;
}
