//===- environment_test_support.h - Example kernel bundles for the tests ----------------------===//
//
// Shared by environment_test.cpp (building, loading, hits and misses) and bundle_trust_test.cpp
// (damage, binaries checked on first use, files changed under the runtime): the example kernels
// as an application traces them, bundles of them built in process (what `cubecc env build`
// runs), a temporary directory, and the two kernels the tests run with their host references.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl/registry.h"
#include "cubecc/environments/builder.h"
#include "cubecc/environments/bundle.h"
#include "cubecc/ir/clone.h"
#include "cubecc/runtime/runtime.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace cubecc::test {

/// The registered example kernels, as traced (not optimized): what an application loads.
inline std::unique_ptr<ir::Module> traced_examples() {
  auto module = std::make_unique<ir::Module>("examples");
  std::vector<ir::Diagnostic> errors;
  for (const auto &k : dsl::registered_kernels())
    k.trace(*module, k, errors);
  EXPECT_TRUE(errors.empty()) << ir::to_string(errors);
  return module;
}

/// A bundle of `kernels` for `targets`, as `cubecc env build` makes it.
inline environments::BundleContents build(const std::vector<const ir::Kernel *> &kernels,
                                          const std::vector<std::string> &targets,
                                          int opt_level = 2) {
  std::vector<environments::KernelInput> inputs;
  for (const ir::Kernel *k : kernels)
    inputs.push_back({k, "config of " + k->name()});
  environments::BuildOptions options;
  options.targets = targets;
  options.opt_level = opt_level;
  std::vector<ir::Diagnostic> errors;
  auto contents = environments::build_entries(inputs, options, errors);
  EXPECT_TRUE(contents) << ir::to_string(errors);
  if (!contents)
    return {};
  contents->metadata = environments::current_metadata("environment_test");
  contents->metadata.targets = targets;
  return std::move(*contents);
}

/// A bundle of every kernel of `module`.
inline environments::BundleContents
build(const ir::Module &module, const std::vector<std::string> &targets, int opt_level = 2) {
  std::vector<const ir::Kernel *> kernels;
  for (const auto &k : module.kernels())
    kernels.push_back(k.get());
  return build(kernels, targets, opt_level);
}

/// A file under a directory of this process's own (removed at the end of the process).
inline std::string temp_file(const std::string &name) {
  static const struct TempDir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("cubecc-env-test-" + std::to_string(getpid()));
    TempDir() { std::filesystem::create_directories(path); }
    ~TempDir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } dir;
  return (dir.path / name).string();
}

inline const runtime::BinaryTarget kInterp{"interp", "ir", "", ""};

/// The inputs run_axpy gives the example axpy.
inline std::vector<float> axpy_x() {
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.25f * float(i);
  return x;
}
inline std::vector<float> axpy_y() {
  std::vector<float> y(1000);
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = 1.0f - float(i);
  return y;
}

inline std::vector<float> host_axpy(const std::vector<float> &x, std::vector<float> y, float a) {
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = std::fma(a, x[i], y[i]);
  return y;
}

/// Runs the example axpy through `rt` on 1000 elements with a = 3; returns y.
inline std::vector<float> run_axpy(runtime::Runtime &rt, const runtime::KernelHandle &axpy) {
  std::vector<float> x = axpy_x(), y = axpy_y();
  runtime::Buffer bx = rt.upload(x), by = rt.upload(y);
  // A DSL tensor parameter is a buffer with its shape and stride.
  uint32_t n = static_cast<uint32_t>(x.size());
  rt.launch(axpy, runtime::grid_1d(n, axpy.abi().workgroup_size[0]), bx, n, 1u, by, n, 1u, 3.0f);
  return rt.download<float>(by);
}

/// What run_axpy gives when the kernel is right.
inline std::vector<float> expected_axpy() {
  return host_axpy(axpy_x(), axpy_y(), 3.0f);
}

/// Runs the example reduce_sum through `rt` with 2 workgroups over 1000 small integers (every
/// order of summation is exact); returns the 2 partial sums.
inline std::vector<float> run_reduce_sum(runtime::Runtime &rt,
                                         const runtime::KernelHandle &reduce) {
  std::vector<float> in(1000);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(i % 7);
  runtime::Buffer bin = rt.upload(in), bout = rt.upload(std::vector<float>{-1.0f, -1.0f});
  uint32_t n = static_cast<uint32_t>(in.size());
  rt.launch(reduce, {2, 1, 1}, bin, n, 1u, bout, 2u, 1u);
  return rt.download<float>(bout);
}

/// What run_reduce_sum gives when the kernel is right: workgroup w of 256 invocations folds the
/// elements i with (i mod 512) / 256 == w.
inline std::vector<float> expected_reduce_sum() {
  std::vector<float> out(2, 0.0f);
  for (uint32_t i = 0; i < 1000; ++i)
    out[(i % 512) / 256] += float(i % 7);
  return out;
}

} // namespace cubecc::test
