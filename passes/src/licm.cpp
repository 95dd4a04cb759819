//===- licm.cpp - Loop-invariant code motion -------------------------------------------------===//
//
// A pure op at the top level of a loop's region whose operands are all defined outside the loop
// computes the same value on every iteration: it moves to just before the loop. (Pure ops cannot
// trap, so running one even when the loop runs zero times is safe.) Inner loops are handled
// first, so an invariant can climb several levels.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/passes/licm.h"

#include "rewrite.h"

namespace cubecc::passes {
namespace {

bool invariant(const ir::Operation &op, const ir::Operation &loop) {
  if (!op.has_flag(ir::Pure) || op.num_regions())
    return false;
  for (ir::Value *v : op.operands())
    if (detail::defined_inside(v, &loop))
      return false;
  return true;
}

void hoist_from(ir::Operation &loop, PassContext &ctx) {
  for (unsigned r = 0; r < loop.num_regions(); ++r) {
    ir::Region &region = loop.region(r);
    for (ir::Operation *op = region.front(); op;) {
      ir::Operation *next = op->next();
      if (invariant(*op, loop)) {
        loop.parent_region()->insert(&loop, region.take(op));
        ctx.count("ops hoisted");
      }
      op = next;
    }
  }
}

} // namespace

void licm(ir::Module &module, PassContext &context) {
  for (const auto &k : module.kernels())
    detail::visit_post_order(k->body(), [&](ir::Operation *op) {
      if (op->opcode() == ir::Opcode::For || op->opcode() == ir::Opcode::While)
        hoist_from(*op, context);
    });
}

} // namespace cubecc::passes
