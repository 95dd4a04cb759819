// Two kernels for test/lit/tools/cubecc-kernel-fails-to-trace.test: `bad` fails to trace (a barrier
// under a branch on the invocation), `good` does not.
#include <cubecc/dsl.h>
namespace dsl = cubecc::dsl;

void good(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  y[i] = y[i] * 2.0f;
}

void bad(dsl::Tensor<float> data) {
  dsl::Shared<float, 64> tile;
  auto l = dsl::local_index();
  tile[l] = data[l];
  dsl::if_(dsl::global_id().x < 32u, [&] {
    dsl::barrier();
    data[l] = tile[63u - l];
  });
}

static const bool registered = dsl::register_kernel<good>("good") &&
                               dsl::register_kernel<bad>("bad", {.workgroup = {64, 1, 1}});
