// EXPECT: barrier_in_divergent_if.cpp:18:
// EXPECT: error: 'barrier' in kernel @kernel: is reached under control flow that depends on the
// MODE: trace
// A barrier under an if_ on the invocation's global id: the invocations that skip the branch never
// reach it. The verifier's error names this file and the line of the barrier call.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> data) {
  dsl::Shared<float, 64> tile;
  auto l = dsl::local_index();
  tile[l] = data[l];
  dsl::if_(dsl::global_id().x < 32u, [&] {
    dsl::barrier();
    data[l] = tile[63u - l];
  });
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel", {.workgroup = {64, 1, 1}});
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
