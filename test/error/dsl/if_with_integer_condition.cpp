// EXPECT: cubecc: if_'s condition must be bool
// dsl::if_ on a uint32_t value instead of a comparison.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> y) {
  auto i = dsl::global_id().x;
  dsl::if_(y[i], [&] { y[i] = 0u; });
}
