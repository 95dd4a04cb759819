// EXPECT: cubecc: dsl::view<U> needs U as wide as 1, 2, 4, 8 or 16 of the memory's elements
// A uint32_t tensor viewed as bytes: a byte store would rewrite its neighbours. Load the word and
// dsl::bitcast it to a Vec<uint8_t, 4> instead.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> words) {
  auto bytes = dsl::view<uint8_t>(words);
  bytes[dsl::global_id().x] = uint8_t{0};
}
