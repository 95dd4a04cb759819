// EXPECT: cubecc: trace<F> takes a kernel function (returning void)
// dsl::trace given a value that is not a kernel function.
#include <cubecc/dsl.h>
#include <cubecc/ir/ir.h>

namespace dsl = cubecc::dsl;

constexpr int kNotAKernel = 3;

int main() {
  auto result = dsl::trace<kNotAKernel>("k");
  return result.errors.empty() ? 0 : 1;
}
