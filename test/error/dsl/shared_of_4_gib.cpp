// EXPECT: cubecc: this Shared<T, N> is larger than the 227 KiB of shared memory
// A Shared<float, 1073741824> array: 4 GiB, which a 32-bit byte count wraps to 0; the size is
// computed in size_t, so it is refused like any array over 227 KiB.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  dsl::Shared<float, 1073741824> tile;
  auto l = dsl::local_index();
  tile[l] = y[l];
  dsl::barrier();
  y[l] = tile[l + 1u];
}
