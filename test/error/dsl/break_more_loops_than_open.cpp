// EXPECT: break_more_loops_than_open.cpp:15:
// EXPECT: error: in kernel @kernel: break_(3) leaves 3 loops, but 2 are open here
// MODE: trace
// dsl::break_(3) inside two loops: there is no third loop to leave.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> data) {
  dsl::for_(0u, 4u, [&](dsl::Val<uint32_t> a) {
    dsl::for_(0u, 4u, [&](dsl::Val<uint32_t> b) {
      dsl::if_(data[a * 4u + b] < 0.0f, [&] { dsl::break_(3); });
    });
  });
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
