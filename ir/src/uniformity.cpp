//===- uniformity.cpp - Uniformity analysis --------------------------------------------------===//
#include "cubecc/ir/uniformity.h"

#include "value_flags.h"

#include <unordered_set>

namespace cubecc::ir {

/// The analysis at one scope: "varying" means the value may differ between invocations of one
/// workgroup (workgroup scope) or of one subgroup (subgroup scope).
class UniformityAnalysis::Scope {
public:
  Scope(const Kernel &k, bool workgroup_scope) : workgroup_scope_(workgroup_scope) {
    do {
      changed_ = false;
      propagate(k.body(), false);
    } while (changed_);
    find_divergent_barriers(k.body(), false);
  }

  bool is_varying(const Value *v) const { return varying_.test(v); }

  void mark(const Value *v) {
    if (varying_.set(v))
      changed_ = true;
  }

  /// What a sweep over a loop's region found about its exits.
  enum Exits : unsigned { kNone = 0, kDivergentBreak = 1, kDivergentContinue = 2 };

  /// One forward sweep over `region`. `exits_diverge` says whether a varying branch condition
  /// lies between the innermost loop's region and this one, so that a break or continue here
  /// is taken by some of that loop's invocations and not others. Returns which of those were
  /// seen. Divergence outside the innermost loop or `if` does not matter for values: a value is
  /// uniform when every invocation that computes it gets the same one.
  unsigned propagate(const Region &region, bool exits_diverge) {
    unsigned exits = kNone;
    for (Operation *op : region) {
      bool any_varying = false;
      for (Value *v : op->operands())
        any_varying |= is_varying(v);
      switch (op->opcode()) {
      case Opcode::GlobalId:
      case Opcode::LocalId:
      case Opcode::LocalIndex:
      case Opcode::SubgroupLane:
        mark(op->result());
        break;
      case Opcode::SubgroupId:
        if (workgroup_scope_)
          mark(op->result());
        break;
      case Opcode::Load:
        if (any_varying || op->operand(0)->type().kind() == TypeKind::Local)
          mark(op->result());
        break;
      case Opcode::If: {
        bool varying_condition = is_varying(op->operand(0));
        for (unsigned r = 0; r < 2; ++r) {
          exits |= propagate(op->region(r), exits_diverge || varying_condition);
          yield_flow(op->region(r), *op, varying_condition);
        }
        break;
      }
      case Opcode::For: {
        const Region &body = op->region(0);
        bool bounds =
            is_varying(op->operand(0)) || is_varying(op->operand(1)) || is_varying(op->operand(2));
        if (bounds || loop_break_varying_.count(op))
          mark(body.argument(0));
        for (unsigned i = 3; i < op->num_operands(); ++i)
          if (is_varying(op->operand(i))) {
            mark(body.argument(i - 2));
            if (i - 3 < op->num_results())
              mark(op->result(i - 3)); // after zero iterations the result is the initial value
          }
        // Varying bounds end the loop at different iterations, as a divergent break does.
        loop_exits(*op, propagate(body, false) | (bounds ? kDivergentBreak : kNone));
        loop_flow(*op, body, 1);
        break;
      }
      case Opcode::While: {
        const Region &before = op->region(0), &after = op->region(1);
        for (unsigned i = 0; i < op->num_operands(); ++i)
          if (is_varying(op->operand(i)))
            mark(before.argument(i));
        propagate(before, false); // no break or continue may sit here
        Operation *cond = before.terminator();
        // The do region runs with the forwarded values of the invocations still looping; the
        // results are each invocation's last ones, which differ when the exit diverges.
        bool varying_condition = cond && cond->opcode() == Opcode::Condition &&
                                 cond->num_operands() && is_varying(cond->operand(0));
        if (cond)
          for (unsigned i = 1; i < cond->num_operands() && i - 1 < after.num_arguments(); ++i)
            if (is_varying(cond->operand(i))) {
              mark(after.argument(i - 1));
              if (i - 1 < op->num_results())
                mark(op->result(i - 1));
            }
        loop_exits(*op, propagate(after, false) | (varying_condition ? kDivergentBreak : kNone));
        loop_flow(*op, before, 0);
        break;
      }
      case Opcode::Break:
        if (exits_diverge)
          exits |= kDivergentBreak;
        break;
      case Opcode::Continue:
        if (exits_diverge)
          exits |= kDivergentContinue;
        break;
      default:
        if (varies_by_itself(*op) || (any_varying && !subgroup_uniform_anyway(*op)))
          for (unsigned i = 0; i < op->num_results(); ++i)
            mark(op->result(i));
        break;
      }
    }
    return exits;
  }

  /// Records what a loop's exits do. Any divergent exit makes the loop's control divergent
  /// for the barriers in it. A divergent break (or condition, or bound) lets invocations leave
  /// at different iterations, each with its own last values. A divergent continue lets them
  /// start the next iteration with values from different places.
  void loop_exits(const Operation &loop, unsigned exits) {
    auto record = [&](std::unordered_set<const Operation *> &set) {
      if (set.insert(&loop).second)
        changed_ = true;
    };
    if (exits != kNone)
      record(loop_exit_varying_);
    if (exits & kDivergentBreak)
      record(loop_break_varying_);
    if (exits & kDivergentContinue)
      record(loop_continue_varying_);
  }

  /// An if's results vary when its condition does or a branch yields a varying value.
  void yield_flow(const Region &branch, const Operation &op, bool varying_condition) {
    Operation *term = branch.terminator();
    if (!term || term->opcode() != Opcode::Yield)
      return;
    for (unsigned i = 0; i < term->num_operands() && i < op.num_results(); ++i)
      if (varying_condition || is_varying(term->operand(i)))
        mark(op.result(i));
  }

  /// A loop's carried values (the for body's or the while before region's arguments from
  /// `first_carried` on) vary when a value fed back to them (by the closing yield or a
  /// continue) varies, or when a divergent continue chooses between different values. A for
  /// loop's results are its last carried values. Results also vary when a break carries a
  /// varying value or the loop is left at different iterations.
  void loop_flow(const Operation &loop, const Region &carried_region, unsigned first_carried) {
    bool is_for = loop.opcode() == Opcode::For;
    if (loop_break_varying_.count(&loop))
      for (unsigned i = 0; i < loop.num_results(); ++i)
        mark(loop.result(i));
    bool continue_varying = loop_continue_varying_.count(&loop) != 0;
    const Region &body = loop.region(is_for ? 0 : 1);
    std::vector<const Operation *> feeding, breaks;
    walk_exits(body, [&](const Operation &exit) {
      (exit.opcode() == Opcode::Break ? breaks : feeding).push_back(&exit);
    });
    Operation *term = body.terminator();
    if (term && term->opcode() == Opcode::Yield)
      feeding.push_back(term);
    for (const Operation *exit : breaks)
      for (unsigned i = 0; i < exit->num_operands() && i < loop.num_results(); ++i)
        if (is_varying(exit->operand(i)))
          mark(loop.result(i));
    for (unsigned i = 0; i + first_carried < carried_region.num_arguments(); ++i) {
      bool varying = false;
      const Value *first = nullptr;
      for (const Operation *exit : feeding) {
        if (i >= exit->num_operands())
          continue;
        const Value *v = exit->operand(i);
        varying |= is_varying(v) || (continue_varying && first && v != first);
        first = first ? first : v;
      }
      if (!varying)
        continue;
      mark(carried_region.argument(i + first_carried));
      if (is_for && i < loop.num_results())
        mark(loop.result(i));
    }
  }

  /// Calls `fn` on the break and continue ops that leave `region`'s loop (not nested loops').
  template <typename F> static void walk_exits(const Region &region, F &&fn) {
    for (Operation *op : region) {
      if (op->opcode() == Opcode::Break || op->opcode() == Opcode::Continue)
        fn(*op);
      else if (op->opcode() == Opcode::If)
        for (unsigned r = 0; r < 2; ++r)
          walk_exits(op->region(r), fn);
    }
  }

  void find_divergent_barriers(const Region &region, bool divergent) {
    for (Operation *op : region) {
      if (op->opcode() == (workgroup_scope_ ? Opcode::Barrier : Opcode::SubgroupBarrier) &&
          divergent)
        divergent_barriers_.push_back(op);
      bool control = false;
      if (op->opcode() == Opcode::If)
        control = is_varying(op->operand(0));
      else if (op->opcode() == Opcode::For)
        control = is_varying(op->operand(0)) || is_varying(op->operand(1)) ||
                  is_varying(op->operand(2)) || loop_exit_varying_.count(op);
      else if (op->opcode() == Opcode::While)
        control = loop_exit_varying_.count(op) != 0;
      for (unsigned r = 0; r < op->num_regions(); ++r)
        find_divergent_barriers(op->region(r), divergent || control);
    }
  }

  /// Subgroup collectives whose result is one value for the whole subgroup: reductions,
  /// ballots, votes and broadcasts.
  static bool same_for_the_subgroup(Opcode op) {
    switch (op) {
    case Opcode::SubgroupSum:
    case Opcode::SubgroupProduct:
    case Opcode::SubgroupMin:
    case Opcode::SubgroupMax:
    case Opcode::SubgroupAnd:
    case Opcode::SubgroupOr:
    case Opcode::SubgroupXor:
    case Opcode::SubgroupBroadcast:
    case Opcode::SubgroupBallot:
    case Opcode::SubgroupAll:
    case Opcode::SubgroupAny:
    case Opcode::MatrixFill: // a matrix is one value of the whole subgroup
    case Opcode::MatrixLoad:
    case Opcode::MatrixMma:
    case Opcode::MatrixConvert:
      return true;
    default:
      return false;
    }
  }

  /// At subgroup scope, such a collective is uniform whatever its operand (a broadcast provided
  /// its lane is).
  bool subgroup_uniform_anyway(const Operation &op) const {
    if (workgroup_scope_ || !same_for_the_subgroup(op.opcode()))
      return false;
    return op.opcode() != Opcode::SubgroupBroadcast || !is_varying(op.operand(1));
  }

  /// Ops whose results vary at this scope whatever their operands.
  bool varies_by_itself(const Operation &op) const {
    if (op.has_flag(ReadsMemory) && op.has_flag(WritesMemory))
      return true; // atomics: each invocation gets its own old value
    if (!op.has_flag(Subgroup))
      return false;
    return workgroup_scope_ || !same_for_the_subgroup(op.opcode());
  }

  std::vector<const Operation *> divergent_barriers_;

private:
  bool workgroup_scope_;
  detail::ValueFlags varying_;
  std::unordered_set<const Operation *> loop_exit_varying_;  ///< any exit diverges (barriers)
  std::unordered_set<const Operation *> loop_break_varying_; ///< left at different iterations
  std::unordered_set<const Operation *>
      loop_continue_varying_; ///< next iteration from different places
  bool changed_ = false;
};

UniformityAnalysis::UniformityAnalysis(const Kernel &kernel)
    : kernel_(kernel), workgroup_(std::make_unique<Scope>(kernel, true)) {}

UniformityAnalysis::~UniformityAnalysis() = default;

Uniformity UniformityAnalysis::of(const Value *v) const {
  if (!workgroup_->is_varying(v))
    return Uniformity::Uniform;
  if (!subgroup_) // computed on first need: the barrier rule only needs the workgroup scope
    subgroup_ = std::make_unique<Scope>(kernel_, false);
  return subgroup_->is_varying(v) ? Uniformity::Varying : Uniformity::SubgroupUniform;
}

const std::vector<const Operation *> &UniformityAnalysis::divergent_barriers() const {
  return workgroup_->divergent_barriers_;
}

const std::vector<const Operation *> &UniformityAnalysis::divergent_subgroup_barriers() const {
  if (!subgroup_)
    subgroup_ = std::make_unique<Scope>(kernel_, false);
  return subgroup_->divergent_barriers_;
}

} // namespace cubecc::ir
