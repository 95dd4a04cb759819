// EXPECT: statement_after_break.cpp:15:
// EXPECT: error: in kernel @kernel: this statement follows a break_, continue_ or return_ in the same
// MODE: trace
// A store after dsl::break_() in the same loop body: it can never run.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> data) {
  dsl::for_(0u, data.size(), [&](dsl::Val<uint32_t> k) {
    dsl::break_();
    data[k] = 0.0f;
  });
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
