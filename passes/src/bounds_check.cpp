//===- bounds_check.cpp - Checked mode: guard accesses not proven in bounds ------------------===//
#include "cubecc/passes/bounds_check.h"

#include "cubecc/ir/semantics.h"
#include "cubecc/passes/integer_ranges.h"
#include "rewrite.h"

#include <functional>

namespace cubecc::passes {
namespace {

bool is_access(const ir::Operation &op) {
  switch (op.info().signature) {
  case ir::Signature::Load:
  case ir::Signature::Store:
  case ir::Signature::AtomicRmw:
  case ir::Signature::AtomicCmpXchg:
  case ir::Signature::AtomicLoad:
  case ir::Signature::AtomicStore:
    return true;
  default:
    return false;
  }
}

/// Elements the access touches from its index.
unsigned lanes_of(const ir::Operation &op) {
  // a vector load, store or atomic touches one element per lane; stores have no result
  return op.num_results() ? op.result()->type().lanes() : op.operand(2)->type().lanes();
}

/// Zero of a value type (splatted for vectors), inserted before `before`.
ir::Value *zero_of(ir::Module &m, ir::Operation *before, ir::Type t) {
  ir::Value *zero = detail::insert_constant(m, before, t.element_type(), 0);
  if (!t.is_vector())
    return zero;
  ir::Builder b(m);
  b.set_insertion_point_before(before);
  b.set_location(before->location());
  return b.create(ir::Opcode::Splat, {zero}, {t})->result();
}

/// Moves `op` into the then-branch of a new `if ok` (built by `b` where `op` was). A result of
/// `op` becomes the if's, and `fallback(branch)`, called with `b` at the end of the else-branch,
/// gives its value when `ok` is false.
void move_under_guard(ir::Operation *op, ir::Value *ok, ir::Builder &b,
                      const std::function<ir::Value *(ir::Operation *)> &fallback) {
  std::vector<ir::Type> types;
  if (op->num_results())
    types.push_back(op->result()->type());
  ir::Operation *branch = b.create_if(ok, types);
  auto access = op->parent_region()->take(op);
  ir::Operation *moved = branch->region(0).push_back(std::move(access));
  b.set_insertion_point_to_end(branch->region(0));
  if (types.empty()) {
    b.yield();
    b.set_insertion_point_to_end(branch->region(1));
    b.yield();
    return;
  }
  // Uses of the access now take the if's result.
  moved->result()->replace_all_uses_with(branch->result());
  ir::Value *r = moved->result();
  b.yield(std::span<ir::Value *const>(&r, 1));
  b.set_insertion_point_to_end(branch->region(1));
  ir::Value *otherwise = fallback(branch);
  b.yield(std::span<ir::Value *const>(&otherwise, 1));
}

/// Whether `lanes` elements of `memory` from `index` are inside it, built by `b`; null when it
/// cannot be said: an array with more elements than a 32-bit index type's positive range (the
/// size has no constant of the index type).
ir::Value *in_bounds(ir::Builder &b, ir::Value *memory, ir::Value *index, unsigned lanes,
                     PassContext &ctx) {
  ir::Type it = index->type();
  ir::Scalar is = it.element();
  if (ir::scalar_bits(is) < 32) {
    // Compare the index widened to 32 bits (a cast keeps its value, sign-extended for signed
    // types): buffer.size has no narrower form, and an array may be larger than the index
    // type's range while a negative index still is out of bounds.
    is = ir::is_signed(is) ? ir::Scalar::I32 : ir::Scalar::U32;
    it = ir::Type::scalar(is);
    index = b.create(ir::Opcode::Cast, {index}, {it})->result();
  }
  ir::Value *size;
  if (memory->type().kind() == ir::TypeKind::Buffer) {
    size = b.create(ir::Opcode::BufferSize, {memory}, {it})->result();
  } else {
    uint64_t count = memory->type().count();
    if (count > ir::width_mask(ir::scalar_bits(is) - (ir::is_signed(is) ? 1 : 0))) {
      // (an array of 2^31 elements or more, only reachable with a 32-bit index)
      ctx.count("checks left out: index type narrower than the array");
      return nullptr;
    }
    size = b.const_int(it, static_cast<int64_t>(count));
  }
  // ok = 0 <= index && lanes <= size && index <= size - lanes (no overflow anywhere).
  ir::Value *lanes_v = b.const_int(it, lanes);
  ir::Value *ok = b.op(ir::Opcode::And,
                       {b.op(ir::Opcode::Le, {lanes_v, size}),
                        b.op(ir::Opcode::Le, {index, b.op(ir::Opcode::Sub, {size, lanes_v})})});
  if (ir::is_signed(is))
    ok = b.op(ir::Opcode::And, {ok, b.op(ir::Opcode::Ge, {index, b.const_int(it, 0)})});
  return ok;
}

/// Guards `op`. Returns false when it cannot (in_bounds).
bool guard(ir::Module &m, ir::Operation *op, PassContext &ctx) {
  ir::Builder b(m);
  b.set_insertion_point_before(op);
  b.set_location(op->location());
  ir::Value *ok = in_bounds(b, op->operand(0), op->operand(1), lanes_of(*op), ctx);
  if (!ok)
    return false;
  move_under_guard(op, ok, b,
                   [&](ir::Operation *branch) { return zero_of(m, branch, op->result()->type()); });
  ctx.count("checks inserted");
  return true;
}

/// Guards an async.copy: a source outside its buffer is not read (the copy writes zeros, as for
/// a false operand 4), and a copy whose destination is outside the shared array is skipped.
bool guard_async_copy(ir::Module &m, ir::Operation *op, PassContext &ctx) {
  const auto lanes = static_cast<unsigned>(op->attributes().get_int("lanes").value_or(1));
  ir::Builder b(m);
  b.set_insertion_point_before(op);
  b.set_location(op->location());
  ir::Value *src_ok = in_bounds(b, op->operand(2), op->operand(3), lanes, ctx);
  ir::Value *dst_ok = in_bounds(b, op->operand(0), op->operand(1), lanes, ctx);
  if (!src_ok || !dst_ok)
    return false;
  op->set_operand(4, b.op(ir::Opcode::And, {op->operand(4), src_ok}));
  move_under_guard(op, dst_ok, b, nullptr);
  ctx.count("checks inserted");
  return true;
}

/// Guards a matrix.load or matrix.store (docs/ir.md §4.13): the block from `index` spans
/// (lines - 1) * stride + line elements. The test runs in 64 bits, where neither product nor sum
/// can wrap once index and stride are at most the size; its operands are the op's, uniform
/// across the subgroup, so the whole subgroup takes one branch. A load out of bounds gives
/// zeros.
void guard_matrix(ir::Module &m, ir::Operation *op, PassContext &ctx) {
  const bool load = op->opcode() == ir::Opcode::MatrixLoad;
  const ir::Type t = load ? op->result()->type() : op->operand(3)->type();
  const bool col_major = op->attributes().get_int("col_major").value_or(0) != 0;
  const uint32_t lines = col_major ? t.cols() : t.rows(), line = col_major ? t.rows() : t.cols();
  ir::Value *memory = op->operand(0);
  const bool is_signed = ir::is_signed(op->operand(1)->type().element());
  const ir::Type wide = ir::Type::scalar(is_signed ? ir::Scalar::I64 : ir::Scalar::U64);
  ir::Builder b(m);
  b.set_insertion_point_before(op);
  b.set_location(op->location());
  auto widen = [&](ir::Value *v) {
    return v->type() == wide ? v : b.create(ir::Opcode::Cast, {v}, {wide})->result();
  };
  ir::Value *index = widen(op->operand(1)), *stride = widen(op->operand(2));
  ir::Value *size = memory->type().kind() == ir::TypeKind::Buffer
                        ? b.create(ir::Opcode::BufferSize, {memory}, {wide})->result()
                        : b.const_int(wide, static_cast<int64_t>(memory->type().count()));
  ir::Value *last = b.op(
      ir::Opcode::Add,
      {index, b.op(ir::Opcode::Add, {b.op(ir::Opcode::Mul, {stride, b.const_int(wide, lines - 1)}),
                                     b.const_int(wide, line)})});
  ir::Value *ok = b.op(ir::Opcode::And,
                       {b.op(ir::Opcode::Le, {index, size}), b.op(ir::Opcode::Le, {stride, size})});
  ok = b.op(ir::Opcode::And, {ok, b.op(ir::Opcode::Le, {last, size})});
  if (is_signed) {
    ir::Value *zero = b.const_int(wide, 0);
    ok = b.op(ir::Opcode::And, {ok, b.op(ir::Opcode::Ge, {index, zero})});
    ok = b.op(ir::Opcode::And, {ok, b.op(ir::Opcode::Ge, {stride, zero})});
  }
  move_under_guard(op, ok, b, [&](ir::Operation *branch) {
    ir::Value *zero = detail::insert_constant(m, branch, t.element_type(), 0);
    return b.create(ir::Opcode::MatrixFill, {zero}, {t})->result(); // in the else-branch
  });
  ctx.count("checks inserted");
}

} // namespace

void bounds_check(ir::Module &module, PassContext &context) {
  for (const auto &k : module.kernels()) {
    // Decide every access before guarding any: guarding moves accesses into new ifs.
    IntegerRanges ranges(*k);
    std::vector<ir::Operation *> unproven, matrices, copies;
    uint64_t by_range = 0, by_size = 0;
    k->walk([&](ir::Operation *op) {
      if (op->opcode() == ir::Opcode::MatrixLoad || op->opcode() == ir::Opcode::MatrixStore)
        matrices.push_back(op); // (ranges do not reason about the block an access spans)
      if (op->opcode() == ir::Opcode::AsyncCopy)
        copies.push_back(op); // two accesses, guarded together
      if (!is_access(*op))
        return;
      ir::Value *memory = op->operand(0), *index = op->operand(1);
      unsigned lanes = lanes_of(*op);
      if (memory->type().kind() != ir::TypeKind::Buffer) {
        if (IntegerRanges::tracked(index)) {
          IntegerRange r = ranges.range_at(index, *op);
          if (r.lo >= 0 && static_cast<uint64_t>(r.hi) + lanes <= memory->type().count()) {
            ++by_range;
            return;
          }
        }
      } else if (lanes == 1 && ranges.below_buffer_size(index, memory, *op)) {
        // (a vector access would need index + lanes <= size: not taken from these facts)
        ++by_size;
        return;
      }
      unproven.push_back(op);
    });
    uint64_t guarded = 0, unchecked = 0;
    for (ir::Operation *op : unproven)
      (guard(module, op, context) ? guarded : unchecked) += 1;
    for (ir::Operation *op : copies)
      (guard_async_copy(module, op, context) ? guarded : unchecked) += 1;
    for (ir::Operation *op : matrices)
      guard_matrix(module, op, context);
    guarded += matrices.size();
    context.count("checks proven unnecessary", by_range + by_size);
    std::string kernel = "@" + k->name() + ": ";
    context.count(kernel + "accesses guarded", guarded);
    context.count(kernel + "accesses proven in bounds by ranges", by_range);
    context.count(kernel + "accesses proven in bounds by buffer.size facts", by_size);
    if (unchecked)
      context.count(kernel + "accesses left unchecked (array too large)", unchecked);
  }
}

} // namespace cubecc::passes
