// EXPECT: cubecc: && and || need bool operands
// && on two uint32_t values (C's "nonzero is true" does not apply to kernel values).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> flags) {
  auto i = dsl::global_id().x;
  dsl::if_(flags[i] && i, [&] { flags[i] = 0u; });
}
