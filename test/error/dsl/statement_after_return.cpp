// EXPECT: statement_after_return.cpp:16:
// EXPECT: error: in kernel @kernel: this statement follows a break_, continue_ or return_ in the same
// MODE: trace
// A store after dsl::return_() in the same branch: it can never run.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> data) {
  auto i = dsl::global_id().x;
  dsl::if_(i >= data.size(), [&] {
    dsl::return_();
    data[0u] = 0.0f;
  });
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
