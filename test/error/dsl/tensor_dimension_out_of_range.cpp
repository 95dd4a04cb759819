// EXPECT: tensor_dimension_out_of_range.cpp:15:
// EXPECT: error: in kernel @kernel: tensor dimension 2 is out of range
// MODE: trace
// shape(2) of a rank-2 tensor (dimensions are 0 and 1). The error must name this file and line,
// not the DSL's header.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float, 2> data) {
  auto id = dsl::global_id();
  dsl::Val<uint32_t> columns = data.shape(2);
  data(id.y, id.x) = dsl::cast<float>(columns);
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
