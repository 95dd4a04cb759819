// EXPECT: cubecc: this math function needs a float value
// dsl::is_nan of an integer: only floats have NaNs.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<int32_t> y) {
  auto i = dsl::global_id().x;
  dsl::if_(dsl::is_nan(y[i]), [&] { y[i] = 0; });
}
