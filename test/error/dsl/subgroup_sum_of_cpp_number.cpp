// EXPECT: cubecc: subgroup operations take kernel values
// dsl::subgroup_sum of a C++ number (the same in every lane: multiply by the subgroup size).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  y[i] = dsl::subgroup_sum(1.0f);
}
