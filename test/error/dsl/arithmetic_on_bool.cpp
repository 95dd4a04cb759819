// EXPECT: cubecc: arithmetic and ordering need numbers, not bool
// Adding two comparison results (bool values).
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> y) {
  auto i = dsl::global_id().x;
  dsl::Val<bool> a = i < 10u;
  dsl::Val<bool> b = i > 2u;
  dsl::Val<bool> both = a + b;
  dsl::if_(both, [&] { y[i] = 1u; });
}
