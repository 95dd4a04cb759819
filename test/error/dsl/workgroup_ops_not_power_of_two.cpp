// EXPECT: cubecc: WorkgroupOps<T, N> needs N, the workgroup size, to be a power of two
// WorkgroupOps over 48 invocations: its trees and scans need a power of two.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::WorkgroupOps<float, 48> wg;
  y[i] = wg.reduce(y[i], dsl::plus);
}
