//===- legalize.cpp - One table of rewrites pinning the IR's semantics for every backend ------===//
//
// Each row of kPatterns is (opcode, which ops it applies to on which target, rewrite). The driver
// collects the kernel's ops first and rewrites each at most once: the ops a rewrite makes are not
// visited again (an expansion of `pow` keeps a `pow` of |x| inside it).
//
//   div  x, y : int -> x / safe(y), 0 where y = 0, -x where y = -1 (signed: MIN / -1 wraps)
//   rem  x, y : int -> x % safe(y), 0 where y = 0 or (signed) y = -1
//           with safe(y) = select(y == 0 [|| y == -1], 1, y): the divisor the emitter sees is
//           never 0 (nor -1 for signed types)
//   shl/shr x, n    -> x shifted by and(n, N - 1)
//   cast float -> int: converts select(lo <= x < hi, x, 0) (always in range), then MAX where
//           x >= hi and (signed) MIN where x < lo; NaN gives 0 (docs/ir.md §4.6)
//   erf  (no native erf): fdlibm's erff in f32 ops; f16/bf16 through f32
//   pow  (no C pow): pow(|x|, y) plus C's sign and special cases
//   popcount, clz, ctz, ffs, bitreverse, mulhi (no native bit ops): shifts, masks and
//           multiplications in the operands' width
//   add_sat, sub_sat (no native saturating arithmetic): the wrapped result, or the limit where
//           it overflowed
//   cast to or from a storage float (e4m3, e5m2, e2m1, ue8m0; every target): the source decoded
//           exactly to f32 bits (or f64), rounded once in integer ops into the destination
//   atomic.<op> on a vector: one scalar atomic per lane (the IR's meaning; every target)
//   atomic.sub on floats: atomic.add of the negated value (every target)
//   async.copy (no asynchronous copies): if inside { load } else { zeros }, then a store;
//           async.commit and async.wait are dropped
//
// The values chosen where the IR leaves them unspecified are the reference interpreter's
// (ir/src/semantics.cpp), so legalized IR computes the same as the original on the interpreter.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/passes/legalize.h"

#include "cubecc/ir/builder.h"
#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/semantics.h"
#include "rewrite.h"

#include <fmt/format.h>

#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <type_traits>

namespace cubecc::passes {
namespace {

using ir::Opcode;
using ir::Scalar;
using ir::Type;
using ir::Value;

/// The bits of a `const`, or of a `splat` of one.
std::optional<uint64_t> constant_or_splat(const Value *v) {
  const ir::Operation *def = v->defining_op();
  if (def && def->opcode() == Opcode::Splat)
    return detail::constant_bits(def->operand(0));
  return detail::constant_bits(v);
}

const ir::Operation *defined_as(const Value *v, Opcode opcode) {
  const ir::Operation *def = v->defining_op();
  return def && def->opcode() == opcode ? def : nullptr;
}

/// Builds the replacement of one op: constants of the op's shape, short names for the ops.
class Rewriter {
public:
  Rewriter(ir::Module &module, ir::Operation &op) : b_(module) {
    b_.set_insertion_point_before(&op);
    b_.set_location(op.location());
  }

  /// A constant of `t` (scalar or vector: splatted) with the given bits.
  Value *bits(Type t, uint64_t value) {
    Value *c =
        b_.create(Opcode::Const, {}, {t.element_type()}, {{"value", static_cast<int64_t>(value)}})
            ->result();
    return t.is_vector() ? b_.create(Opcode::Splat, {c}, {t})->result() : c;
  }
  /// A float constant of `t`, rounded to its element type.
  Value *real(Type t, double value) { return bits(t, ir::from_double(t.element(), value)); }

  Value *op(Opcode opcode, std::initializer_list<Value *> operands) {
    return b_.op(opcode, operands);
  }
  Value *select(Value *c, Value *a, Value *b) { return op(Opcode::Select, {c, a, b}); }
  Value *cast(Value *v, Type to) { return b_.cast(v, to); }
  Value *bitcast(Value *v, Type to) { return b_.create(Opcode::Bitcast, {v}, {to})->result(); }
  ir::Builder &builder() { return b_; }

private:
  ir::Builder b_;
};

//===--- Integer division, shifts, float-to-integer casts ----------------------------------===//

/// Whether `divisor` is a constant or a guarded divisor (select(y == 0 [|| y == -1], 1, y)) that
/// can be neither 0 nor, for signed types, -1.
bool safe_divisor(const Value *divisor) {
  Scalar s = divisor->type().element();
  uint64_t all = ir::width_mask(ir::scalar_bits(s));
  if (auto c = constant_or_splat(divisor))
    return (*c & all) != 0 && (!ir::is_signed(s) || (*c & all) != all);
  const ir::Operation *sel = defined_as(divisor, Opcode::Select);
  if (!sel || constant_or_splat(sel->operand(1)) != uint64_t{1})
    return false;
  const Value *y = sel->operand(2);
  auto is_compare_with = [&](const Value *v, uint64_t k) {
    const ir::Operation *eq = defined_as(v, Opcode::Eq);
    return eq && eq->operand(0) == y && constant_or_splat(eq->operand(1)) == k;
  };
  const Value *guard = sel->operand(0);
  if (!ir::is_signed(s))
    return is_compare_with(guard, 0);
  const ir::Operation *either = defined_as(guard, Opcode::Or);
  return either && is_compare_with(either->operand(0), 0) &&
         is_compare_with(either->operand(1), all);
}

bool is_integer_division(const ir::Operation &op) {
  return (op.opcode() == Opcode::Div || op.opcode() == Opcode::Rem) &&
         ir::is_integer(op.result()->type().element());
}

Value *rewrite_division(Rewriter &r, ir::Operation &op) {
  Type t = op.result()->type();
  Scalar s = t.element();
  Value *x = op.operand(0), *y = op.operand(1);
  Value *zero = r.bits(t, 0);
  Value *is_zero = r.op(Opcode::Eq, {y, zero});
  Value *is_minus_one = nullptr, *bad = is_zero;
  if (ir::is_signed(s)) {
    is_minus_one = r.op(Opcode::Eq, {y, r.bits(t, ir::width_mask(ir::scalar_bits(s)))});
    bad = r.op(Opcode::Or, {is_zero, is_minus_one});
  }
  Value *safe = r.select(bad, r.bits(t, 1), y);
  Value *result = r.op(op.opcode(), {x, safe});
  if (op.opcode() == Opcode::Rem) // x % 0 = 0, x % -1 = 0
    return r.select(bad, zero, result);
  if (is_minus_one) // x / -1 = -x (MIN / -1 = MIN)
    result = r.select(is_minus_one, r.op(Opcode::Neg, {x}), result);
  return r.select(is_zero, zero, result); // x / 0 = 0
}

bool safe_shift(const ir::Operation &op) {
  unsigned width = ir::scalar_bits(op.result()->type().element());
  const Value *n = op.operand(1);
  if (auto c = constant_or_splat(n))
    return (*c & ir::width_mask(width)) < width;
  const ir::Operation *masked = defined_as(n, Opcode::And);
  return masked && constant_or_splat(masked->operand(1)) == uint64_t{width - 1};
}

Value *rewrite_shift(Rewriter &r, ir::Operation &op) {
  Type t = op.result()->type();
  Value *amount = r.op(Opcode::And, {op.operand(1), r.bits(t, ir::scalar_bits(t.element()) - 1)});
  return r.op(op.opcode(), {op.operand(0), amount});
}

bool is_float_to_int(const ir::Operation &op) {
  return op.opcode() == Opcode::Cast && ir::is_float(op.operand(0)->type().element()) &&
         ir::is_integer(op.result()->type().element());
}

/// The bounds of a float-to-integer cast in the source type: values in [lo, hi) convert without
/// saturating. They are powers of two, so either exact or infinite in the source type.
struct CastBounds {
  uint64_t lo, hi;  ///< bits in the source type (lo: -2^(N-1), or -1.0 for unsigned targets)
  bool lo_infinite; ///< -2^(N-1) rounds to -inf (f16 to i64): then the bound is exclusive
};

CastBounds cast_bounds(Scalar from, Scalar to) {
  unsigned n = ir::scalar_bits(to);
  bool sg = ir::is_signed(to);
  double hi = std::ldexp(1.0, static_cast<int>(sg ? n - 1 : n));
  double lo = sg ? -hi : -1.0;
  CastBounds b{ir::from_double(from, lo), ir::from_double(from, hi), false};
  b.lo_infinite = std::isinf(ir::to_double(from, b.lo));
  return b;
}

/// The guard `lo <= x < hi` (`lo < x` where lo is -1.0 or -inf), false for NaN.
Value *in_range(Rewriter &r, Value *x, Scalar to) {
  Type t = x->type();
  CastBounds b = cast_bounds(t.element(), to);
  bool exclusive = !ir::is_signed(to) || b.lo_infinite;
  Value *above_lo = r.op(exclusive ? Opcode::Gt : Opcode::Ge, {x, r.bits(t, b.lo)});
  return r.op(Opcode::And, {above_lo, r.op(Opcode::Lt, {x, r.bits(t, b.hi)})});
}

/// Whether the cast's operand is select(lo <= x < hi, x, 0) for its own bounds.
bool safe_cast(const ir::Operation &op) {
  const ir::Operation *sel = defined_as(op.operand(0), Opcode::Select);
  if (!sel || constant_or_splat(sel->operand(2)) != uint64_t{0})
    return false;
  const Value *x = sel->operand(1);
  Scalar from = x->type().element(), to = op.result()->type().element();
  CastBounds b = cast_bounds(from, to);
  const ir::Operation *both = defined_as(sel->operand(0), Opcode::And);
  if (!both)
    return false;
  bool exclusive = !ir::is_signed(to) || b.lo_infinite;
  const ir::Operation *low = defined_as(both->operand(0), exclusive ? Opcode::Gt : Opcode::Ge);
  const ir::Operation *high = defined_as(both->operand(1), Opcode::Lt);
  return low && high && low->operand(0) == x && high->operand(0) == x &&
         constant_or_splat(low->operand(1)) == b.lo && constant_or_splat(high->operand(1)) == b.hi;
}

Value *rewrite_float_to_int(Rewriter &r, ir::Operation &op) {
  Value *x = op.operand(0);
  Type from = x->type(), to = op.result()->type();
  Scalar ts = to.element();
  unsigned n = ir::scalar_bits(ts);
  CastBounds b = cast_bounds(from.element(), ts);
  Value *safe = r.select(in_range(r, x, ts), x, r.bits(from, 0));
  Value *result = r.cast(safe, to);
  uint64_t max = ir::is_signed(ts) ? ir::width_mask(n) >> 1 : ir::width_mask(n);
  result = r.select(r.op(Opcode::Ge, {x, r.bits(from, b.hi)}), r.bits(to, max), result);
  if (ir::is_signed(ts)) {
    Value *below = r.op(b.lo_infinite ? Opcode::Le : Opcode::Lt, {x, r.bits(from, b.lo)});
    result = r.select(below, r.bits(to, (ir::width_mask(n) >> 1) + 1), result);
  }
  return result;
}

//===--- Math expansions -----------------------------------------------------------------===//

bool is_f16_bf16_or_f32(Scalar s) {
  return s == Scalar::F16 || s == Scalar::BF16 || s == Scalar::F32;
}

/// fdlibm's erff (the coefficients of its rational approximations, the same ranges), without
/// branches: all three ranges are evaluated and selected.
Value *erf_f32(Rewriter &r, Value *x) {
  Type f = x->type();
  Type u = f.with_element(Scalar::U32);
  auto c = [&](double v) { return r.real(f, v); };
  auto add = [&](Value *p, Value *q) { return r.op(Opcode::Add, {p, q}); };
  auto sub = [&](Value *p, Value *q) { return r.op(Opcode::Sub, {p, q}); };
  auto mul = [&](Value *p, Value *q) { return r.op(Opcode::Mul, {p, q}); };
  auto div = [&](Value *p, Value *q) { return r.op(Opcode::Div, {p, q}); };
  auto poly = [&](Value *z, std::initializer_list<double> coefficients) { // c0 + z*(c1 + ...)
    const double *k = std::data(coefficients) + coefficients.size() - 1;
    Value *acc = c(*k);
    while (k-- != std::data(coefficients))
      acc = add(c(*k), mul(z, acc));
    return acc;
  };
  Value *ax = r.op(Opcode::Abs, {x});
  // |x| < 0.84375: x + x * P(x^2) / Q(x^2)
  Value *z = mul(x, x);
  Value *small =
      add(x, mul(x, div(poly(z, {1.2837916613e-01, -3.2504209876e-01, -2.8481749818e-02,
                                 -5.7702702470e-03, -2.3763017452e-05}),
                        poly(z, {1.0, 3.9791721106e-01, 6.5022252500e-02, 5.0813062117e-03,
                                 1.3249473704e-04, -3.9602282413e-06}))));
  // 0.84375 <= |x| < 1.25: erx + P(s) / Q(s), s = |x| - 1
  Value *sm = sub(ax, c(1.0));
  Value *mid =
      add(c(8.4506291151e-01),
          div(poly(sm, {-2.3621185683e-03, 4.1485610604e-01, -3.7220788002e-01, 3.1834661961e-01,
                        -1.1089469492e-01, 3.5478305072e-02, -2.1663755178e-03}),
              poly(sm, {1.0, 1.0642088205e-01, 5.4039794207e-01, 7.1828655899e-02, 1.2617121637e-01,
                        1.3637083583e-02, 1.1984500103e-02})));
  // 1.25 <= |x| < 6: 1 - exp(-z^2 - 0.5625) * exp((z - |x|)(z + |x|) + R/S) / |x|
  Value *si = div(c(1.0), mul(ax, ax));
  Value *ra =
      poly(si, {-9.8649440333e-03, -6.9385856390e-01, -1.0558626175e+01, -6.2375331879e+01,
                -1.6239666748e+02, -1.8460508728e+02, -8.1287437439e+01, -9.8143291473e+00});
  Value *sa = poly(si, {1.0, 1.9651271820e+01, 1.3765776062e+02, 4.3456588745e+02, 6.4538726807e+02,
                        4.2900814819e+02, 1.0863500214e+02, 6.5702495575e+00, -6.0424413532e-02});
  Value *rb = poly(si, {-9.8649431020e-03, -7.9928326607e-01, -1.7757955551e+01, -1.6063638306e+02,
                        -6.3756646729e+02, -1.0250950928e+03, -4.8351919556e+02});
  Value *sb = poly(si, {1.0, 3.0338060379e+01, 3.2579251099e+02, 1.5367296143e+03, 3.1998581543e+03,
                        2.5530502930e+03, 4.7452853394e+02, -2.2440952301e+01});
  Value *near = r.op(Opcode::Lt, {ax, c(1.0 / 0.35)});
  Value *rs = r.select(near, ra, rb), *ss = r.select(near, sa, sb);
  Value *zt = r.bitcast(r.op(Opcode::And, {r.bitcast(ax, u), r.bits(u, 0xffffe000u)}), f);
  Value *e1 = r.op(Opcode::Exp, {sub(r.op(Opcode::Neg, {mul(zt, zt)}), c(0.5625))});
  Value *e2 = r.op(Opcode::Exp, {add(mul(sub(zt, ax), add(zt, ax)), div(rs, ss))});
  Value *large = sub(c(1.0), div(mul(e1, e2), ax));
  Value *magnitude = r.select(r.op(Opcode::Ge, {ax, c(6.0)}), c(1.0),
                              r.select(r.op(Opcode::Ge, {ax, c(1.25)}), large, mid));
  Value *negative = r.op(Opcode::Lt, {x, c(0.0)});
  Value *signed_magnitude = r.select(negative, r.op(Opcode::Neg, {magnitude}), magnitude);
  // NaN fails every comparison and takes the small-argument formula, which propagates it.
  return r.select(r.op(Opcode::Ge, {ax, c(0.84375)}), signed_magnitude, small);
}

/// The rewrite of a unary (or binary) op by `f32`, an expansion in f32 ops: on f16 and bf16 the
/// operands are converted to f32 and the result rounded once to the type.
template <auto f32> Value *through_f32(Rewriter &r, ir::Operation &op) {
  Type t = op.result()->type();
  Type f = t.with_element(Scalar::F32);
  auto in = [&](unsigned i) {
    return t.element() == Scalar::F32 ? op.operand(i) : r.cast(op.operand(i), f);
  };
  Value *result;
  if constexpr (std::is_invocable_v<decltype(f32), Rewriter &, Value *, Value *>)
    result = f32(r, in(0), in(1));
  else
    result = f32(r, in(0));
  return t.element() == Scalar::F32 ? result : r.cast(result, t);
}

/// Whether `op` is on f16, bf16 or f32 and the target lacks the C library's function.
bool lacks_libm_f32(const ir::Operation &op, const LegalizeTarget &t) {
  return !t.native_libm && is_f16_bf16_or_f32(op.result()->type().element());
}

/// c0 + z * (c1 + z * (c2 + ...)) in `t`.
Value *polynomial(Rewriter &r, Type t, Value *z, std::initializer_list<double> coefficients) {
  const double *k = std::data(coefficients) + coefficients.size() - 1;
  Value *acc = r.real(t, *k);
  while (k-- != std::data(coefficients))
    acc = r.op(Opcode::Add, {r.real(t, *k), r.op(Opcode::Mul, {z, acc})});
  return acc;
}

/// expm1 in f32: the Taylor series (to x^10 / 10!, below f32's precision) for |x| < 0.5, where
/// exp(x) - 1 cancels; exp(x) - 1 beyond (exp's error grows by at most 2.6 there).
Value *expm1_f32(Rewriter &r, Value *x) {
  Type f = x->type();
  // x * (1 + x/2! + x^2/3! + ... + x^9/10!)
  Value *p = polynomial(r, f, x,
                        {1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                         1.0 / 40320, 1.0 / 362880, 1.0 / 3628800});
  Value *small = r.op(Opcode::Mul, {x, p});
  Value *large = r.op(Opcode::Sub, {r.op(Opcode::Exp, {x}), r.real(f, 1)});
  // NaN fails the comparison and takes exp(NaN) - 1 = NaN; ±inf give +inf and -1.
  return r.select(r.op(Opcode::Lt, {r.op(Opcode::Abs, {x}), r.real(f, 0.5)}), small, large);
}

/// log1p in f32: 2 atanh(s) with s = x / (2 + x), a series in s^2 (to s^11, below f32's
/// precision) where 1 + x lies in (1/sqrt 2, sqrt 2); log(1 + x) beyond, where 1 + x's rounding
/// moves the result by less than 1.5 ULP.
Value *log1p_f32(Rewriter &r, Value *x) {
  Type f = x->type();
  Value *s = r.op(Opcode::Div, {x, r.op(Opcode::Add, {r.real(f, 2), x})});
  Value *z = r.op(Opcode::Mul, {s, s});
  Value *series = polynomial(r, f, z, {1.0, 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9, 1.0 / 11});
  Value *near = r.op(Opcode::Mul, {r.op(Opcode::Add, {s, s}), series});
  Value *far = r.op(Opcode::Log, {r.op(Opcode::Add, {r.real(f, 1), x})});
  Value *inside = r.op(Opcode::And, {r.op(Opcode::Gt, {x, r.real(f, -0.29289321881345247)}),
                                     r.op(Opcode::Lt, {x, r.real(f, 0.41421356237309503)})});
  // NaN fails both comparisons and takes log(1 + NaN) = NaN; -1 gives -inf, below it NaN.
  return r.select(inside, near, far);
}

/// The sign of `x` on the magnitude `m` (m >= 0 or NaN): select(x < 0, -m, m), and -0 for -0.
Value *with_sign_of(Rewriter &r, Value *x, Value *m) {
  Type f = x->type();
  Value *negative = r.op(Opcode::Lt, {x, r.real(f, 0)});
  // -0: x < 0 is false, but the result must be -0 (the functions below are odd).
  Value *neg_zero = r.op(Opcode::And, {r.op(Opcode::Eq, {x, r.real(f, 0)}),
                                       r.op(Opcode::Ne, {r.bitcast(x, f.with_element(Scalar::U32)),
                                                         r.bits(f.with_element(Scalar::U32), 0)})});
  return r.select(r.op(Opcode::Or, {negative, neg_zero}), r.op(Opcode::Neg, {m}), m);
}

/// atan in f32, Cephes' atanf: |x| reduced to [0, tan(pi/8)] by pi/2 - atan(1/|x|) above
/// tan(3pi/8) and pi/4 + atan((|x| - 1) / (|x| + 1)) above tan(pi/8); an odd polynomial there.
Value *atan_f32(Rewriter &r, Value *x) {
  Type f = x->type();
  auto c = [&](double v) { return r.real(f, v); };
  Value *ax = r.op(Opcode::Abs, {x});
  Value *big = r.op(Opcode::Gt, {ax, c(2.414213562373095)});
  Value *mid = r.op(Opcode::Gt, {ax, c(0.4142135623730950)});
  Value *reduced = r.select(
      big, r.op(Opcode::Div, {c(-1), ax}),
      r.select(mid,
               r.op(Opcode::Div, {r.op(Opcode::Sub, {ax, c(1)}), r.op(Opcode::Add, {ax, c(1)})}),
               ax));
  Value *base = r.select(big, c(1.5707963267948966), r.select(mid, c(0.7853981633974483), c(0)));
  Value *z = r.op(Opcode::Mul, {reduced, reduced});
  Value *p = polynomial(r, f, z,
                        {-3.33329491539e-1, 1.99777106478e-1, -1.38776856032e-1, 8.05374449538e-2});
  Value *t = r.op(Opcode::Add, {r.op(Opcode::Mul, {r.op(Opcode::Mul, {p, z}), reduced}), reduced});
  // +inf reduces to -1/inf = -0 and gives pi/2; NaN stays NaN through the polynomial.
  return with_sign_of(r, x, r.op(Opcode::Add, {base, t}));
}

/// atan2(y, x) in f32: atan(y / x), moved by pi into the left half plane, with C's zero,
/// infinite and NaN cases.
Value *atan2_f32(Rewriter &r, Value *y, Value *x) {
  Type f = x->type();
  Type u = f.with_element(Scalar::U32);
  auto c = [&](double v) { return r.real(f, v); };
  auto eq = [&](Value *p, Value *q) { return r.op(Opcode::Eq, {p, q}); };
  auto lor = [&](Value *p, Value *q) { return r.op(Opcode::Or, {p, q}); };
  auto land = [&](Value *p, Value *q) { return r.op(Opcode::And, {p, q}); };
  const double pi = 3.14159265358979323846;
  // x's sign bit: -0 counts as negative (atan2(+0, -0) = pi).
  Value *x_negative = r.op(
      Opcode::Ne, {r.op(Opcode::And, {r.bitcast(x, u), r.bits(u, 0x80000000u)}), r.bits(u, 0)});
  Value *a = atan_f32(r, r.op(Opcode::Div, {y, x}));
  // Left half plane: the angle is atan(y / x) + pi with y's sign.
  Value *left = r.op(Opcode::Add, {a, with_sign_of(r, y, c(pi))});
  Value *result = r.select(x_negative, left, a);
  // y = ±0 (y / x is ±0 or NaN): ±0 for x > 0 or +0, ±pi for x < 0 or -0; x = ±0 with y != 0
  // gives ±pi/2 already (y / 0 = ±inf).
  Value *y_zero = eq(y, c(0));
  result = r.select(y_zero, with_sign_of(r, y, r.select(x_negative, c(pi), c(0))), result);
  // Both infinite: ±pi/4 or ±3pi/4.
  Value *x_inf = eq(r.op(Opcode::Abs, {x}), c(INFINITY));
  Value *y_inf = eq(r.op(Opcode::Abs, {y}), c(INFINITY));
  result = r.select(land(x_inf, y_inf),
                    with_sign_of(r, y, r.select(x_negative, c(3 * pi / 4), c(pi / 4))), result);
  Value *nan = lor(r.op(Opcode::Ne, {x, x}), r.op(Opcode::Ne, {y, y}));
  return r.select(nan, c(NAN), result);
}

/// sqrt((1 - x)(1 + x)): sqrt(1 - x^2) without cancellation near |x| = 1 (NaN for |x| > 1).
Value *sqrt_one_minus_square(Rewriter &r, Value *x) {
  Type f = x->type();
  return r.op(Opcode::Sqrt, {r.op(Opcode::Mul, {r.op(Opcode::Sub, {r.real(f, 1), x}),
                                                r.op(Opcode::Add, {r.real(f, 1), x})})});
}

/// sinh in f32: Cephes' odd polynomial for |x| <= 1 (exp(x) - exp(-x) cancels there); beyond,
/// (e - 1/e) / 2 with e = exp(|x|), and (exp(|x|/2) / 2) * exp(|x|/2) where exp(|x|) overflows
/// before sinh does.
Value *sinh_cosh_f32(Rewriter &r, Value *x, bool cosh) {
  Type f = x->type();
  auto c = [&](double v) { return r.real(f, v); };
  auto mul = [&](Value *p, Value *q) { return r.op(Opcode::Mul, {p, q}); };
  Value *ax = r.op(Opcode::Abs, {x});
  Value *e = r.op(Opcode::Exp, {ax});
  Value *inverse = r.op(Opcode::Div, {c(0.5), e});
  Value *half_e = mul(c(0.5), e);
  Value *h = r.op(Opcode::Exp, {mul(ax, c(0.5))});
  Value *huge = mul(mul(c(0.5), h), h);
  Value *moderate = r.op(cosh ? Opcode::Add : Opcode::Sub, {half_e, inverse});
  Value *magnitude = r.select(r.op(Opcode::Gt, {ax, c(88.0)}), huge, moderate);
  if (cosh) // no cancellation: e + 1/e is accurate everywhere; NaN propagates
    return magnitude;
  Value *z = mul(x, x);
  Value *p = polynomial(r, f, z, {1.66667160211e-1, 8.33028376239e-3, 2.03721912945e-4});
  Value *small = r.op(Opcode::Add, {mul(mul(p, z), x), x});
  return r.select(r.op(Opcode::Gt, {ax, c(1.0)}), with_sign_of(r, x, magnitude), small);
}

Value *sinh_f32(Rewriter &r, Value *x) {
  return sinh_cosh_f32(r, x, false);
}
Value *cosh_f32(Rewriter &r, Value *x) {
  return sinh_cosh_f32(r, x, true);
}
/// asin(x) = atan2(x, sqrt(1 - x^2)), acos(x) = atan2(sqrt(1 - x^2), x): NaN beyond |x| = 1.
Value *asin_f32(Rewriter &r, Value *x) {
  return atan2_f32(r, x, sqrt_one_minus_square(r, x));
}
Value *acos_f32(Rewriter &r, Value *x) {
  return atan2_f32(r, sqrt_one_minus_square(r, x), x);
}

/// asinh in f32, Cephes' asinhf: an odd polynomial below |x| = 0.5, log(2|x|) above 1500,
/// log(|x| + sqrt(x^2 + 1)) between.
Value *asinh_f32(Rewriter &r, Value *x) {
  Type f = x->type();
  auto c = [&](double v) { return r.real(f, v); };
  auto mul = [&](Value *p, Value *q) { return r.op(Opcode::Mul, {p, q}); };
  Value *ax = r.op(Opcode::Abs, {x});
  Value *z = mul(x, x);
  Value *p =
      polynomial(r, f, z, {-1.6666288134e-1, 7.4847586088e-2, -4.2699340972e-2, 2.0122003309e-2});
  Value *small = r.op(Opcode::Add, {mul(mul(p, z), x), x});
  Value *middle = r.op(
      Opcode::Log, {r.op(Opcode::Add, {ax, r.op(Opcode::Sqrt, {r.op(Opcode::Add, {z, c(1)})})})});
  Value *large = r.op(Opcode::Add, {r.op(Opcode::Log, {ax}), c(0.6931471805599453)});
  Value *magnitude = r.select(r.op(Opcode::Gt, {ax, c(1500)}), large, middle);
  // ±0 stays ±0 (the polynomial's negative leading term would make -0 + -0 * ... = +0).
  small = r.select(r.op(Opcode::Eq, {x, c(0)}), x, small);
  // NaN fails the comparison and takes the polynomial, which propagates it.
  return r.select(r.op(Opcode::Ge, {ax, c(0.5)}), with_sign_of(r, x, magnitude), small);
}

/// acosh in f32, Cephes' acoshf: sqrt(2z) P(z) with z = x - 1 below z = 0.5, log(2x) above
/// 1500, log(x + sqrt(z (x + 1))) between; NaN below 1.
Value *acosh_f32(Rewriter &r, Value *x) {
  Type f = x->type();
  auto c = [&](double v) { return r.real(f, v); };
  auto mul = [&](Value *p, Value *q) { return r.op(Opcode::Mul, {p, q}); };
  Value *z = r.op(Opcode::Sub, {x, c(1)});
  Value *p = polynomial(
      r, f, z,
      {1.4142135263e0, -1.1784741703e-1, 2.6454905019e-2, -7.5272886713e-3, 1.7596881071e-3});
  Value *near = mul(p, r.op(Opcode::Sqrt, {z})); // sqrt(2) is in p's first coefficient
  Value *middle =
      r.op(Opcode::Log,
           {r.op(Opcode::Add, {x, r.op(Opcode::Sqrt, {mul(z, r.op(Opcode::Add, {x, c(1)}))})})});
  Value *large = r.op(Opcode::Add, {r.op(Opcode::Log, {x}), c(0.6931471805599453)});
  Value *result = r.select(r.op(Opcode::Gt, {x, c(1500)}), large,
                           r.select(r.op(Opcode::Lt, {z, c(0.5)}), near, middle));
  return r.select(r.op(Opcode::Lt, {x, c(1)}), c(NAN), result); // sqrt(z < 0) is NaN too
}

/// atanh in f32, Cephes' atanhf: an odd polynomial below |x| = 0.5, log((1 + x) / (1 - x)) / 2
/// beyond (±inf at ±1, NaN past it).
Value *atanh_f32(Rewriter &r, Value *x) {
  Type f = x->type();
  auto c = [&](double v) { return r.real(f, v); };
  auto mul = [&](Value *p, Value *q) { return r.op(Opcode::Mul, {p, q}); };
  Value *ax = r.op(Opcode::Abs, {x});
  Value *z = mul(x, x);
  Value *p = polynomial(
      r, f, z,
      {3.33337300303e-1, 1.99782164500e-1, 1.46691431730e-1, 8.24370301058e-2, 1.81740078349e-1});
  Value *small = r.op(Opcode::Add, {mul(mul(p, z), x), x});
  Value *large =
      mul(c(0.5),
          r.op(Opcode::Log,
               {r.op(Opcode::Div, {r.op(Opcode::Add, {c(1), x}), r.op(Opcode::Sub, {c(1), x})})}));
  return r.select(r.op(Opcode::Ge, {ax, c(0.5)}), large, small);
}

/// hypot as max * sqrt(1 + (min / max)^2), which overflows only where the result does; C's
/// special cases: an infinite operand gives +inf (even with a NaN), else a NaN gives NaN.
Value *hypot_any(Rewriter &r, Value *x, Value *y) {
  Type f = x->type();
  Value *ax = r.op(Opcode::Abs, {x}), *ay = r.op(Opcode::Abs, {y});
  Value *m = r.op(Opcode::Max, {ax, ay}), *n = r.op(Opcode::Min, {ax, ay});
  Value *q = r.op(Opcode::Div, {n, m});
  Value *h =
      r.op(Opcode::Mul,
           {m, r.op(Opcode::Sqrt, {r.op(Opcode::Add, {r.real(f, 1), r.op(Opcode::Mul, {q, q})})})});
  h = r.select(r.op(Opcode::Eq, {m, r.real(f, 0)}), r.real(f, 0), h); // 0 / 0
  Value *nan = r.op(Opcode::Or, {r.op(Opcode::IsNan, {x}), r.op(Opcode::IsNan, {y})});
  h = r.select(nan, r.real(f, NAN), h); // min and max would drop a NaN
  Value *inf = r.op(Opcode::Or, {r.op(Opcode::IsInf, {x}), r.op(Opcode::IsInf, {y})});
  return r.select(inf, r.real(f, INFINITY), h);
}

Value *rewrite_hypot(Rewriter &r, ir::Operation &op) {
  Type t = op.result()->type();
  if (t.element() == Scalar::F32 || t.element() == Scalar::F64)
    return hypot_any(r, op.operand(0), op.operand(1));
  Type f = t.with_element(Scalar::F32);
  return r.cast(hypot_any(r, r.cast(op.operand(0), f), r.cast(op.operand(1), f)), t);
}

/// C's pow from pow(|x|, y) (docs/ir.md §4.5): the sign for odd integral y, NaN for finite
/// negative x and non-integral y, the zero, NaN and infinite cases.
Value *rewrite_pow(Rewriter &r, ir::Operation &op) {
  Value *x = op.operand(0), *y = op.operand(1);
  Type t = x->type();
  auto c = [&](double v) { return r.real(t, v); };
  auto eq = [&](Value *p, Value *q) { return r.op(Opcode::Eq, {p, q}); };
  auto lor = [&](Value *p, Value *q) { return r.op(Opcode::Or, {p, q}); };
  auto land = [&](Value *p, Value *q) { return r.op(Opcode::And, {p, q}); };
  auto is_nan = [&](Value *v) { return r.op(Opcode::Ne, {v, v}); };
  Value *magnitude = r.op(Opcode::Pow, {r.op(Opcode::Abs, {x}), y});
  Value *integral = eq(r.op(Opcode::Floor, {y}), y);
  Value *half = r.op(Opcode::Mul, {y, c(0.5)});
  Value *odd = land(integral, r.op(Opcode::Ne, {half, r.op(Opcode::Floor, {half})}));
  Value *negative = r.op(Opcode::Lt, {x, c(0)});
  Value *result = r.select(land(negative, odd), r.op(Opcode::Neg, {magnitude}), magnitude);
  // x < 0 and y not an integer: NaN, except for x = -inf (then pow(inf, y), as C).
  Value *finite_negative = land(negative, r.op(Opcode::Ne, {x, c(-INFINITY)}));
  result = r.select(land(finite_negative, r.op(Opcode::Not, {integral})), c(NAN), result);
  // x = ±0: y > 0 gives ±0 for odd y, else +0; y < 0 gives 1/x (±inf) for odd y, else +inf.
  Value *at_zero = r.select(r.op(Opcode::Gt, {y, c(0)}), r.select(odd, x, c(0)),
                            r.select(odd, r.op(Opcode::Div, {c(1), x}), c(INFINITY)));
  result = r.select(eq(x, c(0)), at_zero, result);
  // A NaN operand gives NaN, except for the ones below.
  result = r.select(lor(is_nan(x), is_nan(y)), c(NAN), result);
  // pow(x, ±0) = 1 and pow(1, y) = 1 even for NaN; pow(-1, ±inf) = 1.
  Value *one = lor(eq(y, c(0)), eq(x, c(1)));
  Value *y_infinite = eq(r.op(Opcode::Abs, {y}), c(INFINITY));
  one = lor(one, land(eq(x, c(-1)), y_infinite));
  return r.select(one, c(1), result);
}

//===--- Bit counting, mulhi and saturating arithmetic --------------------------------------===//
//
// Expanded in the operands' own width (no wider type is needed, so a target without 64-bit
// integers can still count the bits of a u32), on the unsigned type of that width: signed
// operands are bitcast first and the result bitcast back.

Scalar unsigned_of(Scalar s) {
  switch (ir::scalar_bits(s)) {
  case 8:
    return Scalar::U8;
  case 16:
    return Scalar::U16;
  case 32:
    return Scalar::U32;
  default:
    return Scalar::U64;
  }
}

/// The bits-of-width-w pattern that repeats `unit` (w a multiple of unit's width).
uint64_t repeat(uint64_t unit, unsigned unit_bits, unsigned w) {
  uint64_t r = 0;
  for (unsigned k = 0; k < w; k += unit_bits)
    r |= unit << k;
  return r & ir::width_mask(w);
}

/// Popcount of an unsigned value (SWAR: pairs, nibbles, then a multiply that sums the bytes).
Value *popcount_u(Rewriter &r, Value *x) {
  Type t = x->type();
  unsigned w = ir::scalar_bits(t.element());
  auto c = [&](uint64_t v) { return r.bits(t, v); };
  auto shr = [&](Value *v, unsigned n) { return r.op(Opcode::Shr, {v, c(n)}); };
  auto band = [&](Value *v, uint64_t m) { return r.op(Opcode::And, {v, c(m)}); };
  x = r.op(Opcode::Sub, {x, band(shr(x, 1), repeat(0x5, 4, w))});
  x = r.op(Opcode::Add, {band(x, repeat(0x3, 4, w)), band(shr(x, 2), repeat(0x3, 4, w))});
  x = band(r.op(Opcode::Add, {x, shr(x, 4)}), repeat(0x0f, 8, w));
  if (w > 8)
    x = shr(r.op(Opcode::Mul, {x, c(repeat(0x01, 8, w))}), w - 8);
  return x;
}

/// Every bit below the highest set bit set too.
Value *smear_right(Rewriter &r, Value *x) {
  unsigned w = ir::scalar_bits(x->type().element());
  for (unsigned n = 1; n < w; n *= 2)
    x = r.op(Opcode::Or, {x, r.op(Opcode::Shr, {x, r.bits(x->type(), n)})});
  return x;
}

Value *bit_reverse_u(Rewriter &r, Value *x) {
  Type t = x->type();
  unsigned w = ir::scalar_bits(t.element());
  static constexpr uint64_t kUnits[] = {0x1, 0x3, 0xf, 0xff, 0xffff, 0xffffffff};
  for (unsigned n = 1, k = 0; n < w; n *= 2, ++k) {
    // Swap each pair of adjacent n-bit groups.
    Value *m = r.bits(t, repeat(kUnits[k], 2 * n, w)), *sh = r.bits(t, n);
    Value *low = r.op(Opcode::And, {r.op(Opcode::Shr, {x, sh}), m});
    Value *high = r.op(Opcode::Shl, {r.op(Opcode::And, {x, m}), sh});
    x = r.op(Opcode::Or, {low, high});
  }
  return x;
}

/// The high half of the unsigned product, from products of half-width halves (none overflows).
Value *mulhi_u(Rewriter &r, Value *a, Value *b) {
  Type t = a->type();
  unsigned h = ir::scalar_bits(t.element()) / 2;
  Value *mask = r.bits(t, ir::width_mask(h)), *sh = r.bits(t, h);
  auto lo = [&](Value *v) { return r.op(Opcode::And, {v, mask}); };
  auto hi = [&](Value *v) { return r.op(Opcode::Shr, {v, sh}); };
  auto mul = [&](Value *x, Value *y) { return r.op(Opcode::Mul, {x, y}); };
  auto add = [&](Value *x, Value *y) { return r.op(Opcode::Add, {x, y}); };
  Value *ll = mul(lo(a), lo(b)), *hl = mul(hi(a), lo(b)), *lh = mul(lo(a), hi(b));
  Value *hh = mul(hi(a), hi(b));
  Value *cross = add(add(hi(ll), lo(hl)), lh);
  return add(add(hh, hi(hl)), hi(cross));
}

/// Rewrites an integer op through `f` on the unsigned type of its width.
template <Value *(*f)(Rewriter &, ir::Operation &, Value *, Value *)>
Value *through_unsigned(Rewriter &r, ir::Operation &op) {
  Type t = op.result()->type();
  Type u = t.with_element(unsigned_of(t.element()));
  bool sgn = ir::is_signed(t.element());
  auto in = [&](unsigned k) -> Value * {
    if (k >= op.num_operands())
      return nullptr;
    return sgn ? r.bitcast(op.operand(k), u) : op.operand(k);
  };
  Value *result = f(r, op, in(0), in(1));
  return sgn ? r.bitcast(result, t) : result;
}

Value *expand_popcount(Rewriter &r, ir::Operation &, Value *x, Value *) {
  return popcount_u(r, x);
}
Value *expand_clz(Rewriter &r, ir::Operation &, Value *x, Value *) {
  unsigned w = ir::scalar_bits(x->type().element());
  return r.op(Opcode::Sub, {r.bits(x->type(), w), popcount_u(r, smear_right(r, x))});
}
/// ctz(x) = popcount(~x & (x - 1)): the trailing zeros become the only ones (all N for 0).
Value *expand_ctz(Rewriter &r, ir::Operation &, Value *x, Value *) {
  Value *below = r.op(Opcode::Sub, {x, r.bits(x->type(), 1)});
  return popcount_u(r, r.op(Opcode::And, {r.op(Opcode::Not, {x}), below}));
}
/// ffs(x) = popcount(x ^ (x - 1)) = ctz(x) + 1 for x != 0; 0 for 0.
Value *expand_ffs(Rewriter &r, ir::Operation &, Value *x, Value *) {
  Value *zero = r.bits(x->type(), 0);
  Value *ones = popcount_u(r, r.op(Opcode::Xor, {x, r.op(Opcode::Sub, {x, r.bits(x->type(), 1)})}));
  return r.select(r.op(Opcode::Eq, {x, zero}), zero, ones);
}
Value *expand_bitreverse(Rewriter &r, ir::Operation &, Value *x, Value *) {
  return bit_reverse_u(r, x);
}
/// Signed: the unsigned high half minus b where a < 0 and a where b < 0 (two's complement).
Value *expand_mulhi(Rewriter &r, ir::Operation &op, Value *a, Value *b) {
  Value *hi = mulhi_u(r, a, b);
  if (!ir::is_signed(op.result()->type().element()))
    return hi;
  Type t = a->type();
  Value *zero = r.bits(t, 0), *sign = r.bits(t, uint64_t{1} << (ir::scalar_bits(t.element()) - 1));
  auto negative = [&](Value *v) { return r.op(Opcode::Ne, {r.op(Opcode::And, {v, sign}), zero}); };
  hi = r.op(Opcode::Sub, {hi, r.select(negative(a), b, zero)});
  return r.op(Opcode::Sub, {hi, r.select(negative(b), a, zero)});
}

/// Saturating add and subtract: the wrapped result where it did not overflow.
Value *rewrite_saturating(Rewriter &r, ir::Operation &op) {
  Type t = op.result()->type();
  Scalar s = t.element();
  unsigned w = ir::scalar_bits(s);
  bool add = op.opcode() == Opcode::AddSat;
  Value *a = op.operand(0), *b = op.operand(1);
  Value *wrapped = r.op(add ? Opcode::Add : Opcode::Sub, {a, b});
  if (!ir::is_signed(s)) // a carry or borrow shows as a result on the wrong side of a
    return r.select(r.op(add ? Opcode::Lt : Opcode::Gt, {wrapped, a}),
                    r.bits(t, add ? ir::width_mask(w) : 0), wrapped);
  // Overflow iff the result's sign differs from a's and (add) b's / (sub) not b's.
  Value *zero = r.bits(t, 0);
  Value *flips = r.op(Opcode::Xor, {a, wrapped});
  Value *other = r.op(Opcode::Xor, {add ? b : a, add ? wrapped : b});
  Value *overflow = r.op(Opcode::Lt, {r.op(Opcode::And, {flips, other}), zero});
  Value *limit = r.select(r.op(Opcode::Lt, {a, zero}), r.bits(t, uint64_t{1} << (w - 1)),
                          r.bits(t, ir::width_mask(w - 1)));
  return r.select(overflow, limit, wrapped);
}

bool lacks_bit_ops(const ir::Operation &, const LegalizeTarget &t) {
  return !t.native_bit_ops;
}
bool lacks_saturating(const ir::Operation &, const LegalizeTarget &t) {
  return !t.native_saturating;
}

//===--- Storage floats: conversions as integer ops ---------------------------------------===//
//
// No target computes with e4m3, e5m2, e2m1 or ue8m0 the IR's way on every device, so every
// conversion becomes integer arithmetic on the encodings (the emitters see storage floats only
// as bytes): the source decodes exactly to f32 bits (or is f64), then rounds once into the
// destination's layout. The reference (ir/src/float_formats.cpp) computes the same with double
// arithmetic; test/unit/storage_float_test.cpp compares the two on every encoding.

bool converts_storage_float(const ir::Operation &op) {
  return op.opcode() == Opcode::Cast && (ir::is_storage_float(op.operand(0)->type().element()) ||
                                         ir::is_storage_float(op.result()->type().element()));
}

uint64_t low_bits(unsigned n) {
  return ir::width_mask(n);
}

/// The f32 bits (u32 lanes) of `x`, exactly: x is f16, bf16, f32 or a storage float. NaNs become
/// the quiet NaN 0x7FC00000 with their sign.
Value *exact_f32_bits(Rewriter &r, Value *x) {
  Type t = x->type();
  Scalar s = t.element();
  Type u32 = t.with_element(Scalar::U32);
  if (s == Scalar::F32)
    return r.bitcast(x, u32);
  Type raw = t.with_element(ir::scalar_bits(s) == 16 ? Scalar::U16 : Scalar::U8);
  Value *v = r.cast(r.bitcast(x, raw), u32);
  if (s == Scalar::BF16)
    return r.op(Opcode::Shl, {v, r.bits(u32, 16)});
  auto eq = [&](Value *a, uint64_t k) { return r.op(Opcode::Eq, {a, r.bits(u32, k)}); };
  ir::FloatFormat f = ir::float_format(s);
  if (f.specials == ir::FloatSpecials::ScaleOnly) // 2^(e - 127); e = 0 is subnormal in f32
    return r.select(eq(v, 0), r.bits(u32, 0x00400000),
                    r.select(eq(v, f.quiet_nan()), r.bits(u32, 0x7FC00000),
                             r.op(Opcode::Shl, {v, r.bits(u32, 23)})));
  unsigned m_bits = f.mantissa_bits, e_bits = f.exponent_bits;
  Value *sign = r.op(
      Opcode::Shl,
      {r.op(Opcode::And, {r.op(Opcode::Shr, {v, r.bits(u32, e_bits + m_bits)}), r.bits(u32, 1)}),
       r.bits(u32, 31)});
  Value *e = r.op(Opcode::And,
                  {r.op(Opcode::Shr, {v, r.bits(u32, m_bits)}), r.bits(u32, low_bits(e_bits))});
  Value *m = r.op(Opcode::And, {v, r.bits(u32, low_bits(m_bits))});
  // Normal: the exponent rebiased, the mantissa moved up to f32's place.
  Value *normal = r.op(
      Opcode::Or,
      {r.op(Opcode::Shl, {r.op(Opcode::Add, {e, r.bits(u32, static_cast<uint64_t>(127 - f.bias))}),
                          r.bits(u32, 23)}),
       r.op(Opcode::Shl, {m, r.bits(u32, 23 - m_bits)})});
  // Subnormal: m * 2^(1 - bias - M), as the f32 of the integer m (exact) with its exponent
  // lowered; every storage float's and f16's subnormals are normal in f32.
  int32_t scale = 1 - f.bias - static_cast<int32_t>(m_bits);
  Value *m_float = r.bitcast(r.cast(m, t.with_element(Scalar::F32)), u32);
  Value *lowered = r.op(Opcode::Add, {m_float, r.bits(u32, static_cast<uint32_t>(scale) << 23)});
  Value *subnormal = r.select(eq(m, 0), r.bits(u32, 0), lowered);
  Value *magnitude = r.select(eq(e, 0), subnormal, normal);
  switch (f.specials) {
  case ir::FloatSpecials::Ieee:
    magnitude =
        r.select(eq(e, low_bits(e_bits)),
                 r.select(eq(m, 0), r.bits(u32, 0x7F800000), r.bits(u32, 0x7FC00000)), magnitude);
    break;
  case ir::FloatSpecials::NanOnly:
    magnitude = r.select(eq(r.op(Opcode::And, {v, r.bits(u32, low_bits(e_bits + m_bits))}),
                            low_bits(e_bits + m_bits)),
                         r.bits(u32, 0x7FC00000), magnitude);
    break;
  case ir::FloatSpecials::None:
  case ir::FloatSpecials::ScaleOnly:
    break;
  }
  return r.op(Opcode::Or, {sign, magnitude});
}

/// ue8m0's encoding of the float whose bits are `u` (f32 or f64 layout `src`, in unsigned lanes
/// of its width): the nearest power of two, ties to the even encoding, clamped to 2^-127..2^127;
/// zero and negatives give 0x00, NaN 0xFF.
Value *encode_scale(Rewriter &r, Value *u, const ir::FloatFormat &src, const ir::FloatFormat &f) {
  Type t = u->type();
  unsigned w = src.bits(), m_bits = src.mantissa_bits;
  auto k = [&](uint64_t value) { return r.bits(t, value); };
  Value *a = r.op(Opcode::And, {u, k(low_bits(w - 1))});
  Value *e = r.op(Opcode::Shr, {a, k(m_bits)});
  Value *m = r.op(Opcode::And, {a, k(low_bits(m_bits))});
  uint64_t half = uint64_t{1} << (m_bits - 1);
  uint64_t bias = static_cast<uint64_t>(src.bias), max = f.max_finite();
  // c = code + src bias, where code = e - src bias + 127, plus one where rounding goes up.
  Value *c = r.op(Opcode::Add, {e, k(static_cast<uint64_t>(f.bias))});
  Value *odd = r.op(Opcode::Ne, {r.op(Opcode::And, {r.op(Opcode::Sub, {c, k(bias)}), k(1)}), k(0)});
  Value *up = r.op(Opcode::Or, {r.op(Opcode::Gt, {m, k(half)}),
                                r.op(Opcode::And, {r.op(Opcode::Eq, {m, k(half)}), odd})});
  c = r.op(Opcode::Add, {c, r.select(up, k(1), k(0))});
  Value *code = r.select(
      r.op(Opcode::Lt, {c, k(bias)}), k(0),
      r.select(r.op(Opcode::Gt, {c, k(bias + max)}), k(max), r.op(Opcode::Sub, {c, k(bias)})));
  if (src.bias == static_cast<int>(f.bias)) // f32: its subnormals lie between 2^-149 and 2^-126
    code = r.select(r.op(Opcode::Eq, {e, k(0)}),
                    r.select(r.op(Opcode::Gt, {m, k(3 * (half >> 1))}), k(1), k(0)), code);
  Value *not_positive =
      r.op(Opcode::Or, {r.op(Opcode::Ne, {r.op(Opcode::Shr, {u, k(w - 1)}), k(0)}),
                        r.op(Opcode::Eq, {a, k(0)})});
  code = r.select(not_positive, k(0), code);
  return r.select(r.op(Opcode::Gt, {a, k(src.infinity())}), k(f.quiet_nan()), code);
}

/// The encoding in `f` of the float whose bits are `u` (f32 or f64 layout `src`, in unsigned
/// lanes of its width), rounded to nearest even once, with f's overflow and NaN rules.
Value *encode_float(Rewriter &r, Value *u, const ir::FloatFormat &src, const ir::FloatFormat &f) {
  if (f.specials == ir::FloatSpecials::ScaleOnly)
    return encode_scale(r, u, src, f);
  Type t = u->type();
  unsigned w = src.bits(), ms = src.mantissa_bits, m_bits = f.mantissa_bits;
  auto k = [&](uint64_t value) { return r.bits(t, value); };
  /// x rounded to nearest even after dropping `shift` low bits (shift >= 1, below w; masked to
  /// the width all the same, which is what makes a variable shift legal).
  auto round_off = [&](Value *x, Value *shift) {
    Value *one = k(1);
    auto legal_amount = [&](Value *n) {
      return constant_or_splat(n) ? n : r.op(Opcode::And, {n, k(w - 1)});
    };
    std::optional<uint64_t> fixed = constant_or_splat(shift);
    Value *below = fixed ? k(*fixed - 1) : legal_amount(r.op(Opcode::Sub, {shift, one}));
    shift = legal_amount(shift);
    Value *half_less = r.op(Opcode::Sub, {r.op(Opcode::Shl, {one, below}), one});
    Value *odd = r.op(Opcode::And, {r.op(Opcode::Shr, {x, shift}), one});
    return r.op(Opcode::Shr, {r.op(Opcode::Add, {r.op(Opcode::Add, {x, half_less}), odd}), shift});
  };
  Value *sign = r.op(Opcode::Shr, {u, k(w - 1)});
  Value *a = r.op(Opcode::And, {u, k(low_bits(w - 1))});
  int min_exponent = 1 - f.bias; // of f's normals
  uint64_t smallest_normal = static_cast<uint64_t>(src.bias + min_exponent) << ms;
  // Normal in f: rebias, then round off the extra mantissa bits; a carry into the exponent is
  // the correct rounding (up to past the largest value, caught below).
  Value *rebiased = r.op(Opcode::Sub, {a, k(static_cast<uint64_t>(src.bias - f.bias) << ms)});
  Value *normal = round_off(rebiased, k(ms - m_bits));
  // Subnormal in f: the significand with its implicit bit, shifted down by how far a lies below
  // f's smallest normal (at most ms + 2 places: further only ever rounds to zero).
  Value *e = r.op(Opcode::Shr, {a, k(ms)});
  Value *is_zero_exponent = r.op(Opcode::Eq, {e, k(0)});
  Value *significand = r.op(Opcode::Or, {r.op(Opcode::And, {a, k(low_bits(ms))}),
                                         r.select(is_zero_exponent, k(0), k(uint64_t{1} << ms))});
  Value *effective = r.select(is_zero_exponent, k(1), e);
  uint64_t start = static_cast<uint64_t>(src.bias + static_cast<int>(ms) + min_exponent -
                                         static_cast<int>(m_bits));
  Value *shift = r.op(Opcode::Min, {r.op(Opcode::Sub, {k(start), effective}), k(ms + 2)});
  Value *subnormal = round_off(significand, shift);
  Value *magnitude = r.select(r.op(Opcode::Ge, {a, k(smallest_normal)}), normal, subnormal);
  uint64_t overflow = f.saturates ? f.max_finite() : f.infinity();
  magnitude = r.select(r.op(Opcode::Gt, {magnitude, k(f.max_finite())}), k(overflow), magnitude);
  magnitude = r.select(r.op(Opcode::Gt, {a, k(src.infinity())}), k(f.quiet_nan()), magnitude);
  return r.op(Opcode::Or, {r.op(Opcode::Shl, {sign, k(f.exponent_bits + m_bits)}), magnitude});
}

Value *rewrite_storage_cast(Rewriter &r, ir::Operation &op) {
  Value *x = op.operand(0);
  Type from = x->type(), to = op.result()->type();
  Scalar target = to.element();
  ir::FloatFormat src = ir::float_format(from.element() == Scalar::F64 ? Scalar::F64 : Scalar::F32);
  Value *bits = from.element() == Scalar::F64 ? r.bitcast(x, from.with_element(Scalar::U64))
                                              : exact_f32_bits(r, x);
  Type raw = to.with_element(ir::scalar_bits(target) == 16 ? Scalar::U16 : Scalar::U8);
  switch (target) {
  case Scalar::F32: // from a storage float: exact
    return r.bitcast(bits, to);
  case Scalar::F64:
    return r.cast(r.bitcast(bits, to.with_element(Scalar::F32)), to);
  case Scalar::BF16: // every storage float's value (and the quiet NaN) is a bf16: truncate
    return r.bitcast(r.cast(r.op(Opcode::Shr, {bits, r.bits(bits->type(), 16)}), raw), to);
  default: // f16 or a storage float
    return r.bitcast(r.cast(encode_float(r, bits, src, ir::float_format(target)), raw), to);
  }
}

//===--- Asynchronous copies ---------------------------------------------------------------===//

/// async.copy on a target without it: the copy done at once, a guarded load (zeros where the
/// source is not read) and a store. The IR lets a copy land at any moment before its wait, so
/// this computes what the kernel computes; async.commit and async.wait then order nothing.
Value *rewrite_async_copy(Rewriter &r, ir::Operation &op) {
  ir::Builder &b = r.builder();
  const auto lanes = static_cast<uint32_t>(op.attributes().get_int("lanes").value_or(1));
  const Scalar s = op.operand(0)->type().element();
  const Type t = lanes == 1 ? Type::scalar(s) : Type::vector(s, lanes);
  const Type types[] = {t};
  ir::Operation *guard = b.create_if(op.operand(4), types);
  b.set_insertion_point_to_end(guard->region(0));
  Value *loaded = b.load(op.operand(2), op.operand(3), t);
  b.yield({&loaded, 1});
  b.set_insertion_point_to_end(guard->region(1));
  Value *zero = r.bits(t, 0);
  b.yield({&zero, 1});
  b.set_insertion_point_before(&op);
  b.store(op.operand(0), op.operand(1), guard->result());
  return nullptr;
}

bool lacks_async_copy(const ir::Operation &, const LegalizeTarget &t) {
  return !t.async_copy;
}
/// async.commit and async.wait with every copy already done: nothing to order.
Value *drop(Rewriter &, ir::Operation &) {
  return nullptr;
}

//===--- Atomics ---------------------------------------------------------------------------===//

/// A vector atomic (docs/ir.md §4.11): one scalar atomic per lane, lane k on element index + k,
/// the old values gathered into a vector. That is the IR's meaning (no atomicity across lanes),
/// so every target gets it; the index is widened first where index + k could wrap.
Value *split_vector_atomic(Rewriter &r, ir::Operation &op) {
  ir::Builder &b = r.builder();
  const bool store = op.opcode() == Opcode::AtomicStore; // the one without a result
  const Type t = (store ? op.operand(2) : op.result())->type();
  const Type lane_type = t.element_type();
  Value *index = op.operand(1);
  Scalar is = index->type().element();
  if (ir::scalar_bits(is) < 64)
    index = r.cast(index, Type::scalar(ir::is_signed(is) ? Scalar::I64 : Scalar::U64));
  // float atomic.sub becomes atomic.add here too: the ops made here are not visited again
  const bool negate = op.opcode() == Opcode::AtomicSub && ir::is_float(t.element());
  const Opcode opcode = negate ? Opcode::AtomicAdd : op.opcode();
  std::vector<Value *> olds;
  for (unsigned k = 0; k < t.lanes(); ++k) {
    std::vector<Value *> operands = {
        op.operand(0), k ? r.op(Opcode::Add, {index, r.bits(index->type(), k)}) : index};
    for (unsigned i = 2; i < op.num_operands(); ++i)
      operands.push_back(b.create(Opcode::VecExtract, {op.operand(i)}, {lane_type},
                                  {{"lane", static_cast<int64_t>(k)}})
                             ->result());
    if (negate)
      operands[2] = r.op(Opcode::Neg, {operands[2]});
    ir::Operation *lane = b.create(
        opcode, operands, store ? std::span<const Type>() : std::span<const Type>(&lane_type, 1));
    if (!store)
      olds.push_back(lane->result());
  }
  if (store)
    return nullptr;
  return b.create(Opcode::VecBuild, olds, std::span<const Type>(&t, 1))->result();
}

bool is_vector_atomic(const ir::Operation &op, const LegalizeTarget &) {
  const Value *v = op.num_results() ? op.result() : op.operand(2);
  return v->type().is_vector();
}

bool is_float_atomic_sub(const ir::Operation &op, const LegalizeTarget &) {
  Type t = op.result()->type(); // a vector is split first, its lanes made additions there
  return t.is_scalar() && ir::is_float(t.element());
}
/// atomic.sub on floats: atomic.add of the negated value (old - v and old + (-v) are the same
/// IEEE result, signed zeros included); no target has a float atomic subtraction.
Value *rewrite_float_atomic_sub(Rewriter &r, ir::Operation &op) {
  return r.builder()
      .create(Opcode::AtomicAdd, {op.operand(0), op.operand(1), r.op(Opcode::Neg, {op.operand(2)})},
              {op.result()->type()})
      ->result();
}

//===--- The table ------------------------------------------------------------------------===//

struct Pattern {
  Opcode opcode;
  const char *name; ///< the statistic counted per rewrite
  bool (*applies)(const ir::Operation &op, const LegalizeTarget &target);
  Value *(*rewrite)(Rewriter &r, ir::Operation &op);
};

const Pattern kPatterns[] = {
    {Opcode::Div, "integer divisions guarded",
     [](const ir::Operation &op, const LegalizeTarget &) {
       return is_integer_division(op) && !safe_divisor(op.operand(1));
     },
     rewrite_division},
    {Opcode::Rem, "integer divisions guarded",
     [](const ir::Operation &op, const LegalizeTarget &) {
       return is_integer_division(op) && !safe_divisor(op.operand(1));
     },
     rewrite_division},
    {Opcode::Shl, "shift amounts masked",
     [](const ir::Operation &op, const LegalizeTarget &) { return !safe_shift(op); },
     rewrite_shift},
    {Opcode::Shr, "shift amounts masked",
     [](const ir::Operation &op, const LegalizeTarget &) { return !safe_shift(op); },
     rewrite_shift},
    {Opcode::Cast, "float-to-integer casts saturated",
     [](const ir::Operation &op, const LegalizeTarget &) {
       return is_float_to_int(op) && !safe_cast(op);
     },
     rewrite_float_to_int},
    {Opcode::Erf, "erf expanded",
     [](const ir::Operation &op, const LegalizeTarget &t) {
       return !t.native_erf && is_f16_bf16_or_f32(op.result()->type().element());
     },
     through_f32<erf_f32>},
    {Opcode::Pow, "pow special cases expanded",
     [](const ir::Operation &op, const LegalizeTarget &t) {
       return !t.c_pow && is_f16_bf16_or_f32(op.result()->type().element());
     },
     rewrite_pow},
    {Opcode::Expm1, "expm1 expanded", lacks_libm_f32, through_f32<expm1_f32>},
    {Opcode::Log1p, "log1p expanded", lacks_libm_f32, through_f32<log1p_f32>},
    {Opcode::Asin, "asin expanded", lacks_libm_f32, through_f32<asin_f32>},
    {Opcode::Acos, "acos expanded", lacks_libm_f32, through_f32<acos_f32>},
    {Opcode::Atan, "atan expanded", lacks_libm_f32, through_f32<atan_f32>},
    {Opcode::Atan2, "atan2 expanded", lacks_libm_f32, through_f32<atan2_f32>},
    {Opcode::Sinh, "sinh expanded", lacks_libm_f32, through_f32<sinh_f32>},
    {Opcode::Cosh, "cosh expanded", lacks_libm_f32, through_f32<cosh_f32>},
    {Opcode::Asinh, "asinh expanded", lacks_libm_f32, through_f32<asinh_f32>},
    {Opcode::Acosh, "acosh expanded", lacks_libm_f32, through_f32<acosh_f32>},
    {Opcode::Atanh, "atanh expanded", lacks_libm_f32, through_f32<atanh_f32>},
    {Opcode::Popcount, "popcount expanded", lacks_bit_ops, through_unsigned<expand_popcount>},
    {Opcode::Clz, "clz expanded", lacks_bit_ops, through_unsigned<expand_clz>},
    {Opcode::Ctz, "ctz expanded", lacks_bit_ops, through_unsigned<expand_ctz>},
    {Opcode::Ffs, "ffs expanded", lacks_bit_ops, through_unsigned<expand_ffs>},
    {Opcode::BitReverse, "bitreverse expanded", lacks_bit_ops, through_unsigned<expand_bitreverse>},
    {Opcode::MulHi, "mulhi expanded", lacks_bit_ops, through_unsigned<expand_mulhi>},
    {Opcode::AddSat, "saturating arithmetic expanded", lacks_saturating, rewrite_saturating},
    {Opcode::SubSat, "saturating arithmetic expanded", lacks_saturating, rewrite_saturating},
    {Opcode::Cast, "storage-float conversions expanded",
     [](const ir::Operation &op, const LegalizeTarget &) { return converts_storage_float(op); },
     rewrite_storage_cast},
    {Opcode::Hypot, "hypot expanded",
     [](const ir::Operation &, const LegalizeTarget &t) { return !t.native_libm; }, rewrite_hypot},
    {Opcode::AtomicSub, "float atomic subtractions made additions", is_float_atomic_sub,
     rewrite_float_atomic_sub},
    {Opcode::AtomicAdd, "vector atomics split into lanes", is_vector_atomic, split_vector_atomic},
    {Opcode::AtomicSub, "vector atomics split into lanes", is_vector_atomic, split_vector_atomic},
    {Opcode::AtomicMin, "vector atomics split into lanes", is_vector_atomic, split_vector_atomic},
    {Opcode::AtomicMax, "vector atomics split into lanes", is_vector_atomic, split_vector_atomic},
    {Opcode::AtomicAnd, "vector atomics split into lanes", is_vector_atomic, split_vector_atomic},
    {Opcode::AtomicOr, "vector atomics split into lanes", is_vector_atomic, split_vector_atomic},
    {Opcode::AtomicXor, "vector atomics split into lanes", is_vector_atomic, split_vector_atomic},
    {Opcode::AtomicXchg, "vector atomics split into lanes", is_vector_atomic, split_vector_atomic},
    {Opcode::AtomicLoad, "vector atomics split into lanes", is_vector_atomic, split_vector_atomic},
    {Opcode::AtomicStore, "vector atomics split into lanes", is_vector_atomic, split_vector_atomic},
    {Opcode::AsyncCopy, "asynchronous copies done at once", lacks_async_copy, rewrite_async_copy},
    {Opcode::AsyncCommit, "asynchronous copy groups dropped", lacks_async_copy, drop},
    {Opcode::AsyncWait, "asynchronous copy groups dropped", lacks_async_copy, drop},
};

} // namespace

void legalize(ir::Module &module, const LegalizeTarget &target, PassContext *context) {
  for (ir::Operation *op : detail::all_ops(module)) {
    for (const Pattern &p : kPatterns) {
      if (op->opcode() != p.opcode || !p.applies(*op, target))
        continue;
      Rewriter r(module, *op);
      Value *replacement = p.rewrite(r, *op);
      if (op->num_results())
        detail::replace_op(op, {replacement});
      else
        op->parent_region()->erase(op);
      if (context)
        context->count(p.name);
      break;
    }
  }
}

void legalize(ir::Module &module, PassContext &context) {
  legalize(module, LegalizeTarget::portable(), &context);
}

bool is_legal(const ir::Operation &op) {
  switch (op.opcode()) {
  case Opcode::Div:
  case Opcode::Rem:
    return !is_integer_division(op) || safe_divisor(op.operand(1));
  case Opcode::Shl:
  case Opcode::Shr:
    return safe_shift(op);
  case Opcode::Cast:
    return (!is_float_to_int(op) || safe_cast(op)) && !converts_storage_float(op);
  case Opcode::AtomicSub:
    return !is_float_atomic_sub(op, LegalizeTarget::portable()) &&
           !is_vector_atomic(op, LegalizeTarget::portable());
  case Opcode::AtomicAdd:
  case Opcode::AtomicMin:
  case Opcode::AtomicMax:
  case Opcode::AtomicAnd:
  case Opcode::AtomicOr:
  case Opcode::AtomicXor:
  case Opcode::AtomicXchg:
  case Opcode::AtomicLoad:
  case Opcode::AtomicStore:
    return !is_vector_atomic(op, LegalizeTarget::portable());
  default:
    return true;
  }
}

void throw_not_legalized(const ir::Operation &op, std::string_view backend) {
  throw std::logic_error(fmt::format("the {} emitter met op '{}' that the legalize pass did not "
                                     "rewrite (docs/passes.md, Legal IR): a bug in cubecc",
                                     backend, op.name()));
}

} // namespace cubecc::passes
