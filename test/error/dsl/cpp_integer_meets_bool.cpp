// EXPECT: cubecc: a C++ integer meets a bool kernel value
// A bool value compared with the C++ integer 1.
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

void kernel(dsl::Tensor<uint32_t> y) {
  auto i = dsl::global_id().x;
  dsl::Val<bool> small = i < 10u;
  dsl::if_(small == 1, [&] { y[i] = 1u; });
}
