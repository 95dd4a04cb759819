// EXPECT: atomic_and_on_float.cpp:14:
// EXPECT: error: 'atomic.and' in kernel @kernel: works on integer types, not f32
// MODE: trace
// A bitwise atomic on a float tensor element.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> data) {
  auto i = dsl::global_id().x;
  dsl::atomic_and(data[i % 4u], 1.0f);
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
