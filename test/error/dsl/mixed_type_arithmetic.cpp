// EXPECT: cubecc: operands have different types
// A float value plus an int32_t value: one operator's operands have one type.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x, dsl::Tensor<const int32_t> n, dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::Val<float> f = x[i];
  dsl::Val<int32_t> k = n[i];
  y[i] = f + k;
}
