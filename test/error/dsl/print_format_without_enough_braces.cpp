// EXPECT: print_format_without_enough_braces.cpp:15:
// EXPECT: print("i = {}\n", ...): the format has 1 '{}' for 2 operand(s)
// MODE: trace
// Two values for a format with one '{}': the trace stops at the print's line (the verifier would
// refuse the op later, far from the call).
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> data) {
  auto i = dsl::global_id().x;
  dsl::if_(i < data.size(), [&] { dsl::print("i = {}\n", i, data[i]); });
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel", {.workgroup = {64, 1, 1}});
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
