//===- axpy.cpp - y = a * x + y ---------------------------------------------------------------===//
#include <cubecc/dsl.h>

namespace dsl = cubecc::dsl;

namespace cubecc::examples {

/// One invocation per element; `kWidth` elements per invocation through vector loads when > 1.
template <int kWidth>
void axpy(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a) {
  auto i = dsl::global_id().x;
  if constexpr (kWidth == 1) {
    dsl::if_(i < y.size(), [&] { y[i] = a * x[i] + y[i]; });
  } else {
    dsl::Val<uint32_t> base = i * kWidth;
    dsl::Val<uint32_t> n = y.size();
    dsl::if_(base + kWidth <= n, [&] {
      auto xv = x.load<kWidth>(base);
      auto yv = y.load<kWidth>(base);
      y.store<kWidth>(base, dsl::splat<kWidth>(a) * xv + yv);
    }).else_([&] {
      // The last, partial group of kWidth elements, one at a time (a comptime loop: unrolled).
      for (int k = 0; k < kWidth; ++k) {
        dsl::Val<uint32_t> e = base + k;
        dsl::if_(e < n, [&] { y[e] = a * x[e] + y[e]; });
      }
    });
  }
}

static const bool registered_axpy =
    dsl::register_kernel<axpy<1>>("axpy", "width=1",
                                  {.workgroup = {256, 1, 1}, .parameter_names = {"x", "y", "a"}}) &&
    dsl::register_kernel<axpy<4>>("axpy_w4", "width=4",
                                  {.workgroup = {256, 1, 1}, .parameter_names = {"x", "y", "a"}});

// The configurations registered above, instantiated for typed launches (kernels.h).
template void axpy<1>(dsl::Tensor<const float>, dsl::Tensor<float>, dsl::Scalar<float>);
template void axpy<4>(dsl::Tensor<const float>, dsl::Tensor<float>, dsl::Scalar<float>);

} // namespace cubecc::examples
