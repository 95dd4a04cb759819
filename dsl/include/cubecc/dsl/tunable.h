//===- tunable.h - Tunables a kernel library declares for `cubecc tune`
//------------------------===//
//
// A tunable is a set of registered kernels that compute the same thing with different comptime
// configurations (the variants), the names of its problem's dimensions, the shapes to tune at
// (anchors), and a plain function that says how to launch a variant at a shape: the element
// count of each buffer parameter, the value of each scalar parameter and the grid. With that, a
// tool can benchmark the variants of a library it only dlopens (autotune/, docs/autotune.md):
//
//   bool describe_matmul(uint32_t variant, std::span<const uint64_t> shape,
//                        dsl::TunableLaunch &launch);   // false: the variant cannot run `shape`
//   static const bool tunable = dsl::register_tunable({
//       .name = "matmul", .variants = {"matmul_16x16x16", "matmul_32x32x8"},
//       .dimensions = {"m", "n", "k"}, .anchors = {{128, 128, 128}, {256, 256, 256}},
//       .element_types = "f32", .relative_tolerance = 1e-5, .describe = describe_matmul});
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace cubecc::dsl {

/// The value of one scalar parameter of a launch, by kind (the runtime converts it to the
/// parameter's type and refuses a value out of its range).
struct LaunchValue {
  enum Kind : uint8_t { Int, UInt, Float } kind = Int;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;

  LaunchValue() = default;
  template <class T>
  requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
      LaunchValue(T value) { // NOLINT(google-explicit-constructor): a value like the launch's
    if constexpr (std::is_floating_point_v<T>) {
      kind = Float;
      f = static_cast<double>(value);
    } else if constexpr (std::is_signed_v<T>) {
      kind = Int;
      i = static_cast<int64_t>(value);
    } else {
      kind = UInt;
      u = static_cast<uint64_t>(value);
    }
  }
};

/// How to launch one variant at one shape. Buffers and values are listed in the order of the
/// kernel's buffer parameters and value parameters respectively (each list on its own).
struct TunableLaunch {
  std::array<uint32_t, 3> grid = {1, 1, 1}; ///< number of workgroups
  std::vector<uint64_t> buffer_elements;    ///< element count of each buffer parameter
  std::vector<LaunchValue> values;          ///< each scalar (non-vector) value parameter

  /// Appends a contiguous row-major Tensor<T, 2> parameter of rows x cols: its element count,
  /// then its shape and strides as values (the tensor's own parameters, in order).
  void add_row_major_tensor(uint64_t rows, uint64_t cols) {
    buffer_elements.push_back(rows * cols);
    for (uint64_t v : {rows, cols, cols, uint64_t{1}})
      values.emplace_back(static_cast<uint32_t>(v));
  }
};

/// Describes the launch of variant `variant` (index into RegisteredTunable::variants) at `shape`
/// (one extent per dimension). Returns false when the variant cannot run that shape.
using DescribeTunable = bool (*)(uint32_t variant, std::span<const uint64_t> shape,
                                 TunableLaunch &launch);

struct RegisteredTunable {
  std::string name;
  std::vector<std::string> variants;          ///< names of kernels registered with register_kernel
  std::vector<std::string> dimensions;        ///< e.g. {"m", "n", "k"}
  std::vector<std::vector<uint64_t>> anchors; ///< shapes to tune at, one extent per dimension
  std::string element_types;                  ///< the bucket's types, e.g. "f32" or "f16,f32"
  /// How far float outputs of two variants may differ when the tuner cross-checks them
  /// (|a - b| <= tolerance * max(|a|, |b|)); 0: bit-exact. Integer outputs are always exact.
  double relative_tolerance = 0;
  DescribeTunable describe = nullptr;
};

/// The tunables registered in this binary, in registration order.
const std::vector<RegisteredTunable> &registered_tunables();

/// Registers a tunable (its variants may be registered before or after it). Returns true (for
/// initializing a static).
bool register_tunable(RegisteredTunable tunable);

} // namespace cubecc::dsl
