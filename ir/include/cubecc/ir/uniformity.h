//===- uniformity.h - Which values are the same across a workgroup or a subgroup -------------===//
//
// A value is uniform when every invocation of a workgroup that computes it gets the same value;
// subgroup-uniform when that holds within each subgroup (subgroup reductions, broadcasts,
// ballots, votes, subgroup_id); varying otherwise (invocation ids and lanes, atomics, scans,
// shuffles, private memory, loads at varying indices, anything computed from those, and values
// chosen by control flow that varies). Control flow is divergent where a branch condition, loop
// bound or loop exit varies. The analysis is conservative (sound), iterated to a fixed point over
// loop-carried values.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/ir.h"

#include <memory>
#include <vector>

namespace cubecc::ir {

enum class Uniformity { Uniform, SubgroupUniform, Varying };

class UniformityAnalysis {
public:
  /// Analyses `kernel`, which must verify (apart from barrier placement).
  explicit UniformityAnalysis(const Kernel &kernel);
  ~UniformityAnalysis();
  UniformityAnalysis(const UniformityAnalysis &) = delete;
  UniformityAnalysis &operator=(const UniformityAnalysis &) = delete;

  /// (The subgroup scope is computed on the first query that needs it, so one analysis object
  /// must not be queried from several threads at once.)
  Uniformity of(const Value *v) const;
  /// Barriers that some invocations of a workgroup may skip (under divergent control flow).
  const std::vector<const Operation *> &divergent_barriers() const;
  /// subgroup.barrier ops that some invocations of a subgroup may skip.
  const std::vector<const Operation *> &divergent_subgroup_barriers() const;

  class Scope; ///< the analysis at one scope (workgroup or subgroup)

private:
  const Kernel &kernel_;
  std::unique_ptr<Scope> workgroup_;
  mutable std::unique_ptr<Scope> subgroup_;
};

} // namespace cubecc::ir
