// EXPECT: cubecc: this Shared<T, N> is larger than the 48 KiB of shared memory
// A Shared<float, 12289> array: 49156 bytes, four more than the 48 KiB a kernel may declare.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  dsl::Shared<float, 12289> tile;
  auto l = dsl::local_index();
  tile[l] = y[l];
  dsl::barrier();
  y[l] = tile[l + 1u];
}
