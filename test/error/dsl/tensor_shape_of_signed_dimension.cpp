// EXPECT: cubecc: a runtime tensor dimension is a uint32_t
// t.shape(d) with an int32_t dimension: dimensions are uint32_t values.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float, 2> t, dsl::Tensor<int32_t> dims) {
  auto i = dsl::global_id().x;
  dsl::Val<int32_t> d = dims[i];
  t[i] = dsl::cast<float>(t.shape(d));
}
