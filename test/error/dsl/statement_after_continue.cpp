// EXPECT: statement_after_continue.cpp:18:
// EXPECT: error: in kernel @kernel: this statement follows a break_, continue_ or return_ in the same
// MODE: trace
// A store after dsl::continue_() in the same while_ body: it can never run.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> data) {
  dsl::Var<uint32_t> n = data[0u];
  dsl::while_([&] { return n > 1u; },
              [&] {
                n = n / 2u;
                dsl::continue_();
                data[n] = 0u;
              });
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
