// EXPECT: cubecc: atomic_compare_exchange works on one element
// A vector atomic is one atomic per lane; a compare-exchange of several lanes is not one.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> y) {
  auto i = dsl::global_id().x;
  dsl::Val<dsl::Vec<uint32_t, 2>> v = y.load<2>(i * 2u);
  dsl::atomic_compare_exchange(y[i * 2u], v, v);
}

int main() {
  return dsl::trace<kernel>("kernel", {.workgroup = {64, 1, 1}}).module ? 0 : 1;
}
