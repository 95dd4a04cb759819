//===- rewrite.h - Small helpers the passes share (internal to passes/) -----------------------===//
#pragma once

#include "cubecc/ir/builder.h"
#include "cubecc/ir/ir.h"

#include <optional>
#include <span>
#include <type_traits>
#include <vector>

namespace cubecc::passes::detail {

/// The bits of a scalar `const`, if `v` is one.
inline std::optional<uint64_t> constant_bits(const ir::Value *v) {
  const ir::Operation *def = v->defining_op();
  if (!def || def->opcode() != ir::Opcode::Const)
    return std::nullopt;
  return static_cast<uint64_t>(*def->attributes().get_int("value"));
}

/// A `const` of scalar type `t` with `bits`, inserted just before `before` at its location.
inline ir::Value *insert_constant(ir::Module &module, ir::Operation *before, ir::Type t,
                                  uint64_t bits) {
  ir::Builder b(module);
  b.set_insertion_point_before(before);
  b.set_location(before->location());
  return b.create(ir::Opcode::Const, {}, {t}, {{"value", static_cast<int64_t>(bits)}})->result();
}

/// Replaces every use of `op`'s results with `replacements` and erases `op`.
inline void replace_op(ir::Operation *op, std::initializer_list<ir::Value *> replacements) {
  unsigned i = 0;
  for (ir::Value *r : replacements)
    op->result(i++)->replace_all_uses_with(r);
  op->parent_region()->erase(op);
}

/// Replaces `op` by the same op with `extra` results after its own (operands, attributes,
/// regions with their arguments and ops, and location carried over; the uses of its results move
/// to the new op's). Returns the new op, which stands where `op` stood; `op` is destroyed.
inline ir::Operation *append_results(ir::Operation *op, std::span<const ir::Type> extra) {
  std::vector<ir::Type> types;
  for (unsigned i = 0; i < op->num_results(); ++i)
    types.push_back(op->result(i)->type());
  types.insert(types.end(), extra.begin(), extra.end());
  std::vector<ir::Value *> operands(op->operands().begin(), op->operands().end());
  auto fresh =
      ir::Operation::create(op->opcode(), operands, types, op->num_regions(), op->location());
  fresh->attributes() = op->attributes();
  for (unsigned r = 0; r < op->num_regions(); ++r) {
    ir::Region &from = op->region(r), &to = fresh->region(r);
    for (unsigned i = 0; i < from.num_arguments(); ++i) {
      ir::Value *old_arg = from.argument(i);
      old_arg->replace_all_uses_with(to.add_argument(old_arg->type(), old_arg->name()));
    }
    while (!from.empty())
      to.push_back(from.take(from.front()));
  }
  ir::Operation *rebuilt = op->parent_region()->insert(op, std::move(fresh));
  for (unsigned i = 0; i < op->num_results(); ++i) {
    rebuilt->result(i)->set_name(op->result(i)->name());
    op->result(i)->replace_all_uses_with(rebuilt->result(i));
  }
  op->parent_region()->erase(op);
  return rebuilt;
}

/// Every op of `module` in pre-order (parents before children), for passes that edit as they go.
inline std::vector<ir::Operation *> all_ops(ir::Module &module) {
  std::vector<ir::Operation *> ops;
  for (const auto &k : module.kernels())
    k->walk([&](ir::Operation *op) { ops.push_back(op); });
  return ops;
}

/// Calls `fn(op)` on every op of `region`, children before their parent, in order; `fn` may
/// replace or erase the op it is given (and insert before it). Returns whether any call returned
/// true (for `fn` returning void: false).
template <class F> bool visit_post_order(ir::Region &region, F &&fn) {
  bool changed = false;
  for (ir::Operation *op = region.front(); op;) {
    ir::Operation *next = op->next();
    for (unsigned i = 0; i < op->num_regions(); ++i)
      changed |= visit_post_order(op->region(i), fn);
    if constexpr (std::is_void_v<decltype(fn(op))>)
      fn(op);
    else
      changed |= static_cast<bool>(fn(op));
    op = next;
  }
  return changed;
}

/// True when `v` is defined inside `op` (in one of its regions, at any depth).
inline bool defined_inside(const ir::Value *v, const ir::Operation *op) {
  const ir::Region *r = v->defining_op() ? v->defining_op()->parent_region() : v->owner_region();
  while (r) {
    const ir::Operation *parent = r->parent_op();
    if (!parent)
      return false;
    if (parent == op)
      return true;
    r = parent->parent_region();
  }
  return false;
}

/// True when nothing in `region` (at any depth) writes memory, synchronizes, takes part in a
/// subgroup operation, prints or leaves a loop outside the region: running it or not is
/// invisible.
/// `exits_are_local` says whether a break/continue directly in `region` belongs to a loop that
/// is itself being considered (true for a loop's own regions).
inline bool has_no_effects(const ir::Region &region, bool exits_are_local) {
  for (ir::Operation *op : region) {
    if (op->has_flag(ir::WritesMemory) || op->has_flag(ir::Synchronizes) ||
        op->has_flag(ir::Subgroup) || op->has_flag(ir::Effect))
      return false;
    if (!exits_are_local &&
        (op->opcode() == ir::Opcode::Break || op->opcode() == ir::Opcode::Continue))
      return false;
    bool is_loop = op->opcode() == ir::Opcode::For || op->opcode() == ir::Opcode::While;
    for (unsigned r = 0; r < op->num_regions(); ++r)
      if (!has_no_effects(op->region(r), is_loop || exits_are_local))
        return false;
  }
  return true;
}

} // namespace cubecc::passes::detail
