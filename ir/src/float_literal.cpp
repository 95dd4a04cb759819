//===- float_literal.cpp ----------------------------------------------------------------------===//
#include "float_literal.h"

#include "cubecc/ir/float16.h"
#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/semantics.h"

#include <fmt/format.h>

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdlib>
#include <locale.h>

namespace cubecc::ir::detail {
namespace {

struct Format {
  unsigned mantissa_bits;
  unsigned exponent_bits;
};

Format format_of(Scalar s) {
  FloatFormat f = float_format(s);
  return {f.mantissa_bits, f.exponent_bits};
}

/// Rounds a double to the narrower IEEE format, to nearest-even, in one step.
uint64_t narrow(double d, Format f) {
  uint64_t x = std::bit_cast<uint64_t>(d);
  uint64_t sign = (x >> 63) << (f.mantissa_bits + f.exponent_bits);
  int exponent = static_cast<int>((x >> 52) & 0x7ff);
  uint64_t mantissa = x & ((uint64_t{1} << 52) - 1);
  uint64_t max_exponent = (uint64_t{1} << f.exponent_bits) - 1;
  if (exponent == 0x7ff) // infinity or NaN (NaN stays quiet NaN)
    return sign | (max_exponent << f.mantissa_bits) |
           (mantissa ? (uint64_t{1} << (f.mantissa_bits - 1)) : 0);
  if (exponent == 0) // zero, or a double subnormal: far below every narrower format's range
    return sign;
  int bias = (1 << (f.exponent_bits - 1)) - 1;
  int e = exponent - 1023 + bias;
  if (e >= static_cast<int>(max_exponent))
    return sign | (max_exponent << f.mantissa_bits);
  mantissa |= uint64_t{1} << 52;
  unsigned shift = 52 - f.mantissa_bits;
  if (e <= 0) { // subnormal in the narrow format
    shift += static_cast<unsigned>(1 - e);
    if (shift > 63)
      return sign;
    e = 0;
  }
  uint64_t kept = mantissa >> shift;
  uint64_t rest = mantissa & ((uint64_t{1} << shift) - 1);
  uint64_t half = uint64_t{1} << (shift - 1);
  if (e > 0)
    kept &= (uint64_t{1} << f.mantissa_bits) - 1; // the implicit bit lives in the exponent
  uint64_t out = (static_cast<uint64_t>(e) << f.mantissa_bits) + kept;
  if (rest > half || (rest == half && (out & 1)))
    ++out; // carries into the exponent, up to infinity, as rounding should
  return sign | out;
}

double widen(uint64_t bits, Scalar s) {
  return to_double(s, bits);
}

/// `bits`' value, with infinity replaced by the power of two just past the largest finite value
/// (where rounding to infinity starts counting from).
double value_for_rounding(uint64_t bits, Scalar s, Format f) {
  double v = widen(bits, s);
  if (!std::isinf(v))
    return v;
  uint64_t largest = (((uint64_t{1} << f.exponent_bits) - 2) << f.mantissa_bits) |
                     ((uint64_t{1} << f.mantissa_bits) - 1);
  double m = widen(largest, s);
  double beyond = m + (m - widen(largest - 1, s));
  return v < 0 ? -beyond : beyond;
}

/// Rewrites "d.ddde[+-]XX" without the exponent when -4 <= XX < 16 ("6.55e+04" -> "65500").
std::string positional_if_moderate(const std::string &scientific) {
  size_t e = scientific.find('e');
  int exponent = std::atoi(scientific.c_str() + e + 1);
  if (exponent < -4 || exponent >= 16)
    return scientific;
  bool negative = scientific[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (scientific[i] != '.')
      digits += scientific[i];
  std::string out = negative ? "-" : "";
  if (exponent < 0) {
    out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
    out += digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0');
  } else {
    out += digits.substr(0, static_cast<size_t>(exponent) + 1) + "." +
           digits.substr(static_cast<size_t>(exponent) + 1);
  }
  return out;
}

/// strtod in the "C" locale (an embedding application's locale may use a decimal comma) under a
/// rounding mode; `end` receives the end of what it read.
double read_double(const std::string &text, int mode, char **end) {
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", nullptr);
  int previous = std::fegetround();
  std::fesetround(mode);
  double d = strtod_l(text.c_str(), end, c_locale);
  std::fesetround(previous);
  return d;
}

/// Whether a literal of a saturating storage float lies in its range: it rounds (as if the
/// exponent were unbounded) to no more than the largest finite value, and for ue8m0 is positive.
/// Conversions saturate; a literal that only fits by saturating is a mistake in the text.
bool storage_literal_in_range(Scalar s, double v) {
  FloatFormat f = float_format(s);
  if (f.specials == FloatSpecials::ScaleOnly && !(v > 0))
    return false;
  if (!f.saturates)
    return true;
  uint64_t max = f.max_finite();
  double largest = widen(max, s), below = widen(max - 1, s);
  double limit = largest + (largest - below) / 2; // the tie above the largest value
  double a = std::fabs(v);
  return a < limit || (a == limit && (max & 1) == 0);
}

} // namespace

FloatLiteral parse_decimal_float(std::string_view text, Scalar s) {
  std::string copy(text);
  // strtod also reads "inf", "nan", hex floats and leading spaces: the lexer's number tokens hold
  // none of these, but check that this is a plain decimal so that this function stays honest.
  if (copy.empty() || copy.find_first_not_of("0123456789.eE+-") != std::string::npos)
    return {FloatLiteralError::Malformed};
  char *end = nullptr;
  if (s == Scalar::F64) {
    double d = read_double(copy, FE_TONEAREST, &end);
    if (end != copy.c_str() + copy.size())
      return {FloatLiteralError::Malformed};
    if (std::isinf(d))
      return {FloatLiteralError::Overflow};
    return {std::nullopt, std::bit_cast<uint64_t>(d)};
  }
  // The decimal lies in [low, high], two adjacent doubles (equal when it is exact). Each rounds to
  // the narrow format; when they round apart, the narrow format's rounding boundary is one of
  // them, and the decimal lies strictly on the far side of it.
  double low = read_double(copy, FE_DOWNWARD, &end);
  if (end != copy.c_str() + copy.size())
    return {FloatLiteralError::Malformed};
  double high = read_double(copy, FE_UPWARD, &end);
  Format f = format_of(s);
  auto round = [&](double d) {
    return is_storage_float(s) ? storage_float_from_double(s, d) : narrow(d, f);
  };
  uint64_t a = round(low), b = round(high);
  uint64_t bits = a;
  if (a != b) {
    double boundary = (value_for_rounding(a, s, f) + value_for_rounding(b, s, f)) / 2;
    bits = boundary == low ? b : a;
  }
  if (std::isinf(widen(bits, s)))
    return {FloatLiteralError::Overflow};
  if (is_storage_float(s) && !storage_literal_in_range(s, low))
    return {FloatLiteralError::Overflow};
  return {std::nullopt, bits};
}

std::string format_shortest_float(uint64_t bits, Scalar s) {
  std::string text;
  if (s == Scalar::F64) {
    text = fmt::format("{}", std::bit_cast<double>(bits));
  } else if (s == Scalar::F32) {
    text = fmt::format("{}", std::bit_cast<float>(static_cast<uint32_t>(bits)));
  } else if (is_storage_float(s) &&
             parse_decimal_float(fmt::format("{}", widen(bits, s)), s).bits == bits) {
    // A storage float's value is a double: its shortest text as a double, which is the exact
    // value where that is short (448, not the 450 that also reads back as 448).
    text = fmt::format("{}", widen(bits, s));
  } else {
    // The fewest significant digits that read back exactly (as numpy prints halves), written
    // like fmt writes floats: positional for moderate exponents, scientific beyond.
    double v = widen(bits, s);
    for (int digits = 1; digits <= 17; ++digits) {
      text = fmt::format("{:.{}e}", v, digits - 1);
      FloatLiteral back = parse_decimal_float(text, s);
      if (!back.error && back.bits == bits)
        break;
    }
    text = positional_if_moderate(text);
  }
  // "1" would read back as an integer literal; keep floats recognisable.
  if (text.find_first_of(".eE") == std::string::npos)
    text += ".0";
  return text;
}

} // namespace cubecc::ir::detail
