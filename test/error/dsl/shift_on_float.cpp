// EXPECT: cubecc: shifts and % on integers only
// A left shift of a float value.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::Val<float> s = y[i];
  y[i] = s << 1.0f;
}
