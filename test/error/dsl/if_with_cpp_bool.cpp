// EXPECT: cubecc: if_ needs a kernel bool condition
// dsl::if_ on a C++ bool, which is known while tracing: a plain C++ if is meant.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

constexpr bool kEnabled = true;

void kernel(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::if_(kEnabled, [&] { y[i] = 0.0f; });
}
