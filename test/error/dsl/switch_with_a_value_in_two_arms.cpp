// EXPECT: switch_with_a_value_in_two_arms.cpp:16:
// EXPECT: switch_ has two case_ arms for 5
// MODE: trace
// A value listed in a case_ of several values and again in a later arm: that arm could never run
// for it.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> y) {
  auto i = dsl::global_id().x;
  dsl::switch_(y[i], dsl::case_({1, 5}, [&] { y[i] = 1u; }),
               dsl::case_({4, 5}, [&] { y[i] = 3u; }));
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel", {.workgroup = {64, 1, 1}});
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
