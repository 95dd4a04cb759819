// EXPECT: break_outside_loop.cpp:16:
// EXPECT: error: in kernel @kernel: break_ is outside any for_ or while_ body
// MODE: trace
// dsl::break_() in an if_ that is not inside any loop (a C++ for does not count: it is unrolled
// while tracing).
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> data) {
  auto i = dsl::global_id().x;
  for (uint32_t k = 0; k < 4; ++k) {
    dsl::if_(data[i * 4u + k] < 0.0f, [&] { dsl::break_(); });
  }
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
