// A DSL source that defines a kernel but registers none
// (test/lit/tools/cubecc-kernel-fails-to-trace.test).
#include <cubecc/dsl.h>
namespace dsl = cubecc::dsl;
void k(dsl::Tensor<float> y) {
  y[dsl::global_id().x] = 1.0f;
}
