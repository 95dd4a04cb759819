// EXPECT: cubecc: operands have different types
// dsl::add_sat of an int32_t and a uint32_t: saturating arithmetic has one type (cast one side).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<int32_t> x, dsl::Tensor<uint32_t> y) {
  auto i = dsl::global_id().x;
  x[i] = dsl::add_sat(x[i], y[i]);
}
