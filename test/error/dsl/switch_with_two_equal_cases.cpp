// EXPECT: switch_with_two_equal_cases.cpp:14:
// EXPECT: switch_ has two case_ arms for 2
// MODE: trace
// Two case_ arms with one value: the second could never run.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> y) {
  auto i = dsl::global_id().x;
  dsl::switch_(y[i], dsl::case_(2, [&] { y[i] = 1u; }), dsl::case_(2, [&] { y[i] = 3u; }));
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel", {.workgroup = {64, 1, 1}});
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
