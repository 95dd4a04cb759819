// EXPECT: cubecc: operands have different types
// dsl::atan2 of an f32 and an f64: the operands must have one type (convert with dsl::cast).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y, dsl::Tensor<const double> x) {
  auto i = dsl::global_id().x;
  y[i] = dsl::atan2(y[i], x[i]);
}
