// EXPECT: continue_outside_loop.cpp:15:
// EXPECT: error: in kernel @kernel: continue_ is outside any for_ or while_ body
// MODE: trace
// dsl::continue_() directly in the kernel body.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> data) {
  auto i = dsl::global_id().x;
  data[i] = 1.0f;
  dsl::continue_();
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
