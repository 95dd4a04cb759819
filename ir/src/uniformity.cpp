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

  /// One forward sweep over `region`; `divergent` says whether reaching it is non-uniform.
  /// Returns true when a break or continue under varying control was seen (loop exits diverge).
  bool propagate(const Region &region, bool divergent) {
    bool divergent_exit = false;
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
        bool inner = divergent || is_varying(op->operand(0));
        for (unsigned r = 0; r < 2; ++r) {
          divergent_exit |= propagate(op->region(r), inner);
          yield_flow(op->region(r), *op, inner);
        }
        break;
      }
      case Opcode::For: {
        const Region &body = op->region(0);
        bool control = is_varying(op->operand(0)) || is_varying(op->operand(1)) ||
                       is_varying(op->operand(2)) || loop_exit_varying_.count(op);
        if (control)
          mark(body.argument(0));
        for (unsigned i = 3; i < op->num_operands(); ++i)
          if (is_varying(op->operand(i))) {
            mark(body.argument(i - 2));
            if (i - 3 < op->num_results())
              mark(op->result(i - 3)); // after zero iterations the result is the initial value
          }
        if (propagate(body, divergent || control) && loop_exit_varying_.insert(op).second)
          changed_ = true;
        loop_flow(*op, body, 1, divergent || control);
        break;
      }
      case Opcode::While: {
        const Region &before = op->region(0), &after = op->region(1);
        for (unsigned i = 0; i < op->num_operands(); ++i)
          if (is_varying(op->operand(i)))
            mark(before.argument(i));
        bool control = loop_exit_varying_.count(op) != 0;
        propagate(before, divergent || control);
        Operation *cond = before.terminator();
        if (cond && cond->opcode() == Opcode::Condition && cond->num_operands() &&
            is_varying(cond->operand(0)) && loop_exit_varying_.insert(op).second)
          changed_ = true;
        control = loop_exit_varying_.count(op) != 0;
        if (cond)
          for (unsigned i = 1; i < cond->num_operands() && i - 1 < after.num_arguments(); ++i)
            if (is_varying(cond->operand(i)) || control) {
              mark(after.argument(i - 1));
              if (i - 1 < op->num_results())
                mark(op->result(i - 1));
            }
        if (propagate(after, divergent || control) && loop_exit_varying_.insert(op).second)
          changed_ = true;
        loop_flow(*op, before, 0, divergent || control);
        break;
      }
      case Opcode::Break:
      case Opcode::Continue:
        divergent_exit |= divergent;
        break;
      default:
        if (varies_by_itself(*op) || (any_varying && !subgroup_uniform_anyway(*op)))
          for (unsigned i = 0; i < op->num_results(); ++i)
            mark(op->result(i));
        break;
      }
    }
    return divergent_exit;
  }

  /// An if's results vary when its condition does or a branch yields a varying value.
  void yield_flow(const Region &branch, const Operation &op, bool divergent) {
    Operation *term = branch.terminator();
    if (!term || term->opcode() != Opcode::Yield)
      return;
    for (unsigned i = 0; i < term->num_operands() && i < op.num_results(); ++i)
      if (divergent || is_varying(term->operand(i)))
        mark(op.result(i));
  }

  /// Loop-carried values vary when a yield or continue feeds a varying value back, and results
  /// vary when any break carries one or the loop's exit is divergent.
  void loop_flow(const Operation &loop, const Region &carried_region, unsigned first_carried,
                 bool divergent) {
    if (divergent)
      for (unsigned i = 0; i < loop.num_results(); ++i)
        mark(loop.result(i));
    for (unsigned r = 0; r < loop.num_regions(); ++r) {
      const Region &region = loop.region(r);
      walk_exits(region, [&](const Operation &exit) {
        bool to_results = exit.opcode() == Opcode::Break;
        for (unsigned i = 0; i < exit.num_operands(); ++i) {
          if (!is_varying(exit.operand(i)))
            continue;
          if (to_results && i < loop.num_results())
            mark(loop.result(i));
          else if (!to_results && i + first_carried < carried_region.num_arguments())
            mark(carried_region.argument(i + first_carried));
        }
      });
      Operation *term = region.terminator();
      if (term && term->opcode() == Opcode::Yield && (loop.opcode() == Opcode::For || r == 1))
        for (unsigned i = 0; i < term->num_operands(); ++i)
          if (is_varying(term->operand(i)) && i + first_carried < carried_region.num_arguments()) {
            mark(carried_region.argument(i + first_carried));
            if (loop.opcode() == Opcode::For && i < loop.num_results())
              mark(loop.result(i));
          }
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
      if (op->opcode() == Opcode::Barrier && divergent)
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
    case Opcode::SubgroupMin:
    case Opcode::SubgroupMax:
    case Opcode::SubgroupAnd:
    case Opcode::SubgroupOr:
    case Opcode::SubgroupXor:
    case Opcode::SubgroupBroadcast:
    case Opcode::SubgroupBallot:
    case Opcode::SubgroupAll:
    case Opcode::SubgroupAny:
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
  std::unordered_set<const Operation *> loop_exit_varying_;
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

} // namespace cubecc::ir
