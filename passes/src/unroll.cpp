//===- unroll.cpp - Full unrolling of loops with constant trip counts ------------------------===//
#include "cubecc/passes/unroll.h"

#include "cubecc/ir/clone.h"
#include "cubecc/ir/semantics.h"
#include "rewrite.h"

namespace cubecc::passes {
namespace {

constexpr uint64_t kMaxTrips = 16;
constexpr uint64_t kMaxCopiedOps = 512;

/// Whether a break or continue leaves this loop (not a nested one).
bool exits_early(const ir::Region &r) {
  for (ir::Operation *op : r) {
    if (op->opcode() == ir::Opcode::Break || op->opcode() == ir::Opcode::Continue)
      return true;
    if (op->opcode() == ir::Opcode::If)
      for (unsigned i = 0; i < 2; ++i)
        if (exits_early(op->region(i)))
          return true;
  }
  return false;
}

size_t count_ops(const ir::Region &r) {
  size_t n = 0;
  for (ir::Operation *op : r) {
    ++n;
    for (unsigned i = 0; i < op->num_regions(); ++i)
      n += count_ops(op->region(i));
  }
  return n;
}

/// The trip count of a for loop with constant bounds and step, if it has one.
std::optional<uint64_t> trip_count(const ir::Operation &loop) {
  auto lo = detail::constant_bits(loop.operand(0)), hi = detail::constant_bits(loop.operand(1)),
       step = detail::constant_bits(loop.operand(2));
  if (!lo || !hi || !step)
    return std::nullopt;
  ir::Scalar s = loop.operand(0)->type().element();
  unsigned w = ir::scalar_bits(s);
  if (ir::is_signed(s)) {
    int64_t l = ir::sign_extend(*lo, w), h = ir::sign_extend(*hi, w),
            st = ir::sign_extend(*step, w);
    if (st <= 0)
      return std::nullopt;
    return l >= h ? 0 : static_cast<uint64_t>((h - l + st - 1) / st);
  }
  if (*step == 0)
    return std::nullopt;
  return *lo >= *hi ? 0 : (*hi - *lo + *step - 1) / *step;
}

bool unroll_fully(ir::Module &module, ir::Operation *loop, PassContext &ctx) {
  if (auto hint = loop->attributes().get_int("unroll"); hint && *hint == 1)
    return false;
  auto trips = trip_count(*loop);
  ir::Region &body = loop->region(0);
  if (!trips || *trips > kMaxTrips || exits_early(body) || *trips * count_ops(body) > kMaxCopiedOps)
    return false;
  ir::Type iv_type = loop->operand(0)->type();
  uint64_t lo = *detail::constant_bits(loop->operand(0)),
           step = *detail::constant_bits(loop->operand(2));
  std::vector<ir::Value *> carried(loop->operands().begin() + 3, loop->operands().end());
  for (uint64_t t = 0; t < *trips; ++t) {
    ir::ValueMap map;
    uint64_t iv = (lo + t * step) & ir::width_mask(ir::scalar_bits(iv_type.element()));
    map[body.argument(0)] = detail::insert_constant(module, loop, iv_type, iv);
    for (unsigned c = 0; c < carried.size(); ++c)
      map[body.argument(c + 1)] = carried[c];
    for (ir::Operation *op : body) {
      if (op == body.terminator())
        break;
      loop->parent_region()->insert(loop, ir::clone(*op, map));
    }
    ir::Operation *yield = body.terminator();
    for (unsigned c = 0; c < carried.size(); ++c) {
      ir::Value *v = yield->operand(c);
      auto it = map.find(v);
      carried[c] = it == map.end() ? v : it->second;
    }
  }
  for (unsigned i = 0; i < loop->num_results(); ++i)
    loop->result(i)->replace_all_uses_with(carried[i]);
  loop->parent_region()->erase(loop);
  ctx.count("loops fully unrolled");
  return true;
}

/// Unrolls by the loop's `unroll` factor F: the loop steps by F * step and its body runs F
/// copies, copy k guarded by "iteration k exists" (hi - i > k * step, computed without overflow),
/// so any trip count stays right. Needs a constant step with F * step in range.
bool unroll_by_factor(ir::Module &module, ir::Operation *loop, PassContext &ctx) {
  auto factor = loop->attributes().get_int("unroll");
  auto step = detail::constant_bits(loop->operand(2));
  ir::Region &body = loop->region(0);
  if (!factor || *factor < 2 || *factor > 16 || !step || exits_early(body))
    return false;
  ir::Type iv_type = loop->operand(0)->type();
  ir::Scalar s = iv_type.element();
  unsigned w = ir::scalar_bits(s);
  uint64_t limit = ir::is_signed(s) ? ir::width_mask(w - 1) : ir::width_mask(w);
  uint64_t f = static_cast<uint64_t>(*factor);
  bool positive = ir::is_signed(s) ? ir::sign_extend(*step, w) > 0 : *step > 0;
  if (!positive || *step > limit / f)
    return false;
  ir::Type unsigned_type = ir::Type::scalar(ir::is_signed(s) ? (w == 64   ? ir::Scalar::U64
                                                                : w == 32 ? ir::Scalar::U32
                                                                : w == 16 ? ir::Scalar::U16
                                                                          : ir::Scalar::U8)
                                                             : s);
  ir::Builder b(module);
  ir::Operation *yield = body.terminator();
  b.set_insertion_point_before(yield);
  b.set_location(loop->location());
  ir::Value *iv = body.argument(0);
  ir::Value *hi = loop->operand(1);
  // hi - iv as unsigned: exact, since iv < hi inside the body.
  ir::Value *hi_u = unsigned_type == iv_type
                        ? hi
                        : b.create(ir::Opcode::Bitcast, {hi}, {unsigned_type})->result();
  ir::Value *iv_u = unsigned_type == iv_type
                        ? iv
                        : b.create(ir::Opcode::Bitcast, {iv}, {unsigned_type})->result();
  ir::Value *left = b.op(ir::Opcode::Sub, {hi_u, iv_u});
  std::vector<ir::Value *> carried(yield->operands().begin(), yield->operands().end());
  std::vector<ir::Type> types;
  for (ir::Value *v : carried)
    types.push_back(v->type());
  // The original body, without its terminator, to copy from.
  std::vector<ir::Operation *> original;
  for (ir::Operation *op : body)
    if (op != yield && op != left->defining_op() && op != hi_u->defining_op() &&
        op != iv_u->defining_op())
      original.push_back(op);
  for (uint64_t k = 1; k < f; ++k) {
    b.set_insertion_point_before(yield);
    ir::Value *offset = b.const_int(unsigned_type, static_cast<int64_t>(k * *step));
    ir::Value *exists = b.op(ir::Opcode::Gt, {left, offset});
    ir::Operation *guard = b.create_if(exists, types);
    ir::Region &then = guard->region(0);
    b.set_insertion_point_to_end(then);
    ir::Value *step_k = b.const_int(iv_type, static_cast<int64_t>(k * *step));
    ir::ValueMap map;
    map[iv] = b.op(ir::Opcode::Add, {iv, step_k});
    for (unsigned c = 0; c < carried.size(); ++c)
      map[body.argument(c + 1)] = carried[c];
    for (ir::Operation *op : original)
      then.push_back(ir::clone(*op, map));
    std::vector<ir::Value *> next;
    for (ir::Value *v : yield->operands()) {
      auto it = map.find(v);
      next.push_back(it == map.end() ? v : it->second);
    }
    b.set_insertion_point_to_end(then);
    b.yield(next);
    b.set_insertion_point_to_end(guard->region(1));
    b.yield(carried);
    for (unsigned c = 0; c < carried.size(); ++c)
      carried[c] = guard->result(c);
  }
  for (unsigned c = 0; c < carried.size(); ++c)
    yield->set_operand(c, carried[c]);
  b.set_insertion_point_before(loop);
  loop->set_operand(2, b.const_int(iv_type, static_cast<int64_t>(f * *step)));
  loop->attributes().set("unroll", int64_t{1}); // done: do not unroll again
  ctx.count("loops unrolled by a factor");
  return true;
}

} // namespace

void unroll(ir::Module &module, PassContext &context) {
  for (const auto &k : module.kernels())
    detail::visit_post_order(k->body(), [&](ir::Operation *op) {
      if (op->opcode() == ir::Opcode::For && !unroll_fully(module, op, context))
        unroll_by_factor(module, op, context);
    });
}

} // namespace cubecc::passes
