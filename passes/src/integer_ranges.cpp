//===- integer_ranges.cpp ---------------------------------------------------------------------===//
#include "cubecc/passes/integer_ranges.h"

#include "cubecc/ir/semantics.h"
#include "rewrite.h"

#include <algorithm>
#include <limits>
#include <optional>

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

/// [lo, hi] with each bound clamped to the type's range: the range of a saturating result.
IntegerRange saturate(ir::Scalar s, __int128 lo, __int128 hi) {
  IntegerRange f = full(s);
  return {static_cast<int64_t>(std::clamp<__int128>(lo, f.lo, f.hi)),
          static_cast<int64_t>(std::clamp<__int128>(hi, f.lo, f.hi))};
}

bool is_integer_scalar(const ir::Value *v) {
  return v->type().is_scalar() && ir::is_integer(v->type().element());
}

/// The relations that `cond` (a bool) being `holds` implies: comparisons of integer scalars,
/// through `and` (when true), `or` (when false) and `not`. Other conditions imply nothing here.
void relations_of(const ir::Value *cond, bool holds, std::vector<Relation> &out,
                  unsigned depth = 0) {
  const ir::Operation *d = cond->defining_op();
  if (!d || depth > 16)
    return;
  switch (d->opcode()) {
  case ir::Opcode::And:
    if (holds) {
      relations_of(d->operand(0), true, out, depth + 1);
      relations_of(d->operand(1), true, out, depth + 1);
    }
    return;
  case ir::Opcode::Or:
    if (!holds) {
      relations_of(d->operand(0), false, out, depth + 1);
      relations_of(d->operand(1), false, out, depth + 1);
    }
    return;
  case ir::Opcode::Not:
    relations_of(d->operand(0), !holds, out, depth + 1);
    return;
  default:
    break;
  }
  if (d->num_operands() != 2 || !is_integer_scalar(d->operand(0)))
    return;
  const ir::Value *a = d->operand(0), *b = d->operand(1);
  switch (d->opcode()) {
  case ir::Opcode::Lt: // a < b, else b <= a
    out.push_back(holds ? Relation{a, b, Relation::Lt} : Relation{b, a, Relation::Le});
    return;
  case ir::Opcode::Le: // a <= b, else b < a
    out.push_back(holds ? Relation{a, b, Relation::Le} : Relation{b, a, Relation::Lt});
    return;
  case ir::Opcode::Gt: // b < a, else a <= b
    out.push_back(holds ? Relation{b, a, Relation::Lt} : Relation{a, b, Relation::Le});
    return;
  case ir::Opcode::Ge: // b <= a, else a < b
    out.push_back(holds ? Relation{b, a, Relation::Le} : Relation{a, b, Relation::Lt});
    return;
  case ir::Opcode::Eq:
    if (holds)
      out.push_back({a, b, Relation::Eq});
    return;
  case ir::Opcode::Ne:
    if (!holds)
      out.push_back({a, b, Relation::Eq});
    return;
  default:
    return;
  }
}

/// The region `v` is defined in (its defining op's, or the region whose argument it is).
const ir::Region *home_of(const ir::Value *v) {
  return v->defining_op() ? v->defining_op()->parent_region() : v->owner_region();
}

/// Whether `v` is defined inside `r` or in a region nested in it.
bool defined_inside(const ir::Value *v, const ir::Region &r) {
  for (const ir::Region *h = home_of(v); h;) {
    if (h == &r)
      return true;
    const ir::Operation *p = h->parent_op();
    h = p ? p->parent_region() : nullptr;
  }
  return false;
}

/// Whether `op` or an op nested in it writes to the memory object `memory`.
bool writes_to(const ir::Operation &op, const ir::Value *memory) {
  bool writes = false;
  op.walk([&](const ir::Operation *o) {
    writes |= o->has_flag(ir::WritesMemory) && o->num_operands() > 0 && o->operand(0) == memory;
  });
  return writes;
}

/// Narrows the ranges of a relation's operands: `get` reads a range, `put` records a narrower
/// one. A relation that leaves nothing possible (the code is unreachable) narrows nothing.
template <class Get, class Put> void apply(const Relation &rel, Get get, Put put) {
  if (!IntegerRanges::tracked(rel.lhs) || !IntegerRanges::tracked(rel.rhs))
    return;
  IntegerRange x = get(rel.lhs), y = get(rel.rhs);
  __int128 strict = rel.kind == Relation::Lt ? 1 : 0;
  __int128 x_hi = std::min<__int128>(x.hi, __int128(y.hi) - strict);
  __int128 y_lo = std::max<__int128>(y.lo, __int128(x.lo) + strict);
  IntegerRange nx{x.lo, static_cast<int64_t>(std::max<__int128>(x_hi, x.lo))};
  IntegerRange ny{static_cast<int64_t>(std::min<__int128>(y_lo, y.hi)), y.hi};
  if (rel.kind == Relation::Eq) {
    nx = {std::max(x.lo, y.lo), std::min(x.hi, y.hi)};
    ny = nx;
  }
  if (x_hi < x.lo || y_lo > y.hi || nx.lo > nx.hi)
    return;
  if (nx.lo != x.lo || nx.hi != x.hi)
    put(rel.lhs, nx);
  if (ny.lo != y.lo || ny.hi != y.hi)
    put(rel.rhs, ny);
}

/// The relations that hold in region `r` (all of it) because it was entered: the condition of
/// an `if` (true in the then-branch, false in the else-branch), `lo <= iv < hi` in a `for`
/// body (docs/ir.md §5.3: the loop ends before iv would pass hi), and in a `while`'s `do`
/// region the condition, on the values it forwards (the region's arguments) and on values
/// defined outside the loop.
void relations_entering(const ir::Region &r, std::vector<Relation> &out) {
  const ir::Operation *p = r.parent_op();
  if (!p)
    return;
  if (p->opcode() == ir::Opcode::If) {
    relations_of(p->operand(0), &r == &p->region(0), out);
  } else if (p->opcode() == ir::Opcode::For && &r == &p->region(0)) {
    const ir::Value *iv = r.argument(0);
    out.push_back({p->operand(0), iv, Relation::Le});
    out.push_back({iv, p->operand(1), Relation::Lt});
  } else if (p->opcode() == ir::Opcode::While && &r == &p->region(1)) {
    const ir::Operation *c = p->region(0).terminator();
    if (!c || c->opcode() != ir::Opcode::Condition)
      return;
    std::vector<Relation> before;
    relations_of(c->operand(0), true, before);
    auto forwarded = [&](const ir::Value *v) -> const ir::Value * {
      for (unsigned j = 1; j < c->num_operands(); ++j)
        if (c->operand(j) == v)
          return r.argument(j - 1);
      return defined_inside(v, p->region(0)) ? nullptr : v;
    };
    for (const Relation &rel : before) {
      const ir::Value *lhs = forwarded(rel.lhs), *rhs = forwarded(rel.rhs);
      if (lhs && rhs)
        out.push_back({lhs, rhs, rel.kind});
    }
  }
}

} // namespace

bool IntegerRanges::tracked(const ir::Value *v) {
  return is_integer_scalar(v) && v->type().element() != ir::Scalar::U64;
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

IntegerRange IntegerRanges::lookup(const ir::Value *v) const {
  for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
    if (it->first == v)
      return it->second;
  return range(v);
}

void IntegerRanges::set(const ir::Value *v, IntegerRange r) {
  if (tracked(v))
    ranges_[v] = r;
}

void IntegerRanges::narrow(const std::vector<Relation> &relations) {
  // Twice, so that a chain of two relations (i < j, j < 8) reaches i whatever their order.
  for (int round = 0; round < 2; ++round)
    for (const Relation &rel : relations)
      apply(
          rel, [&](const ir::Value *v) { return lookup(v); },
          [&](const ir::Value *v, IntegerRange r) { scope_.emplace_back(v, r); });
}

void IntegerRanges::region_under(const ir::Region &r, const std::function<void()> &at_end) {
  size_t depth = scope_.size();
  std::vector<Relation> relations;
  relations_entering(r, relations);
  narrow(relations);
  region(r);
  if (at_end)
    at_end();
  scope_.resize(depth);
}

std::vector<Relation> IntegerRanges::dominating_relations(const ir::Operation &at) {
  std::vector<Relation> out;
  for (const ir::Region *r = at.parent_region(); r && r->parent_op();
       r = r->parent_op()->parent_region())
    relations_entering(*r, out);
  return out;
}

bool IntegerRanges::same_value(const ir::Value *a, const ir::Value *b) {
  if (a == b)
    return true;
  const ir::Operation *da = a->defining_op(), *db = b->defining_op();
  if (!da || !db || da->opcode() != ir::Opcode::Load || db->opcode() != ir::Opcode::Load ||
      a->type() != b->type())
    return false;
  const ir::Value *memory = da->operand(0);
  if (memory != db->operand(0) || memory->type().kind() != ir::TypeKind::Local)
    return false;
  auto ca = detail::constant_bits(da->operand(1)), cb = detail::constant_bits(db->operand(1));
  if (da->operand(1) != db->operand(1) && !(ca && cb && *ca == *cb))
    return false;
  // The ancestors of b up to a's region, innermost first; the last one is in a's region.
  const ir::Region *home = da->parent_region();
  std::vector<const ir::Operation *> chain{db};
  while (chain.back()->parent_region() != home) {
    const ir::Operation *p = chain.back()->parent_op();
    if (!p)
      return false; // a does not dominate b
    chain.push_back(p);
  }
  // No write after a before b's ancestor in a's region.
  const ir::Operation *o = da->next();
  for (; o && o != chain.back(); o = o->next())
    if (writes_to(*o, memory))
      return false;
  if (!o)
    return false; // b's ancestor comes before a
  // Going down: a loop on the way may run a write after b in an earlier iteration; within each
  // region, nothing before the next ancestor may write.
  for (size_t i = chain.size() - 1; i > 0; --i) {
    const ir::Operation *outer = chain[i], *inner = chain[i - 1];
    if ((outer->opcode() == ir::Opcode::For || outer->opcode() == ir::Opcode::While) &&
        writes_to(*outer, memory))
      return false;
    for (const ir::Operation *x = inner->parent_region()->front(); x != inner; x = x->next())
      if (writes_to(*x, memory))
        return false;
  }
  return true;
}

IntegerRange IntegerRanges::range_at(const ir::Value *v, const ir::Operation &at) const {
  if (!tracked(v))
    return range(v);
  std::vector<Relation> relations = dominating_relations(at);
  // A relation on another load of the same Var is a relation on v.
  for (Relation &rel : relations)
    for (const ir::Value **side : {&rel.lhs, &rel.rhs})
      if (*side != v && (same_value(*side, v) || same_value(v, *side)))
        *side = v;
  std::vector<std::pair<const ir::Value *, IntegerRange>> local;
  auto get = [&](const ir::Value *x) {
    for (auto it = local.rbegin(); it != local.rend(); ++it)
      if (it->first == x)
        return it->second;
    return range(x);
  };
  for (int round = 0; round < 2; ++round)
    for (const Relation &rel : relations)
      apply(rel, get, [&](const ir::Value *x, IntegerRange r) { local.emplace_back(x, r); });
  return get(v);
}

namespace {

/// Whether `x < bound` (`strict`) or `x <= bound` implies `x < buffer.size(buffer)` at `at`,
/// for x of `bound`'s type.
bool bounds_by_size(const IntegerRanges &ranges, const ir::Value *bound, bool strict,
                    const ir::Value *buffer, const ir::Operation &at) {
  const ir::Operation *d = bound->defining_op();
  if (!d)
    return false;
  auto is_size = [&](const ir::Value *v) {
    const ir::Operation *s = v->defining_op();
    return s && s->opcode() == ir::Opcode::BufferSize && s->operand(0) == buffer;
  };
  if (is_size(bound))
    return strict;
  if (d->opcode() == ir::Opcode::Min)
    return bounds_by_size(ranges, d->operand(0), strict, buffer, at) ||
           bounds_by_size(ranges, d->operand(1), strict, buffer, at);
  if (d->opcode() == ir::Opcode::Sub && is_size(d->operand(0))) {
    // x <= size - c with c >= 1 (or x < size - c with c >= 0), when size - c does not wrap:
    // for an unsigned size, known to be at least c; a signed size is at least 0 when the count
    // fits in its type, and when it does not, every non-negative index is below the count.
    auto bits = detail::constant_bits(d->operand(1));
    if (!bits)
      return false;
    ir::Scalar s = bound->type().element();
    unsigned w = ir::scalar_bits(s);
    bool is_signed = ir::is_signed(s);
    __int128 c = is_signed ? __int128(ir::sign_extend(*bits, w)) : __int128(*bits);
    if (c < (strict ? 0 : 1))
      return false;
    if (is_signed)
      return true;
    if (!IntegerRanges::tracked(d->operand(0)))
      return false;
    return ranges.range_at(d->operand(0), at).lo >= c;
  }
  return false;
}

} // namespace

bool IntegerRanges::below_buffer_size(const ir::Value *index, const ir::Value *buffer,
                                      const ir::Operation &at) const {
  if (!is_integer_scalar(index))
    return false;
  bool proven = false;
  for (const Relation &rel : dominating_relations(at)) {
    // x < y, x <= y, or both ways for x == y.
    std::pair<const ir::Value *, const ir::Value *> sides[2] = {{rel.lhs, rel.rhs},
                                                                {rel.rhs, rel.lhs}};
    for (unsigned k = 0; k < (rel.kind == Relation::Eq ? 2u : 1u) && !proven; ++k) {
      auto [x, y] = sides[k];
      if (same_value(x, index) || same_value(index, x))
        proven = bounds_by_size(*this, y, rel.kind == Relation::Lt, buffer, at);
    }
    if (proven)
      break;
  }
  if (!proven)
    return false;
  // A signed index must also be non-negative (u64 is not tracked, but unsigned anyway).
  return !ir::is_signed(index->type().element()) || range_at(index, at).lo >= 0;
}

void IntegerRanges::region(const ir::Region &r) {
  for (const ir::Operation *o : r)
    op(*o);
}

void IntegerRanges::op(const ir::Operation &o) {
  const auto &wg = kernel_.workgroup_size();
  uint64_t invocations = uint64_t{wg[0]} * wg[1] * wg[2];
  auto r = [&](unsigned i) { return lookup(o.operand(i)); };
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
  case ir::Opcode::SubgroupId: // local_index / subgroup_size
    set(o.result(), {0, static_cast<int64_t>(invocations - 1)});
    return;
  case ir::Opcode::NumSubgroups: // at most one per invocation
    set(o.result(), {1, static_cast<int64_t>(invocations)});
    return;
  case ir::Opcode::SubgroupLane:
    set(o.result(), {0, static_cast<int64_t>(max_subgroup_size_ - 1)});
    return;
  case ir::Opcode::Load:
    // A reload of a Var (a local array) narrowed in this scope through an earlier load of it:
    // `if (v < 8) { a[v + 1] }` with v loaded twice.
    if (tracked(o.result()) && o.operand(0)->type().kind() == ir::TypeKind::Local)
      for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
        if (same_value(it->first, o.result())) {
          set(o.result(), it->second);
          break;
        }
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
    case ir::Opcode::Shl:
      // x << n is x * 2^n modulo 2^N (strength-reduce writes multiplications so); amounts of
      // the width or more are not tracked.
      if (r(1).lo >= 0 && r(1).hi < static_cast<int64_t>(ir::scalar_bits(s))) {
        __int128 lo = __int128(1) << r(1).lo, hi = __int128(1) << r(1).hi;
        __int128 c[4] = {r(0).lo * lo, r(0).lo * hi, r(0).hi * lo, r(0).hi * hi};
        set(o.result(), clamp_to(s, *std::min_element(c, c + 4), *std::max_element(c, c + 4)));
      }
      return;
    case ir::Opcode::Shr:
      // (amounts of the width or more are taken modulo the width: not tracked)
      if (r(0).lo >= 0 && r(1).lo >= 0 && r(1).hi < static_cast<int64_t>(ir::scalar_bits(s)))
        set(o.result(), {r(0).lo >> r(1).hi, r(0).hi >> r(1).lo});
      return;
    case ir::Opcode::Popcount:
    case ir::Opcode::Clz:
    case ir::Opcode::Ctz:
    case ir::Opcode::Ffs: // a bit count or position: 0 ... N
      set(o.result(), {0, static_cast<int64_t>(ir::scalar_bits(s))});
      return;
    case ir::Opcode::AddSat: // monotonic: the bounds saturate too
      set(o.result(), saturate(s, __int128(r(0).lo) + r(1).lo, __int128(r(0).hi) + r(1).hi));
      return;
    case ir::Opcode::SubSat:
      set(o.result(), saturate(s, __int128(r(0).lo) - r(1).hi, __int128(r(0).hi) - r(1).lo));
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
    // Each branch under its side of the condition; a yielded value's range as narrowed there.
    std::vector<std::optional<IntegerRange>> merged(o.num_results());
    for (unsigned b = 0; b < 2; ++b)
      region_under(o.region(b), [&] {
        const ir::Operation *term = o.region(b).terminator();
        if (!term || term->opcode() != ir::Opcode::Yield)
          return;
        for (unsigned i = 0; i < o.num_results(); ++i) {
          IntegerRange y = lookup(term->operand(i));
          merged[i] =
              merged[i] ? IntegerRange{std::min(merged[i]->lo, y.lo), std::max(merged[i]->hi, y.hi)}
                        : y;
        }
      });
    for (unsigned i = 0; i < o.num_results(); ++i)
      if (merged[i])
        set(o.result(i), *merged[i]);
    return;
  }
  if (o.opcode() == ir::Opcode::For) {
    // lo <= iv < hi while the loop runs (the step is positive, and a step that would wrap ends
    // the loop); carried values and results are not tracked.
    const ir::Region &body = o.region(0);
    IntegerRange lo = r(0), hi = r(1);
    if (hi.hi > std::numeric_limits<int64_t>::min())
      set(body.argument(0), {lo.lo, std::max(lo.lo, hi.hi - 1)});
    region_under(body);
    return;
  }
  for (unsigned i = 0; i < o.num_regions(); ++i)
    region_under(o.region(i));
}

} // namespace cubecc::passes
