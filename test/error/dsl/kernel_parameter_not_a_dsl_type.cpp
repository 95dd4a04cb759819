// EXPECT: cubecc: kernel parameters are
// A kernel parameter of plain C++ type float: kernel parameters are dsl::Tensor, dsl::Array or
// dsl::Scalar (here dsl::Scalar<float>).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y, float a) {
  auto i = dsl::global_id().x;
  y[i] = y[i] * a;
}

static const bool registered = dsl::register_kernel<kernel>("kernel");
