// EXPECT: cubecc: this Shared<T, N> is larger than the 227 KiB of shared memory
// A Shared<float, 58113> array: 232452 bytes, four more than the 227 KiB of the largest target
// (CUDA sm_90 with the opt-in).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  dsl::Shared<float, 58113> tile;
  auto l = dsl::local_index();
  tile[l] = y[l];
  dsl::barrier();
  y[l] = tile[l + 1u];
}
