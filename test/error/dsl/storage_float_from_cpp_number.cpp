// EXPECT: cubecc: a C++ number meets a storage float (e4m3, e5m2, e2m1, ue8m0)
// Storing 0.5f into an e4m3 tensor: convert a float kernel value with dsl::cast<dsl::e4m3>.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<dsl::e4m3> out) {
  auto i = dsl::global_id().x;
  out[i] = 0.5f;
}
