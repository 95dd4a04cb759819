// EXPECT: cubecc: for_'s body must take the loop index as dsl::Val<T>
// A for_ body taking a plain C++ integer: the index is a kernel value, known only at run time.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> y) {
  dsl::for_(0u, 4u, [&](uint32_t k) { y[k] = 0.0f; });
}
