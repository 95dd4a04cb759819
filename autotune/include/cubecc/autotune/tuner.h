//===- tuner.h - Benchmarking the variants of a tunable on a device ---------------------------===//
//
// tune() times every valid variant of a tunable on one problem, on the runtime's device:
//   1. warm-up runs of each variant (first launches compile pipelines and fill caches);
//   2. samples taken round-robin (one run of each live variant per round, so drift in the
//      machine's speed hits every variant alike), each timed from the device timestamps of its
//      launches (Runtime::last_launch_times_ns);
//   3. after `elimination_after` rounds, a variant whose best sample is slower than
//      `elimination_ratio` times the leader's median is dropped (it cannot win);
//   4. optionally the cross-check: every surviving variant (and the first valid one, the
//      reference) runs once more from the same inputs and their outputs must agree — exactly for
//      integers, within a relative tolerance for floats. A variant that disagrees is an Error
//      naming it, never a silent pick.
// The winner is the surviving variant with the lowest median.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/autotune/record.h"
#include "cubecc/autotune/tunable.h"
#include "cubecc/ir/types.h"
#include "cubecc/runtime/runtime.h"

#include <cstdint>
#include <vector>

namespace cubecc::autotune {

/// The contents of one output buffer, for the cross-check.
struct Output {
  ir::Scalar element = ir::Scalar::U8;
  std::vector<uint8_t> bytes; ///< the elements as the device stores them
};

/// What the tuner runs. The caller implements it for its problem.
class Benchmark {
public:
  virtual ~Benchmark() = default;
  /// Allocates and fills the buffers for `problem`, once, before any run.
  virtual void prepare(runtime::Runtime &rt, const Problem &problem) = 0;
  /// Queues one run of variant `variant` (one or more launches of `kernel`); the tuner
  /// synchronizes and sums the run's launch times.
  virtual void run(runtime::Runtime &rt, size_t variant, const runtime::KernelHandle &kernel) = 0;
  /// Cross-check: brings the buffers back to the state prepare() left (for kernels that
  /// accumulate into their outputs). The default does nothing.
  virtual void reset(runtime::Runtime &rt, size_t variant) {}
  /// Cross-check: the outputs of the run of `variant` just completed. Empty (the default): the
  /// benchmark cannot be cross-checked.
  virtual std::vector<Output> outputs(runtime::Runtime &rt, size_t variant) { return {}; }
};

struct TuneOptions {
  uint32_t warmup_runs = 2;       ///< per variant, not timed
  uint32_t samples = 10;          ///< timed runs per variant that is not eliminated
  uint32_t elimination_after = 3; ///< rounds before eliminating; 0: never eliminate
  double elimination_ratio = 1.5; ///< eliminate when best sample > ratio * leader's median
  bool cross_check = true;        ///< compare the outputs of the surviving variants
  double relative_tolerance = 0;  ///< floats: |a - b| <= tol * max(|a|, |b|) (0: bit-exact)
  double absolute_tolerance = 0;  ///< floats: or |a - b| <= this (for values near zero)
};

/// Tunes `tunable` for `problem` on `rt` (see the file comment). Throws runtime::Error when no
/// variant is valid, when a run fails, or when the cross-check finds variants that disagree.
TuningRecord tune(runtime::Runtime &rt, const Tunable &tunable, const Problem &problem,
                  Benchmark &benchmark, const TuneOptions &options = {});

/// The first difference between two sets of outputs beyond the tolerances, as a message
/// ("output 0 element 17: 1.5 vs 2"), or "" when they agree.
std::string compare_outputs(const std::vector<Output> &a, const std::vector<Output> &b,
                            double relative_tolerance, double absolute_tolerance);

} // namespace cubecc::autotune
