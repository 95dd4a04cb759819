// A C++ application embedding cubecc: runs scale_shift on the default device (CUBECC_DEVICE) and
// checks it against the host; with CUBECC_ENV naming a bundle, the kernel comes from it. Prints
// "compiles N" (kernels compiled in this process) and exits 1 on a wrong result.
#include "scale.h"

#include <cubecc/cubecc.hpp>

#include <cstdio>
#include <vector>

int main() try {
  cubecc::Runtime rt = cubecc::Runtime::open();
  const uint32_t n = 10000;
  std::vector<float> x(n), y(n, 0.0f);
  for (uint32_t i = 0; i < n; ++i)
    x[i] = float(i) * 0.25f;
  cubecc::Tensor dx = rt.upload(x), dy = rt.upload(y);
  auto kernel =
      cubecc::kernel<consumer::scale_shift>(rt, "scale_shift", consumer::kScaleShiftOptions);
  // Checked against scale_shift's signature: two float tensors, then two floats.
  cubecc::launch(rt, kernel, cubecc::grid_for(dy, kernel), dx, dy, 3.0f, 1.0f);
  std::vector<float> got = rt.download<float>(dy.buffer());
  int wrong = 0;
  for (uint32_t i = 0; i < n; ++i) {
    volatile float product = 3.0f * x[i];
    wrong += got[i] != product + 1.0f;
  }
  std::printf("scale_shift on %s: %s, compiles %llu\n", rt.info().backend.c_str(),
              wrong ? "WRONG" : "ok", (unsigned long long)rt.cache_statistics().compiles);
  return wrong ? 1 : 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "scale_app: %s\n", e.what());
  return 1;
}
