//===- library.h - Tuning the tunables a kernel library declares ------------------------------===//
//
// A kernel library (dsl/, cubecc/dsl/tunable.h) declares tunables as data: variant kernels,
// dimension names, anchor shapes, and a plain function that says how to launch a variant at a
// shape. LibraryTunable is that declaration as autotune sees it — autotune does not depend on
// dsl/, so the caller (tools/, tests) copies a dsl::KernelLibrary's tunable into it. tune_library
// then tunes every anchor shape: buffers filled with deterministic pseudo-random data suited to
// their element types, every variant timed, outputs (the buffers the kernel may write)
// cross-checked, one record per anchor.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/autotune/record.h"
#include "cubecc/autotune/tunable.h"
#include "cubecc/autotune/tuner.h"
#include "cubecc/runtime/runtime.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cubecc::autotune {

/// How to launch one variant at one shape: the element count of each buffer parameter and the
/// value of each scalar parameter, each list in parameter order, and the grid.
struct LaunchDescription {
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::vector<uint64_t> buffer_elements;
  std::vector<runtime::ArgumentValue> values;
};

struct LibraryTunable {
  struct Variant {
    std::string kernel;        ///< the kernel's name
    std::string configuration; ///< its comptime configuration (what records keep)
    /// A module holding the traced kernel; throws runtime::Error on failure.
    std::function<std::unique_ptr<ir::Module>()> trace;
  };
  std::string name;
  std::vector<std::string> dimensions;
  std::vector<std::vector<uint64_t>> anchors;
  std::vector<ir::Scalar> element_types; ///< the bucket's types
  double relative_tolerance = 0;         ///< for float outputs in the cross-check
  std::vector<Variant> variants;
  /// Fills `launch` for variant `variant` at `shape`; false when that variant cannot run it.
  /// Throws runtime::Error on failure.
  std::function<bool(size_t variant, std::span<const uint64_t> shape, LaunchDescription &launch)>
      describe;
};

/// The Tunable of `library` (variants loaded with Runtime::kernel under a key of the tunable,
/// kernel and configuration; valid where `describe` says so). `library` must outlive it.
Tunable make_tunable(const LibraryTunable &library);

/// Runs a LibraryTunable's variants on one shape: per variant, buffers of the described sizes
/// and the kernel's element types, filled deterministically (the same contents for every
/// variant), and the kernel's writable buffers as outputs.
class LibraryBenchmark : public Benchmark {
public:
  explicit LibraryBenchmark(const LibraryTunable &library);
  ~LibraryBenchmark() override;
  void prepare(runtime::Runtime &rt, const Problem &problem) override;
  void run(runtime::Runtime &rt, size_t variant, const runtime::KernelHandle &kernel) override;
  void reset(runtime::Runtime &rt, size_t variant) override;
  std::vector<Output> outputs(runtime::Runtime &rt, size_t variant) override;

private:
  struct VariantState;
  VariantState &state(runtime::Runtime &rt, size_t variant, const runtime::KernelHandle &kernel);
  const LibraryTunable &library_;
  std::vector<uint64_t> shape_;
  std::vector<std::unique_ptr<VariantState>> states_;
};

/// Tunes every anchor of `library` on `rt`: one record per anchor, in order. The cross-check
/// uses the library's relative tolerance. Throws runtime::Error as tune() does.
std::vector<TuningRecord> tune_library(runtime::Runtime &rt, const LibraryTunable &library,
                                       const TuneOptions &options = {});

/// Deterministic pseudo-random contents for buffer `buffer` of `count` elements of `element`:
/// floats uniform in [-1, 1], signed integers in [-64, 64], unsigned in [0, 128] — small, so sums
/// and products stay exact and in range. The same for every variant.
std::vector<uint8_t> fill_bytes(ir::Scalar element, uint64_t count, uint64_t buffer);

} // namespace cubecc::autotune
