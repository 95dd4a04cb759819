//===- dsl.h - The cubecc kernel DSL: everything a kernel source includes --------------------===//
//
//   #include <cubecc/dsl.h>
//   namespace dsl = cubecc::dsl;
//
//   void axpy(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a) {
//     auto i = dsl::global_id().x;
//     dsl::if_(i < y.size(), [&] { y[i] = a * x[i] + y[i]; });
//   }
//
// See docs/dsl.md for the guide.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl/control.h"
#include "cubecc/dsl/expr.h"
#include "cubecc/dsl/gpu.h"
#include "cubecc/dsl/matrix.h"
#include "cubecc/dsl/memory.h"
#include "cubecc/dsl/primitives.h"
#include "cubecc/dsl/registry.h"
#include "cubecc/dsl/trace.h"
#include "cubecc/dsl/types.h"
