//===- simplify_cf.cpp - Constant branches, empty ifs, loops that never run ------------------===//
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

bool simplify(ir::Operation *op, PassContext &ctx) {
  if (op->opcode() == ir::Opcode::If) {
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
