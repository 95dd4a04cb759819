// EXPECT: else_not_after_if.cpp:16:
// EXPECT: error: in kernel @kernel: else_ must directly follow its if_
// MODE: trace
// The handle of an if_ kept and its else_ attached after another statement.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> data) {
  auto i = dsl::global_id().x;
  auto branch = dsl::if_(i < 16u, [&] { data[i] = 1.0f; });
  data[i + 16u] = 0.0f;
  branch.else_([&] { data[i] = 2.0f; });
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
