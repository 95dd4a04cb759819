// EXPECT: cubecc: for_carry carries dsl::Val<T>, dsl::Matrix and std::array or std::tuple
// A C++ float as the carried value: it is comptime, so it cannot change per iteration.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> out) {
  auto s = dsl::for_carry(0u, 4u, 0.0f, [&](dsl::Val<uint32_t>, const float &acc) { return acc; });
  out[0u] = s;
}
