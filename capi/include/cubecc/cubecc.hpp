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
//   cubecc::Tensor x = rt.upload(host_x), y = rt.upload(host_y);
//   auto k = cubecc::kernel<axpy>(rt, "axpy", {.workgroup = {256, 1, 1}});
//   cubecc::launch(rt, k, cubecc::grid_for(y, k), x, y, 2.0f);  // checked against axpy's signature
//   rt.download(y.buffer(), std::span<float>(host_y));
//
// The DSL (cubecc/dsl.h), the runtime (cubecc/runtime/runtime.h), environment bundles
// (cubecc/environments/bundle.h), host tensors and typed launches (cubecc/launch.hpp), with the
// runtime's names brought into namespace cubecc. Link cubecc::cubecc (CMake:
// find_package(cubecc CONFIG)) or `pkg-config --libs cubecc`. The C API is cubecc.h; tensors to
// and from DLPack are cubecc/dlpack.hpp. See docs/embedding.md.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl.h"
#include "cubecc/environments/bundle.h"
#include "cubecc/ir/version.h"
#include "cubecc/launch.hpp"
#include "cubecc/runtime/runtime.h"

#include <string>

namespace cubecc {

using runtime::Buffer;
using runtime::DeviceInfo;
using runtime::EnvironmentOptions;
using runtime::Error;
using runtime::ErrorKind;
using runtime::Event;
using runtime::Graph;
using runtime::grid_1d;
using runtime::KernelHandle;
using runtime::PoolOptions;
using runtime::Runtime;
using runtime::Stream;

/// The kernel `F` (a DSL function) on `rt` (a Runtime, or anything with its kernel(key, trace)),
/// named `name` in the IR and traced with `options`. A kernel is known by its function and its
/// options, never by its name alone: the cache key holds F's address, the name and every option, so
/// `kernel<add_one>(rt, "k")` and `kernel<times_ten>(rt, "k")` are two kernels. The first request
/// traces it; later ones (same F, name and options) find it in the runtime's kernel cache without
/// tracing. With an environment in use, a kernel it holds is loaded from it instead of compiled.
/// The handle carries F for typed launches (cubecc::launch, launch.hpp). Throws runtime::Error
/// (Compile) with the kernel's source locations when tracing or verification fails.
template <auto F, class Queue>
TypedKernel<F> kernel(Queue &rt, const std::string &name, const dsl::KernelOptions &options = {}) {
  const std::string key = "cubecc.hpp/" + detail::function_key<F>() + "/" + name + "/" +
                          detail::kernel_options_key(options);
  return TypedKernel<F>(rt.kernel(key, [&]() -> std::unique_ptr<ir::Module> {
    dsl::KernelOptions unverified = options; // the runtime verifies what it must compile
    unverified.verify = false;
    dsl::TraceResult traced = dsl::trace<F>(name, unverified);
    if (!traced.module)
      throw Error(ErrorKind::Compile,
                  "kernel '" + name + "' does not trace:\n" + ir::to_string(traced.errors),
                  traced.errors);
    return std::move(traced.module);
  }));
}

} // namespace cubecc
