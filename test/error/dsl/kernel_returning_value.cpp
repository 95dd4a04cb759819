// EXPECT: cubecc: trace<F> takes a kernel function (returning void)
// A kernel function that returns a value.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

int kernel(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  y[i] = 0.0f;
  return 0;
}

static const bool registered = dsl::register_kernel<kernel>("kernel");
