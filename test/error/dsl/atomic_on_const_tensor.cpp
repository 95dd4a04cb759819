// EXPECT: cubecc: atomics write memory: the tensor must not be const
// An atomic add on an element of a read-only tensor.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const uint32_t> counts) {
  auto i = dsl::global_id().x;
  dsl::atomic_add(counts[i % 16u], 1u);
}
