//===- integer_ranges.cpp ---------------------------------------------------------------------===//
#include "cubecc/passes/integer_ranges.h"

#include "cubecc/ir/semantics.h"
#include "rewrite.h"

#include <algorithm>
#include <limits>

namespace cubecc::passes {
namespace {

/// The full range of an integer type (u64 is not tracked).
IntegerRange full(ir::Scalar s) {
  unsigned w = ir::scalar_bits(s);
  if (ir::is_signed(s))
    return {w == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (w - 1)),
            w == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (w - 1)) - 1};
  return {0, w >= 63 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << w) - 1};
}

/// `r` if it fits in the type, else the type's full range (the arithmetic may have wrapped).
IntegerRange clamp_to(ir::Scalar s, __int128 lo, __int128 hi) {
  IntegerRange f = full(s);
  if (lo < f.lo || hi > f.hi || lo > hi)
    return f;
  return {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

} // namespace

bool IntegerRanges::tracked(const ir::Value *v) {
  return v->type().is_scalar() && ir::is_integer(v->type().element()) &&
         v->type().element() != ir::Scalar::U64;
}

IntegerRanges::IntegerRanges(const ir::Kernel &kernel, uint32_t max_subgroup_size)
    : kernel_(kernel), max_subgroup_size_(max_subgroup_size) {
  region(kernel.body());
}

IntegerRange IntegerRanges::range(const ir::Value *v) const {
  auto it = ranges_.find(v);
  if (it != ranges_.end())
    return it->second;
  return tracked(v) ? full(v->type().element()) : IntegerRange{};
}

void IntegerRanges::set(const ir::Value *v, IntegerRange r) {
  if (tracked(v))
    ranges_[v] = r;
}

void IntegerRanges::region(const ir::Region &r) {
  for (const ir::Operation *o : r)
    op(*o);
}

void IntegerRanges::op(const ir::Operation &o) {
  // Nested regions first where their values feed this op's results (if, loops).
  const auto &wg = kernel_.workgroup_size();
  uint64_t invocations = uint64_t{wg[0]} * wg[1] * wg[2];
  auto r = [&](unsigned i) { return range(o.operand(i)); };
  switch (o.opcode()) {
  case ir::Opcode::Const: {
    uint64_t bits = static_cast<uint64_t>(*o.attributes().get_int("value"));
    if (!tracked(o.result()))
      return;
    ir::Scalar s = o.result()->type().element();
    int64_t v =
        ir::is_signed(s) ? ir::sign_extend(bits, ir::scalar_bits(s)) : static_cast<int64_t>(bits);
    set(o.result(), {v, v});
    return;
  }
  case ir::Opcode::LocalIndex:
    set(o.result(), {0, static_cast<int64_t>(invocations - 1)});
    return;
  case ir::Opcode::SubgroupLane:
    set(o.result(), {0, static_cast<int64_t>(max_subgroup_size_ - 1)});
    return;
  case ir::Opcode::VecExtract: {
    // Lanes of local_id: below the workgroup size in that dimension.
    const ir::Operation *src = o.operand(0)->defining_op();
    auto lane = o.attributes().get_int("lane");
    if (src && lane && src->opcode() == ir::Opcode::LocalId)
      set(o.result(), {0, static_cast<int64_t>(wg[*lane] - 1)});
    else if (src && lane && src->opcode() == ir::Opcode::WorkgroupSize)
      set(o.result(), {wg[*lane], wg[*lane]});
    return;
  }
  default:
    break;
  }
  if (o.num_results() == 1 && tracked(o.result()) && o.num_regions() == 0) {
    ir::Scalar s = o.result()->type().element();
    switch (o.opcode()) {
    case ir::Opcode::Add:
      set(o.result(), clamp_to(s, __int128(r(0).lo) + r(1).lo, __int128(r(0).hi) + r(1).hi));
      return;
    case ir::Opcode::Sub:
      set(o.result(), clamp_to(s, __int128(r(0).lo) - r(1).hi, __int128(r(0).hi) - r(1).lo));
      return;
    case ir::Opcode::Mul: {
      __int128 c[4] = {__int128(r(0).lo) * r(1).lo, __int128(r(0).lo) * r(1).hi,
                       __int128(r(0).hi) * r(1).lo, __int128(r(0).hi) * r(1).hi};
      set(o.result(), clamp_to(s, *std::min_element(c, c + 4), *std::max_element(c, c + 4)));
      return;
    }
    case ir::Opcode::And:
      // A non-negative operand bounds the result.
      if (r(1).lo >= 0)
        set(o.result(), {0, r(0).lo >= 0 ? std::min(r(0).hi, r(1).hi) : r(1).hi});
      else if (r(0).lo >= 0)
        set(o.result(), {0, r(0).hi});
      return;
    case ir::Opcode::Rem:
      if (!ir::is_signed(s) && r(1).lo > 0)
        set(o.result(), {0, std::min(r(0).hi, r(1).hi - 1)});
      return;
    case ir::Opcode::Div:
      if (!ir::is_signed(s) && r(1).lo > 0)
        set(o.result(), {r(0).lo / r(1).hi, r(0).hi / r(1).lo});
      return;
    case ir::Opcode::Shr:
      // (amounts of the width or more are taken modulo the width: not tracked)
      if (r(0).lo >= 0 && r(1).lo >= 0 && r(1).hi < static_cast<int64_t>(ir::scalar_bits(s)))
        set(o.result(), {r(0).lo >> r(1).hi, r(0).hi >> r(1).lo});
      return;
    case ir::Opcode::Min:
      set(o.result(), {std::min(r(0).lo, r(1).lo), std::min(r(0).hi, r(1).hi)});
      return;
    case ir::Opcode::Max:
      set(o.result(), {std::max(r(0).lo, r(1).lo), std::max(r(0).hi, r(1).hi)});
      return;
    case ir::Opcode::Select:
      set(o.result(), {std::min(r(1).lo, r(2).lo), std::max(r(1).hi, r(2).hi)});
      return;
    case ir::Opcode::Cast:
      if (tracked(o.operand(0))) {
        IntegerRange in = r(0), f = full(s);
        if (in.lo >= f.lo && in.hi <= f.hi) // the value is kept exactly
          set(o.result(), in);
      }
      return;
    default:
      return;
    }
  }
  if (o.opcode() == ir::Opcode::If) {
    region(o.region(0));
    region(o.region(1));
    for (unsigned i = 0; i < o.num_results(); ++i) {
      IntegerRange merged{};
      bool first = true;
      for (unsigned b = 0; b < 2; ++b) {
        const ir::Operation *term = o.region(b).terminator();
        if (!term || term->opcode() != ir::Opcode::Yield)
          continue;
        IntegerRange y = range(term->operand(i));
        merged = first ? y : IntegerRange{std::min(merged.lo, y.lo), std::max(merged.hi, y.hi)};
        first = false;
      }
      if (!first)
        set(o.result(i), merged);
    }
    return;
  }
  if (o.opcode() == ir::Opcode::For) {
    // lo <= iv < hi while the loop runs (the step is positive, and a step that would wrap ends
    // the loop); carried values and results are not tracked.
    const ir::Region &body = o.region(0);
    IntegerRange lo = r(0), hi = r(1);
    if (hi.hi > std::numeric_limits<int64_t>::min())
      set(body.argument(0), {lo.lo, std::max(lo.lo, hi.hi - 1)});
    region(body);
    return;
  }
  for (unsigned i = 0; i < o.num_regions(); ++i)
    region(o.region(i));
}

} // namespace cubecc::passes
