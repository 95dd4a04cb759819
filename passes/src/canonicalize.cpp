//===- canonicalize.cpp - Constant folding and algebraic identities --------------------------===//
//
// Folding uses ir::evaluate_lane / ir::convert_lane, the interpreter's own semantics, so a folded
// kernel computes exactly what it computed before. Only ops whose result is exactly defined are
// folded: transcendental math (exp, sin, ...) has the target's accuracy and is left to the target.
// Identities live in one table of patterns; each must hold for every input, NaN and -0.0 included
// (so `x + 0.0 -> x` is not one: -0.0 + 0.0 is +0.0).
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/passes/canonicalize.h"

#include "cubecc/ir/semantics.h"
#include "rewrite.h"

#include <utility>

namespace cubecc::passes {
namespace {

using ir::Opcode;
using ir::Operation;
using ir::Value;

/// Whether the host may compute `op` in place of the device: not when its accuracy is the
/// target's, so that a kernel computes the same whether or not its operands are constants.
bool foldable(Opcode op) {
  return !(ir::op_info(op).flags & ir::Approximate);
}

/// Folds a scalar op whose operands are all constants.
bool fold(ir::Module &m, Operation *op, PassContext &ctx) {
  ir::Signature sig = op->info().signature;
  bool elementwise = sig == ir::Signature::Unary || sig == ir::Signature::Binary ||
                     sig == ir::Signature::Ternary || sig == ir::Signature::Compare ||
                     sig == ir::Signature::Classify || sig == ir::Signature::Cast ||
                     sig == ir::Signature::Select;
  if (!elementwise || !foldable(op->opcode()) || !op->result()->type().is_scalar())
    return false;
  uint64_t bits[3] = {0, 0, 0};
  for (unsigned i = 0; i < op->num_operands(); ++i) {
    auto c = detail::constant_bits(op->operand(i));
    if (!c || !op->operand(i)->type().is_scalar())
      return false;
    bits[i] = *c;
  }
  ir::Type t = op->result()->type();
  uint64_t result;
  if (sig == ir::Signature::Select)
    result = bits[0] ? bits[1] : bits[2];
  else if (sig == ir::Signature::Cast)
    result = ir::convert_lane(op->operand(0)->type().element(), t.element(), bits[0]);
  else
    result = ir::evaluate_lane(op->opcode(), op->operand(0)->type().element(), bits[0], bits[1],
                               bits[2]);
  detail::replace_op(op, {detail::insert_constant(m, op, t, result)});
  ctx.count("ops folded");
  return true;
}

/// A lane of `workgroup_size`: the kernel's `workgroup(x, y, z)`, a constant.
bool fold_workgroup_size(ir::Module &m, Operation *op, PassContext &ctx) {
  if (op->opcode() != Opcode::VecExtract)
    return false;
  const Operation *src = op->operand(0)->defining_op();
  auto lane = op->attributes().get_int("lane");
  if (!src || src->opcode() != Opcode::WorkgroupSize || !lane || *lane < 0 || *lane > 2)
    return false;
  uint32_t size = op->parent_region()->kernel()->workgroup_size()[static_cast<size_t>(*lane)];
  detail::replace_op(op, {detail::insert_constant(m, op, op->result()->type(), size)});
  ctx.count("ops folded");
  return true;
}

bool is_constant(const Value *v, uint64_t bits) {
  auto c = detail::constant_bits(v);
  return c && *c == bits;
}

bool is_integer(const Value *v) {
  return v->type().is_value() && ir::is_integer(v->type().element());
}

/// The all-ones value of an integer or bool type.
uint64_t all_ones(const Value *v) {
  return ir::width_mask(ir::scalar_bits(v->type().element()));
}

uint64_t float_bits(const Value *v, double x) {
  return ir::from_double(v->type().element(), x);
}

/// One algebraic identity: when `matches`, the op's (single) result is replaced by `result`.
struct Identity {
  Opcode op;
  const char *name;
  bool (*matches)(Operation *);
  /// Index of the operand that replaces the result, or -1 for a constant from `constant`.
  int operand;
  uint64_t (*constant)(Operation *) = nullptr;
};

Value *lhs(Operation *op) {
  return op->operand(0);
}
Value *rhs(Operation *op) {
  return op->operand(1);
}
bool scalar_int(Operation *op) {
  return op->result()->type().is_scalar() && is_integer(lhs(op));
}
bool scalar(Operation *op) {
  return op->operand(op->num_operands() - 1)->type().is_scalar();
}

const Identity kIdentities[] = {
    {Opcode::Add, "x + 0 -> x",
     [](Operation *op) { return scalar_int(op) && is_constant(rhs(op), 0); }, 0},
    {Opcode::Sub, "x - 0 -> x",
     [](Operation *op) { return scalar_int(op) && is_constant(rhs(op), 0); }, 0},
    {Opcode::Sub, "x - x -> 0", [](Operation *op) { return scalar_int(op) && lhs(op) == rhs(op); },
     -1, [](Operation *) -> uint64_t { return 0; }},
    {Opcode::Mul, "x * 1 -> x",
     [](Operation *op) { return scalar_int(op) && is_constant(rhs(op), 1); }, 0},
    {Opcode::Mul, "x * 1.0 -> x",
     [](Operation *op) {
       return scalar(op) && !is_integer(lhs(op)) && is_constant(rhs(op), float_bits(rhs(op), 1.0));
     },
     0},
    {Opcode::Mul, "x * 0 -> 0",
     [](Operation *op) { return scalar_int(op) && is_constant(rhs(op), 0); }, 1},
    {Opcode::Div, "x / 1 -> x",
     [](Operation *op) { return scalar_int(op) && is_constant(rhs(op), 1); }, 0},
    {Opcode::And, "x & x -> x", [](Operation *op) { return lhs(op) == rhs(op); }, 0},
    {Opcode::Or, "x | x -> x", [](Operation *op) { return lhs(op) == rhs(op); }, 0},
    {Opcode::And, "x & 0 -> 0", [](Operation *op) { return scalar(op) && is_constant(rhs(op), 0); },
     1},
    {Opcode::Or, "x | 0 -> x", [](Operation *op) { return scalar(op) && is_constant(rhs(op), 0); },
     0},
    {Opcode::Xor, "x ^ 0 -> x", [](Operation *op) { return scalar(op) && is_constant(rhs(op), 0); },
     0},
    {Opcode::And, "x & ~0 -> x",
     [](Operation *op) { return scalar(op) && is_constant(rhs(op), all_ones(rhs(op))); }, 0},
    {Opcode::Or, "x | ~0 -> ~0",
     [](Operation *op) { return scalar(op) && is_constant(rhs(op), all_ones(rhs(op))); }, 1},
    {Opcode::Xor, "x ^ x -> 0", [](Operation *op) { return scalar(op) && lhs(op) == rhs(op); }, -1,
     [](Operation *) -> uint64_t { return 0; }},
    {Opcode::Shl, "x << 0 -> x",
     [](Operation *op) { return scalar(op) && is_constant(rhs(op), 0); }, 0},
    {Opcode::Shr, "x >> 0 -> x",
     [](Operation *op) { return scalar(op) && is_constant(rhs(op), 0); }, 0},
    {Opcode::Select, "select(true, a, b) -> a",
     [](Operation *op) { return lhs(op)->type().is_scalar() && is_constant(lhs(op), 1); }, 1},
    {Opcode::Select, "select(false, a, b) -> b",
     [](Operation *op) { return lhs(op)->type().is_scalar() && is_constant(lhs(op), 0); }, 2},
    {Opcode::Select, "select(c, a, a) -> a",
     [](Operation *op) { return op->operand(1) == op->operand(2); }, 1},
    {Opcode::Eq, "x == x -> true (integers)",
     [](Operation *op) {
       return scalar(op) && !ir::is_float(lhs(op)->type().element()) && lhs(op) == rhs(op);
     },
     -1, [](Operation *) -> uint64_t { return 1; }},
    {Opcode::Ne, "x != x -> false (integers)",
     [](Operation *op) {
       return scalar(op) && !ir::is_float(lhs(op)->type().element()) && lhs(op) == rhs(op);
     },
     -1, [](Operation *) -> uint64_t { return 0; }},
    {Opcode::Cast, "cast to the same type -> x",
     [](Operation *op) { return lhs(op)->type() == op->result()->type(); }, 0},
    {Opcode::Min, "min(x, x) -> x", [](Operation *op) { return lhs(op) == rhs(op); }, 0},
    {Opcode::Max, "max(x, x) -> x", [](Operation *op) { return lhs(op) == rhs(op); }, 0},
};

bool apply_identity(ir::Module &m, Operation *op, PassContext &ctx) {
  for (const Identity &id : kIdentities) {
    if (id.op != op->opcode() || !id.matches(op))
      continue;
    Value *replacement =
        id.operand >= 0 ? op->operand(static_cast<unsigned>(id.operand))
                        : detail::insert_constant(m, op, op->result()->type(), id.constant(op));
    detail::replace_op(op, {replacement});
    ctx.count(std::string("identity: ") + id.name);
    return true;
  }
  return false;
}

/// Constants go to the right of commutative ops (so identities and CSE see one form).
bool order_operands(Operation *op, PassContext &ctx) {
  if (!op->has_flag(ir::Commutative) || op->num_operands() != 2)
    return false;
  if (detail::constant_bits(op->operand(0)) && !detail::constant_bits(op->operand(1))) {
    Value *a = op->operand(0), *b = op->operand(1);
    op->set_operand(0, b);
    op->set_operand(1, a);
    ctx.count("commutative operands reordered");
    return true;
  }
  return false;
}

} // namespace

void canonicalize(ir::Module &module, PassContext &context) {
  for (int round = 0; round < 16; ++round) {
    bool changed = false;
    for (Operation *op : detail::all_ops(module)) {
      if (op->num_regions() || op->num_results() != 1)
        continue;
      if (order_operands(op, context))
        changed = true;
      if (fold(module, op, context) || fold_workgroup_size(module, op, context) ||
          apply_identity(module, op, context))
        changed = true;
    }
    if (!changed)
      return;
  }
}

} // namespace cubecc::passes
