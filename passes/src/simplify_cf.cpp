//===- simplify_cf.cpp - Constant branches, empty ifs, loops that never run, stores sunk ------===//
#include "cubecc/passes/simplify_cf.h"

#include "cubecc/ir/semantics.h"
#include "rewrite.h"

namespace cubecc::passes {
namespace {

/// Moves the ops of `from` (all but its terminator) to just before `before`.
void splice_before(ir::Region &from, ir::Operation *before) {
  while (from.front() != from.terminator())
    before->parent_region()->insert(before, from.take(from.front()));
}

bool only_plain_yield(const ir::Region &r) {
  return r.size() == 1 && r.front()->opcode() == ir::Opcode::Yield &&
         r.front()->num_operands() == 0;
}

/// The `store` that ends `r` just before its `yield`, if it does.
ir::Operation *store_before_yield(const ir::Region &r) {
  ir::Operation *term = r.terminator();
  if (!term || term->opcode() != ir::Opcode::Yield)
    return nullptr;
  ir::Operation *last = term->prev();
  return last && last->opcode() == ir::Opcode::Store ? last : nullptr;
}

/// `if c { ...; store m, i, a } else { ...; store m, i, b }` -> the if yields a or b and one
/// `store m, i, %r` follows it. Each arm's store was its last effect, so the order of memory
/// effects is unchanged; the arms then hold no store of their own (on devices that run both arms
/// of a divergent branch under masks, two masked stores become one plain one).
bool sink_common_store(ir::Operation *op) {
  ir::Operation *then_store = store_before_yield(op->region(0));
  ir::Operation *else_store = store_before_yield(op->region(1));
  if (!then_store || !else_store || then_store->operand(0) != else_store->operand(0) ||
      then_store->operand(1) != else_store->operand(1) ||
      then_store->operand(2)->type() != else_store->operand(2)->type() ||
      then_store->attributes() != else_store->attributes())
    return false;
  ir::Type value_type = then_store->operand(2)->type();
  // The arms' ops move into the rebuilt if, so the two stores stay valid pointers.
  ir::Operation *rebuilt = detail::append_results(op, {&value_type, 1});
  then_store->next()->append_operand(then_store->operand(2));
  else_store->next()->append_operand(else_store->operand(2));
  else_store->parent_region()->erase(else_store);
  // The one store after the if is the first arm's op (its location, its attributes).
  std::unique_ptr<ir::Operation> moved = then_store->parent_region()->take(then_store);
  moved->set_operand(2, rebuilt->result(rebuilt->num_results() - 1));
  rebuilt->parent_region()->insert(rebuilt->next(), std::move(moved));
  return true;
}

bool simplify(ir::Operation *op, PassContext &ctx) {
  if (op->opcode() == ir::Opcode::If) {
    if (sink_common_store(op)) {
      ctx.count("stores sunk below an if");
      return true;
    }
    if (op->num_results() == 0 && only_plain_yield(op->region(0)) &&
        only_plain_yield(op->region(1))) {
      op->parent_region()->erase(op);
      ctx.count("empty ifs removed");
      return true;
    }
    auto c = detail::constant_bits(op->operand(0));
    if (!c)
      return false;
    ir::Region &taken = op->region(*c ? 0 : 1);
    ir::Operation *term = taken.terminator();
    if (!term || term->opcode() != ir::Opcode::Yield)
      return false; // a branch ending in break/continue must stay a branch
    splice_before(taken, op);
    for (unsigned i = 0; i < op->num_results(); ++i)
      op->result(i)->replace_all_uses_with(term->operand(i));
    op->parent_region()->erase(op);
    ctx.count("constant branches inlined");
    return true;
  }
  if (op->opcode() == ir::Opcode::For) {
    auto lo = detail::constant_bits(op->operand(0)), hi = detail::constant_bits(op->operand(1));
    if (!lo || !hi)
      return false;
    ir::Scalar s = op->operand(0)->type().element();
    unsigned w = ir::scalar_bits(s);
    bool runs = ir::is_signed(s) ? ir::sign_extend(*lo, w) < ir::sign_extend(*hi, w) : *lo < *hi;
    if (runs)
      return false;
    for (unsigned i = 0; i < op->num_results(); ++i)
      op->result(i)->replace_all_uses_with(op->operand(3 + i));
    op->parent_region()->erase(op);
    ctx.count("loops that never run removed");
    return true;
  }
  return false;
}

} // namespace

void simplify_cf(ir::Module &module, PassContext &context) {
  for (const auto &k : module.kernels())
    while (detail::visit_post_order(k->body(),
                                    [&](ir::Operation *op) { return simplify(op, context); })) {
    }
}

} // namespace cubecc::passes
