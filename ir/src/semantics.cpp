//===- semantics.cpp - The scalar semantics of the IR's element-wise ops ---------------------===//
//
// One implementation, shared by the reference interpreter and constant folding, so that folding
// can never disagree with the oracle.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/semantics.h"

#include "cubecc/ir/float16.h"
#include "cubecc/ir/float_formats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace cubecc::ir {

uint64_t width_mask(unsigned bits) {
  return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

int64_t sign_extend(uint64_t v, unsigned bits) {
  if (bits >= 64)
    return static_cast<int64_t>(v);
  unsigned shift = 64 - bits;
  return static_cast<int64_t>(v << shift) >> shift;
}

double to_double(Scalar s, uint64_t bits) {
  switch (s) {
  case Scalar::F16:
    return f16_bits_to_float(static_cast<uint16_t>(bits));
  case Scalar::BF16:
    return bf16_bits_to_float(static_cast<uint16_t>(bits));
  case Scalar::F32:
    return std::bit_cast<float>(static_cast<uint32_t>(bits));
  case Scalar::F64:
    return std::bit_cast<double>(bits);
  default:
    return storage_float_to_double(s, bits);
  }
}

namespace {

/// `v` rounded to float toward zero, with the last bit set when that was inexact (rounding to
/// odd). Rounding the result again to f16 or bf16 (nearest even) gives the correctly rounded
/// value of `v`: float keeps at least two more bits than either. Rounding `v` to nearest float
/// first would round twice (a value just above a halfway point of bf16 could fall onto it).
float round_to_odd_float(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || std::isinf(f) || static_cast<double>(f) == v)
    return f;
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::abs(static_cast<double>(f)) > std::abs(v))
    bits -= 1; // rounded away from zero: one step back toward it
  return std::bit_cast<float>(bits | 1u);
}

} // namespace

/// Rounds `v` to the float type `s`, once: f16 and bf16 through a float rounded to odd. (For
/// `+ - * /` and `sqrt` of f16/bf16 operands, computing in float and rounding to nearest is
/// already exact rounding: float has more than twice their bits. Not for fma: fma_to_odd.)
uint64_t from_double(Scalar s, double v) {
  switch (s) {
  case Scalar::F16:
    return float_to_f16_bits(round_to_odd_float(v));
  case Scalar::BF16:
    return float_to_bf16_bits(round_to_odd_float(v));
  case Scalar::F32:
    return std::bit_cast<uint32_t>(static_cast<float>(v));
  case Scalar::F64:
    return std::bit_cast<uint64_t>(v);
  default:
    return storage_float_from_double(s, v); // one rounding: v is exact (docs/ir.md §4.6)
  }
}

/// f16 and bf16 arithmetic happens in float (then rounds once), f32 in float, f64 in double.
namespace {

template <class F> uint64_t float_op(Scalar s, F &&f, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  if (s == Scalar::F64)
    return std::bit_cast<uint64_t>(f(to_double(s, a), to_double(s, b), to_double(s, c)));
  float r =
      static_cast<float>(f(static_cast<float>(to_double(s, a)), static_cast<float>(to_double(s, b)),
                           static_cast<float>(to_double(s, c))));
  return from_double(s, r);
}

/// x * y + z rounded to odd in double, for f16 and bf16 operands: their product is exact in
/// double and the sum's error is exact (TwoSum), so setting the last bit of an inexact sum keeps
/// the information a second rounding needs (from_double then rounds once). Rounding the sum
/// through float to nearest instead can land on a halfway point of the narrow type and tie the
/// wrong way: (1 + 2^-10)(1 - 2^-11) + 9 * 2^-24 in f16.
double fma_to_odd(double x, double y, double z) {
  double xy = x * y, r = xy + z;
  if (!std::isfinite(r))
    return r;
  double z_part = r - xy, error = (xy - (r - z_part)) + (z - z_part);
  uint64_t bits = std::bit_cast<uint64_t>(r);
  if (error == 0 || (bits & 1) != 0)
    return r;
  bool grow = std::signbit(error) == std::signbit(r); // the exact sum is farther from zero
  return std::bit_cast<double>(grow ? bits + 1 : bits - 1);
}

bool is_nan(Scalar s, uint64_t bits) {
  return std::isnan(to_double(s, bits));
}

/// minNum / maxNum, made commutative: -0.0 counts as less than +0.0 (the IR allows either zero
/// there; the reference picks one so that reordering the operands never changes a result).
uint64_t float_min_max(Scalar s, uint64_t a, uint64_t b, bool is_max) {
  if (is_nan(s, a) && is_nan(s, b))
    return a < b ? a : b; // two NaNs: either is allowed; pick by bits, whatever the order
  if (is_nan(s, a))
    return b;
  if (is_nan(s, b))
    return a;
  double x = to_double(s, a), y = to_double(s, b);
  bool a_less = x < y || (x == y && std::signbit(x) && !std::signbit(y));
  return (is_max ? a_less : !a_less) ? b : a;
}

} // namespace

uint64_t evaluate_lane(Opcode op, Scalar s, uint64_t a, uint64_t b, uint64_t c) {
  unsigned w = scalar_bits(s);
  uint64_t m = width_mask(w);
  bool flt = is_float(s), sgn = is_signed(s);
  int64_t sa = sign_extend(a, w), sb = sign_extend(b, w);
  switch (op) {
  case Opcode::Add:
    return flt ? float_op(
                     s, [](auto x, auto y, auto) { return x + y; }, a, b)
               : (a + b) & m;
  case Opcode::Sub:
    return flt ? float_op(
                     s, [](auto x, auto y, auto) { return x - y; }, a, b)
               : (a - b) & m;
  case Opcode::Mul:
    return flt ? float_op(
                     s, [](auto x, auto y, auto) { return x * y; }, a, b)
               : (a * b) & m;
  case Opcode::Div:
    if (flt)
      return float_op(
          s, [](auto x, auto y, auto) { return x / y; }, a, b);
    if (b == 0)
      return 0; // unspecified: the interpreter's choice is 0
    if (sgn) {
      if (sa == std::numeric_limits<int64_t>::min() >> (64 - w) && sb == -1)
        return a; // MIN / -1: unspecified; the interpreter wraps
      return static_cast<uint64_t>(sa / sb) & m;
    }
    return (a / b) & m;
  case Opcode::Rem:
    if (flt)
      return float_op(
          s, [](auto x, auto y, auto) { return std::fmod(x, y); }, a, b);
    if (b == 0)
      return 0;
    if (sgn) {
      if (sb == -1)
        return 0;
      return static_cast<uint64_t>(sa % sb) & m;
    }
    return (a % b) & m;
  case Opcode::Neg:
    return flt ? a ^ (uint64_t{1} << (w - 1)) : (0 - a) & m;
  case Opcode::Abs:
    return flt ? a & ~(uint64_t{1} << (w - 1)) : (sa < 0 ? (0 - a) & m : a);
  case Opcode::Min:
  case Opcode::Max: {
    bool is_max = op == Opcode::Max;
    if (flt)
      return float_min_max(s, a, b, is_max);
    bool less = sgn ? sa < sb : a < b;
    return (less != is_max) ? a : b;
  }
  case Opcode::Clamp:
    return evaluate_lane(Opcode::Min, s, evaluate_lane(Opcode::Max, s, a, b, 0), c, 0);
  case Opcode::And:
    return a & b;
  case Opcode::Or:
    return a | b;
  case Opcode::Xor:
    return a ^ b;
  case Opcode::Not:
    return ~a & m;
  case Opcode::Shl:
    return (a << (b & (w - 1))) & m; // an amount >= the width is unspecified: taken modulo
  case Opcode::Shr:
    return sgn ? static_cast<uint64_t>(sa >> (b & (w - 1))) & m : a >> (b & (w - 1));
  case Opcode::Popcount:
    return static_cast<uint64_t>(std::popcount(a & m));
  case Opcode::Clz:
    return static_cast<uint64_t>(std::countl_zero(a & m)) - (64 - w);
  case Opcode::Ctz:
    return (a & m) == 0 ? w : static_cast<uint64_t>(std::countr_zero(a));
  case Opcode::Ffs:
    return (a & m) == 0 ? 0 : static_cast<uint64_t>(std::countr_zero(a)) + 1;
  case Opcode::BitReverse: {
    uint64_t r = 0;
    for (unsigned k = 0; k < w; ++k)
      r |= ((a >> k) & 1) << (w - 1 - k);
    return r;
  }
  case Opcode::MulHi: { // the high half of the exact 2w-bit product
    __int128 p =
        sgn ? __int128(sa) * sb : static_cast<__int128>(static_cast<unsigned __int128>(a) * b);
    return static_cast<uint64_t>(p >> w) & m;
  }
  case Opcode::AddSat:
  case Opcode::SubSat: { // the exact result clamped to the type's range
    __int128 x = sgn ? __int128(sa) : __int128(a), y = sgn ? __int128(sb) : __int128(b);
    __int128 r = op == Opcode::AddSat ? x + y : x - y;
    __int128 lo = sgn ? -(__int128(1) << (w - 1)) : 0;
    __int128 hi = sgn ? (__int128(1) << (w - 1)) - 1 : __int128(m);
    return static_cast<uint64_t>(std::clamp(r, lo, hi)) & m;
  }
  case Opcode::Eq:
    return flt ? to_double(s, a) == to_double(s, b) : a == b;
  case Opcode::Ne:
    return flt ? !(to_double(s, a) == to_double(s, b)) : a != b;
  case Opcode::Lt:
    return flt ? to_double(s, a) < to_double(s, b) : (sgn ? sa < sb : a < b);
  case Opcode::Le:
    return flt ? to_double(s, a) <= to_double(s, b) : (sgn ? sa <= sb : a <= b);
  case Opcode::Gt:
    return flt ? to_double(s, a) > to_double(s, b) : (sgn ? sa > sb : a > b);
  case Opcode::Ge:
    return flt ? to_double(s, a) >= to_double(s, b) : (sgn ? sa >= sb : a >= b);
#define CUBECC_MATH1(opcode, fn)                                                                   \
  case Opcode::opcode:                                                                             \
    return float_op(                                                                               \
        s, [](auto x, auto, auto) { return fn; }, a);
    CUBECC_MATH1(Sqrt, std::sqrt(x))
    CUBECC_MATH1(Rsqrt, decltype(x)(1) / std::sqrt(x))
    CUBECC_MATH1(Exp, std::exp(x))
    CUBECC_MATH1(Exp2, std::exp2(x))
    CUBECC_MATH1(Log, std::log(x))
    CUBECC_MATH1(Log2, std::log2(x))
    CUBECC_MATH1(Sin, std::sin(x))
    CUBECC_MATH1(Cos, std::cos(x))
    CUBECC_MATH1(Tanh, std::tanh(x))
    CUBECC_MATH1(Erf, std::erf(x))
    CUBECC_MATH1(Floor, std::floor(x))
    CUBECC_MATH1(Ceil, std::ceil(x))
    CUBECC_MATH1(Round, std::round(x))
    CUBECC_MATH1(Tan, std::tan(x))
    CUBECC_MATH1(Asin, std::asin(x))
    CUBECC_MATH1(Acos, std::acos(x))
    CUBECC_MATH1(Atan, std::atan(x))
    CUBECC_MATH1(Sinh, std::sinh(x))
    CUBECC_MATH1(Cosh, std::cosh(x))
    CUBECC_MATH1(Asinh, std::asinh(x))
    CUBECC_MATH1(Acosh, std::acosh(x))
    CUBECC_MATH1(Atanh, std::atanh(x))
    CUBECC_MATH1(Expm1, std::expm1(x))
    CUBECC_MATH1(Log1p, std::log1p(x))
    CUBECC_MATH1(Trunc, std::trunc(x))
#undef CUBECC_MATH1
  case Opcode::Pow:
    return float_op(
        s, [](auto x, auto y, auto) { return std::pow(x, y); }, a, b);
  case Opcode::Atan2:
    return float_op(
        s, [](auto y, auto x, auto) { return std::atan2(y, x); }, a, b);
  case Opcode::Hypot:
    return float_op(
        s, [](auto x, auto y, auto) { return std::hypot(x, y); }, a, b);
  case Opcode::IsNan:
    return std::isnan(to_double(s, a)) ? 1 : 0;
  case Opcode::IsInf:
    return std::isinf(to_double(s, a)) ? 1 : 0;
  case Opcode::Fma:
    if (s == Scalar::F16 || s == Scalar::BF16)
      return from_double(s, fma_to_odd(to_double(s, a), to_double(s, b), to_double(s, c)));
    return float_op(
        s, [](auto x, auto y, auto z) { return std::fma(x, y, z); }, a, b, c);
  default:
    return 0;
  }
}

/// Value conversion of one lane (docs/ir.md, `cast`).
uint64_t convert_lane(Scalar from, Scalar to, uint64_t v) {
  unsigned fw = scalar_bits(from), tw = scalar_bits(to);
  if (to == Scalar::Bool)
    return is_float(from) ? to_double(from, v) != 0.0 : v != 0;
  if (from == Scalar::Bool)
    return is_float(to) ? from_double(to, v ? 1.0 : 0.0) : v;
  // Storage floats convert to and from float types only (the verifier's rule): through a double
  // that holds every value of both exactly, so rounding happens once.
  if ((is_float(from) || is_storage_float(from)) && (is_float(to) || is_storage_float(to)))
    return from_double(to, to_double(from, v));
  if (is_float(to)) {
    if (to == Scalar::F64 || to == Scalar::F32) {
      if (is_signed(from)) {
        int64_t x = sign_extend(v, fw);
        return to == Scalar::F64 ? std::bit_cast<uint64_t>(static_cast<double>(x))
                                 : std::bit_cast<uint32_t>(static_cast<float>(x));
      }
      return to == Scalar::F64 ? std::bit_cast<uint64_t>(static_cast<double>(v))
                               : std::bit_cast<uint32_t>(static_cast<float>(v));
    }
    // Integer to f16/bf16: through a double that is exact, or rounded to odd for 64-bit values
    // beyond 2^53 (then from_double rounds once more to odd, then to nearest: one rounding).
    bool negative = is_signed(from) && sign_extend(v, fw) < 0;
    uint64_t magnitude =
        negative ? uint64_t{0} - static_cast<uint64_t>(sign_extend(v, fw)) : (v & width_mask(fw));
    int shift = 0;
    while ((magnitude >> shift) >= (uint64_t{1} << 53))
      ++shift;
    uint64_t kept = magnitude >> shift;
    if (shift && (magnitude & ((uint64_t{1} << shift) - 1)))
      kept |= 1; // sticky: round to odd
    double x = std::ldexp(static_cast<double>(kept), shift);
    return from_double(to, negative ? -x : x);
  }
  if (is_float(from)) {
    double x = std::trunc(to_double(from, v));
    if (std::isnan(x))
      return 0;
    if (is_signed(to)) {
      double lo = -std::ldexp(1.0, static_cast<int>(tw) - 1);
      double hi = std::ldexp(1.0, static_cast<int>(tw) - 1);
      if (x <= lo)
        return (uint64_t{1} << (tw - 1)) & width_mask(tw);
      if (x >= hi)
        return width_mask(tw - 1);
      return static_cast<uint64_t>(static_cast<int64_t>(x)) & width_mask(tw);
    }
    if (x <= 0)
      return 0;
    if (x >= std::ldexp(1.0, static_cast<int>(tw)))
      return width_mask(tw);
    return static_cast<uint64_t>(x);
  }
  // Integer to integer: sign-extend from a signed source, then keep the target's width.
  uint64_t wide = is_signed(from) ? static_cast<uint64_t>(sign_extend(v, fw)) : v;
  return wide & width_mask(tw);
}

} // namespace cubecc::ir
