// EXPECT: cubecc: lane<L>() needs a vector value
// lane<0>() of a scalar float value.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::Val<float> s = y[i];
  y[i] = s.lane<0>();
}
