// EXPECT: bitcast_size_mismatch.cpp:14:
// EXPECT: error: 'bitcast' in kernel @kernel: cannot bitcast f32 to u16: the sizes differ
// MODE: trace
// dsl::bitcast of a 4-byte float to a 2-byte integer.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<const float> x, dsl::Tensor<uint16_t> bits) {
  auto i = dsl::global_id().x;
  bits[i] = dsl::bitcast<uint16_t>(x[i]);
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
