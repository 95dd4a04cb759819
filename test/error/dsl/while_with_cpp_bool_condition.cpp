// EXPECT: cubecc: while_'s condition must be a function returning a kernel bool
// A while_ condition that returns a C++ bool (known while tracing).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> y) {
  dsl::Var<uint32_t> n = y[0u];
  dsl::while_([&] { return true; }, [&] { n = n / 2u; });
  y[0u] = n;
}
