//===- tunable.h - Kernel variants to choose among, and the buckets of their problems ---------===//
//
// A Tunable is one computation with several kernel variants (comptime configurations, e.g. tile
// sizes) plus a key function that maps a launch's problem (its shape and element types) to a
// bucket: problems in one bucket share one tuning result. The default key rounds every dimension
// up to the next power of two: {m=500, n=512, k=200} of f32 is "m=512,n=512,k=256;f32".
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/types.h"
#include "cubecc/runtime/runtime.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::autotune {

/// The problem of one launch: one extent per dimension of the tunable, and its element types.
struct Problem {
  std::vector<uint64_t> shape;
  std::vector<ir::Scalar> types;
};

/// One comptime configuration of the tunable's kernel.
struct Variant {
  std::string configuration; ///< e.g. "tm=16,tn=16,tk=16": what tuning records keep
  /// The variant's kernel on `rt` (e.g. rt.kernel(key, trace): cached after the first call).
  std::function<runtime::KernelHandle(runtime::Runtime &rt)> load;
  /// Whether the variant can run `problem`; empty: every problem.
  std::function<bool(const Problem &problem)> valid;
};

/// `value` rounded up to a power of two (0 stays 0; values above 2^63 stay as they are).
uint64_t round_up_to_power_of_two(uint64_t value);

/// The default bucket: "<dim>=<extent rounded up to a power of two>,...;<type>,<type>", e.g.
/// "m=512,n=512,k=256;f32" (no ";..." without types). Throws runtime::Error when the shape does
/// not have one extent per dimension.
std::string power_of_two_bucket(std::span<const std::string> dimensions, const Problem &problem);

class Tunable {
public:
  /// Maps a problem to its bucket; must be deterministic across processes and versions.
  using KeyFunction =
      std::function<std::string(std::span<const std::string> dimensions, const Problem &)>;

  /// Throws runtime::Error on an empty name, no variants, or two variants of one configuration.
  Tunable(std::string name, std::vector<std::string> dimensions, std::vector<Variant> variants,
          KeyFunction key = {});

  const std::string &name() const { return name_; }
  const std::vector<std::string> &dimensions() const { return dimensions_; }
  const std::vector<Variant> &variants() const { return variants_; }

  /// The bucket of `problem` (the key function's, else power_of_two_bucket).
  std::string bucket(const Problem &problem) const;
  /// Whether variant `index` can run `problem` (its predicate, if any).
  bool valid(size_t index, const Problem &problem) const;
  /// The variant whose configuration is `configuration`.
  std::optional<size_t> find(std::string_view configuration) const;

private:
  std::string name_;
  std::vector<std::string> dimensions_;
  std::vector<Variant> variants_;
  KeyFunction key_;
};

} // namespace cubecc::autotune
