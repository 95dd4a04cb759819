// EXPECT: integer_literal_out_of_range.cpp:15:
// EXPECT: 300
// MODE: trace
// The C++ integer 300 stored into a uint8_t tensor: it does not fit in the element type (today it
// is silently truncated to 44).
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint8_t> data) {
  auto i = dsl::global_id().x;
  data[i] = 300;
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
