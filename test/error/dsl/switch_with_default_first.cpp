// EXPECT: cubecc: switch_ takes at most one default_, as its last arm
// A default_ before a case_: it would make the case unreachable.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> y) {
  auto i = dsl::global_id().x;
  dsl::switch_(y[i], dsl::default_([&] { y[i] = 0u; }), dsl::case_(1, [&] { y[i] = 1u; }));
}
