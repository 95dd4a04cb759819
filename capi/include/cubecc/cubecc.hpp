//===- cubecc.hpp - Everything a C++ application embedding cubecc includes --------------------===//
//
//   #include <cubecc/cubecc.hpp>
//   namespace dsl = cubecc::dsl;
//
//   void axpy(dsl::Tensor<const float> x, dsl::Tensor<float> y, dsl::Scalar<float> a) {
//     auto i = dsl::global_id().x;
//     dsl::if_(i < y.size(), [&] { y[i] = a * x[i] + y[i]; });
//   }
//
//   cubecc::Runtime rt = cubecc::Runtime::open();     // CUBECC_DEVICE, or the best device
//   rt.use_environment("app.cubeenv");                // optional: prebuilt kernels, no JIT
//   cubecc::Buffer x = rt.upload(host_x), y = rt.upload(host_y);
//   auto k = cubecc::kernel<axpy>(rt, "axpy", {.workgroup = {256, 1, 1}});
//   rt.launch(k, cubecc::grid_1d(n, 256), x, n, 1u, y, n, 1u, 2.0f);
//   rt.download(y, std::span<float>(host_y));
//
// The DSL (cubecc/dsl.h), the runtime (cubecc/runtime/runtime.h) and environment bundles
// (cubecc/environments/bundle.h), with the runtime's names brought into namespace cubecc. Link
// cubecc::cubecc (CMake: find_package(cubecc CONFIG)) or `pkg-config --libs cubecc`. The C API
// is cubecc.h. See docs/embedding.md.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl.h"
#include "cubecc/environments/bundle.h"
#include "cubecc/ir/version.h"
#include "cubecc/runtime/runtime.h"

#include <string>

namespace cubecc {

using runtime::Buffer;
using runtime::DeviceInfo;
using runtime::EnvironmentOptions;
using runtime::Error;
using runtime::Graph;
using runtime::grid_1d;
using runtime::KernelHandle;
using runtime::PoolOptions;
using runtime::Runtime;

/// The kernel `F` (a DSL function) on `rt`, named `name` in the IR. The first request traces it;
/// later ones (same `name`) find it in the runtime's kernel cache without tracing. With an
/// environment in use, a kernel it holds is loaded from it instead of compiled. Throws
/// runtime::Error with the kernel's source locations when tracing or verification fails.
template <auto F>
KernelHandle kernel(Runtime &rt, const std::string &name, const dsl::KernelOptions &options = {}) {
  return rt.kernel("cubecc.hpp/" + name, [&]() -> std::unique_ptr<ir::Module> {
    dsl::TraceResult traced = dsl::trace<F>(name, options);
    if (!traced.module)
      throw Error(ir::to_string(traced.errors));
    return std::move(traced.module);
  });
}

} // namespace cubecc
