// EXPECT: barrier_in_loop_with_varying_bound.cpp:18:
// EXPECT: error: 'barrier' in kernel @kernel: is reached under control flow that depends on the
// MODE: trace
// A barrier in a for_ whose bound is the invocation's global id: invocations run different numbers
// of iterations, so they do not all reach each barrier.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> data) {
  dsl::Shared<float, 64> tile;
  auto l = dsl::local_index();
  dsl::for_(0u, dsl::global_id().x, [&](dsl::Val<uint32_t> k) {
    tile[l] = data[k];
    dsl::barrier();
    data[k] = tile[63u - l];
  });
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel", {.workgroup = {64, 1, 1}});
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
