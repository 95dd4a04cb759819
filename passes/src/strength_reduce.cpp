//===- strength_reduce.cpp - Multiplication and division by powers of two --------------------===//
//
//   mul x, 2^k  -> shl x, k     (any integer type: the low bits are the same)
//   div x, 2^k  -> shr x, k     (unsigned only: signed division rounds toward zero)
//   rem x, 2^k  -> and x, 2^k-1 (unsigned only)
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/passes/strength_reduce.h"

#include "cubecc/ir/semantics.h"
#include "rewrite.h"

#include <bit>

namespace cubecc::passes {

void strength_reduce(ir::Module &module, PassContext &context) {
  for (ir::Operation *op : detail::all_ops(module)) {
    ir::Opcode o = op->opcode();
    if ((o != ir::Opcode::Mul && o != ir::Opcode::Div && o != ir::Opcode::Rem) ||
        !op->result()->type().is_scalar())
      continue;
    ir::Scalar s = op->result()->type().element();
    if (!ir::is_integer(s) || (o != ir::Opcode::Mul && ir::is_signed(s)))
      continue;
    auto c = detail::constant_bits(op->operand(1));
    if (!c || *c < 2 || !std::has_single_bit(*c))
      continue;
    ir::Builder b(module);
    b.set_insertion_point_before(op);
    b.set_location(op->location());
    ir::Type t = op->result()->type();
    ir::Value *x = op->operand(0);
    ir::Value *replacement;
    if (o == ir::Opcode::Rem) {
      replacement = b.op(ir::Opcode::And, {x, detail::insert_constant(module, op, t, *c - 1)});
    } else {
      ir::Value *k = detail::insert_constant(module, op, t, std::countr_zero(*c));
      replacement = b.op(o == ir::Opcode::Mul ? ir::Opcode::Shl : ir::Opcode::Shr, {x, k});
    }
    detail::replace_op(op, {replacement});
    context.count("ops strength-reduced");
  }
}

} // namespace cubecc::passes
