//===- dce.cpp - Dead code elimination -------------------------------------------------------===//
#include "cubecc/passes/dce.h"

#include "rewrite.h"

namespace cubecc::passes {
namespace {

bool results_unused(const ir::Operation &op) {
  for (unsigned i = 0; i < op.num_results(); ++i)
    if (op.result(i)->has_uses())
      return false;
  return true;
}

/// Whether removing `op` (its results unused) changes nothing observable.
bool removable(const ir::Operation &op) {
  if (op.is_terminator() || !results_unused(op))
    return false;
  if (op.has_flag(ir::Pure) || op.has_flag(ir::Allocates))
    return true;
  // An unused load reads nothing anyone sees (a kernel that reads out of bounds is wrong anyway).
  if (op.opcode() == ir::Opcode::Load)
    return true;
  // Nor does an unused matrix op other than a store: it makes a value and synchronizes nothing.
  if (ir::is_matrix_op(op.opcode()) && op.opcode() != ir::Opcode::MatrixStore)
    return true;
  if (op.num_regions() == 0)
    return false;
  bool is_loop = op.opcode() == ir::Opcode::For || op.opcode() == ir::Opcode::While;
  for (unsigned r = 0; r < op.num_regions(); ++r)
    if (!detail::has_no_effects(op.region(r), is_loop))
      return false;
  return true;
}

/// Removes dead ops of `r`, last first so that an op's operands become dead in the same sweep.
bool sweep(ir::Region &r, PassContext &ctx) {
  bool changed = false;
  for (ir::Operation *op = r.back(); op;) {
    ir::Operation *prev = op->prev();
    for (unsigned i = 0; i < op->num_regions(); ++i)
      changed |= sweep(op->region(i), ctx);
    if (removable(*op)) {
      r.erase(op);
      ctx.count("ops removed");
      changed = true;
    }
    op = prev;
  }
  return changed;
}

} // namespace

void dce(ir::Module &module, PassContext &context) {
  for (const auto &k : module.kernels())
    while (sweep(k->body(), context)) {
    }
}

} // namespace cubecc::passes
