// EXPECT: atomic_on_local_array.cpp:16:
// EXPECT: error: 'atomic.add' in kernel @kernel: needs a readwrite buffer or a shared array
// MODE: trace
// An atomic on a Local array (private to each invocation: nothing to synchronize with).
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

#include <cstdio>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> data) {
  dsl::Local<uint32_t, 4> counts;
  auto i = dsl::global_id().x;
  counts[0u] = 0u;
  dsl::atomic_add(counts[0u], data[i]);
  data[i] = counts[0u];
}

int main() {
  dsl::TraceResult result = dsl::trace<kernel>("kernel");
  std::fputs(cubecc::ir::to_string(result.errors).c_str(), stdout);
  return result.module ? 0 : 1;
}
