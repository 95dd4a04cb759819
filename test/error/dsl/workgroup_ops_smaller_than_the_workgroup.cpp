// EXPECT: workgroup_ops_smaller_than_the_workgroup.cpp:14:
// EXPECT: WorkgroupOps<T, 64> combines 64 invocations, but the kernel's workgroup has 256: make N the workgroup's size (x * y * z of its .workgroup)
// MODE: trace
// The kernel's workgroup grew to 256 and WorkgroupOps's N stayed 64: its 64 floats of shared
// memory would be written past their end.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<float> data) {
  dsl::WorkgroupOps<float, 64> wg;
  data[dsl::local_index()] = wg.reduce(data[dsl::local_index()], dsl::plus);
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel", {.workgroup = {256, 1, 1}});
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
