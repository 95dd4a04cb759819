//===- float_formats.cpp - Float layouts, and the storage floats' reference conversions -------===//
//
// The conversions here are the definition the interpreter executes and constant folding applies.
// They are written with double arithmetic (frexp, ldexp, nearbyint), deliberately unlike the
// integer expansion the legalize pass gives every backend, so that the exhaustive tests compare
// two independent implementations.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/float_formats.h"

#include <cfenv>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace cubecc::ir {

uint64_t FloatFormat::max_finite() const {
  uint64_t all_exponent = (uint64_t{1} << exponent_bits) - 1;
  uint64_t all_mantissa = (uint64_t{1} << mantissa_bits) - 1;
  switch (specials) {
  case FloatSpecials::Ieee:
    return ((all_exponent - 1) << mantissa_bits) | all_mantissa;
  case FloatSpecials::NanOnly:
    return (all_exponent << mantissa_bits) | (all_mantissa - 1);
  case FloatSpecials::None:
    return (all_exponent << mantissa_bits) | all_mantissa;
  case FloatSpecials::ScaleOnly:
    return all_exponent - 1;
  }
  return 0;
}

uint64_t FloatFormat::quiet_nan() const {
  switch (specials) {
  case FloatSpecials::Ieee:
    return infinity() | (uint64_t{1} << (mantissa_bits - 1));
  case FloatSpecials::NanOnly:
  case FloatSpecials::ScaleOnly:
    return (uint64_t{1} << (exponent_bits + mantissa_bits)) - 1;
  case FloatSpecials::None:
    return 0;
  }
  return 0;
}

FloatFormat float_format(Scalar s) {
  switch (s) {
  case Scalar::F16:
    return {5, 10, 15, FloatSpecials::Ieee, false};
  case Scalar::BF16:
    return {8, 7, 127, FloatSpecials::Ieee, false};
  case Scalar::F32:
    return {8, 23, 127, FloatSpecials::Ieee, false};
  case Scalar::F64:
    return {11, 52, 1023, FloatSpecials::Ieee, false};
  case Scalar::E4M3:
    return {4, 3, 7, FloatSpecials::NanOnly, true};
  case Scalar::E5M2:
    return {5, 2, 15, FloatSpecials::Ieee, false};
  case Scalar::E2M1:
    return {2, 1, 1, FloatSpecials::None, true};
  case Scalar::UE8M0:
    return {8, 0, 127, FloatSpecials::ScaleOnly, true};
  default:
    throw std::logic_error("float_format: not a float type");
  }
}

double storage_float_to_double(Scalar s, uint64_t bits) {
  FloatFormat f = float_format(s);
  bits &= (uint64_t{1} << f.bits()) - 1;
  if (f.specials == FloatSpecials::ScaleOnly)
    return bits == f.quiet_nan() ? std::numeric_limits<double>::quiet_NaN()
                                 : std::ldexp(1.0, static_cast<int>(bits) - f.bias);
  unsigned magnitude_bits = f.exponent_bits + f.mantissa_bits;
  bool negative = (bits >> magnitude_bits) & 1;
  uint64_t magnitude = bits & ((uint64_t{1} << magnitude_bits) - 1);
  uint64_t exponent = magnitude >> f.mantissa_bits;
  uint64_t mantissa = magnitude & ((uint64_t{1} << f.mantissa_bits) - 1);
  double value;
  if ((f.specials == FloatSpecials::NanOnly && magnitude == f.quiet_nan()) ||
      (f.specials == FloatSpecials::Ieee && magnitude > f.infinity()))
    value = std::numeric_limits<double>::quiet_NaN();
  else if (f.specials == FloatSpecials::Ieee && magnitude == f.infinity())
    value = std::numeric_limits<double>::infinity();
  else if (exponent == 0) // subnormal: 0.m * 2^(1 - bias)
    value =
        std::ldexp(static_cast<double>(mantissa), 1 - f.bias - static_cast<int>(f.mantissa_bits));
  else
    value = std::ldexp(static_cast<double>(mantissa | (uint64_t{1} << f.mantissa_bits)),
                       static_cast<int>(exponent) - f.bias - static_cast<int>(f.mantissa_bits));
  return negative ? -value : value;
}

namespace {

/// ue8m0: the power of two nearest `v` (ties to the even encoding), clamped to the format.
uint64_t scale_from_double(const FloatFormat &f, double v) {
  if (std::isnan(v))
    return f.quiet_nan();
  if (!(v > 0))
    return 0; // zero and negatives: the smallest scale
  if (std::isinf(v))
    return f.max_finite();
  int exponent;
  double fraction = std::frexp(v, &exponent); // v = fraction * 2^exponent, fraction in [0.5, 1)
  int64_t code = int64_t{exponent} - 1 + f.bias;
  double above = fraction * 2 - 1; // v = 2^(exponent - 1) * (1 + above)
  if (above > 0.5 || (above == 0.5 && (code & 1)))
    ++code;
  if (code < 0)
    return 0;
  return code > static_cast<int64_t>(f.max_finite()) ? f.max_finite() : static_cast<uint64_t>(code);
}

} // namespace

uint64_t storage_float_from_double(Scalar s, double v) {
  FloatFormat f = float_format(s);
  if (f.specials == FloatSpecials::ScaleOnly)
    return scale_from_double(f, v);
  uint64_t sign = std::signbit(v) ? uint64_t{1} << (f.exponent_bits + f.mantissa_bits) : 0;
  if (std::isnan(v))
    return sign | f.quiet_nan();
  double a = std::fabs(v);
  if (a == 0)
    return sign;
  double largest = storage_float_to_double(s, f.max_finite());
  if (std::isinf(a))
    return sign | (f.saturates ? f.max_finite() : f.infinity());
  // a = q * 2^(e - M) with e the exponent of a's leading bit, no lower than the normal minimum:
  // rounding q to an integer is rounding a to the format's precision there.
  int exponent;
  std::frexp(a, &exponent);
  int min_normal = 1 - f.bias;
  int e = std::max(exponent - 1, min_normal);
  int saved = std::fegetround();
  std::fesetround(FE_TONEAREST);
  double q = std::nearbyint(std::ldexp(a, static_cast<int>(f.mantissa_bits) - e));
  std::fesetround(saved);
  double rounded = std::ldexp(q, e - static_cast<int>(f.mantissa_bits));
  if (rounded > largest)
    return sign | (f.saturates ? f.max_finite() : f.infinity());
  auto integer = static_cast<uint64_t>(q);
  uint64_t implicit = uint64_t{1} << f.mantissa_bits;
  if (integer == 2 * implicit) { // rounded up into the next binade
    integer = implicit;
    ++e;
  }
  if (integer < implicit) // subnormal (only at the normal minimum's exponent)
    return sign | integer;
  return sign | (static_cast<uint64_t>(e + f.bias) << f.mantissa_bits) | (integer - implicit);
}

} // namespace cubecc::ir
