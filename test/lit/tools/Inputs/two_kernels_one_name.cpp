// Two kernels registered under one name (test/lit/tools/cubecc-kernel-fails-to-trace.test).
#include <cubecc/dsl.h>
namespace dsl = cubecc::dsl;
void k(dsl::Tensor<float> y) {
  y[dsl::global_id().x] = 1.0f;
}
void k2(dsl::Tensor<float> y) {
  y[dsl::global_id().x] = 2.0f;
}
static const bool a = dsl::register_kernel<k>("k", "", {.workgroup = {64, 1, 1}});
static const bool b = dsl::register_kernel<k2>("k", "", {.workgroup = {64, 1, 1}});
