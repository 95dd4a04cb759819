// A DSL source with one kernel and a global whose initializer throws: it runs inside dlopen, where
// no handler can catch it (test/lit/tools/cubecc-bad-kernel-library.test).
#include <cubecc/dsl.h>

#include <stdexcept>

namespace dsl = cubecc::dsl;

void fill(dsl::Tensor<float> y) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = 1.0f; });
}

static const bool registered = dsl::register_kernel<fill>("fill", "", {.workgroup = {64, 1, 1}});

static const int configured = []() -> int {
  throw std::runtime_error("the configuration file is missing");
}();
