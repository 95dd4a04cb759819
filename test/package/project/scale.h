// The application's kernels: included by the application and by its kernel library, so that a
// bundle built from the library holds exactly the kernels the application traces.
#pragma once

#include <cubecc/dsl.h>

namespace consumer {

namespace dsl = cubecc::dsl;

/// y = a * x + b, elementwise.
inline void scale_shift(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a,
                        dsl::Scalar<float> b) {
  auto i = dsl::global_id().x;
  dsl::if_(i < y.size(), [&] { y[i] = a * x[i] + b; });
}

inline const dsl::KernelOptions kScaleShiftOptions = {.workgroup = {128, 1, 1},
                                                      .parameter_names = {"x", "y", "a", "b"}};

} // namespace consumer
