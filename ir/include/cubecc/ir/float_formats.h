//===- float_formats.h - The layouts of the IR's float types, and the storage floats' values --===//
//
// Every float scalar as (sign, exponent bits, mantissa bits, bias, specials): what the legalize
// pass needs to expand conversions into integer ops, and what the reference conversions of the
// storage floats (e4m3, e5m2, e2m1, ue8m0; docs/ir.md §2.1) are defined by.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/types.h"

#include <cstdint>

namespace cubecc::ir {

/// Which encodings of a format are not finite numbers.
enum class FloatSpecials : uint8_t {
  Ieee,      ///< an all-ones exponent is infinity (mantissa 0) or NaN: f16, bf16, f32, f64, e5m2
  NanOnly,   ///< only all-ones exponent and mantissa is NaN; no infinity (e4m3, "FN")
  None,      ///< every encoding is a finite number (e2m1)
  ScaleOnly, ///< no sign, no mantissa, no zero: 2^(e - 127), and 0xFF is NaN (ue8m0)
};

struct FloatFormat {
  unsigned exponent_bits;
  unsigned mantissa_bits;
  int bias; ///< a normal number is 2^(e - bias) * 1.m; a subnormal 2^(1 - bias) * 0.m
  FloatSpecials specials;
  /// Overflow (and infinity) converts to the largest finite value rather than to infinity.
  bool saturates;

  bool has_sign() const { return specials != FloatSpecials::ScaleOnly; }
  /// Bits of the encoding: sign, exponent and mantissa.
  unsigned bits() const { return (has_sign() ? 1 : 0) + exponent_bits + mantissa_bits; }
  /// The encoding of the largest finite magnitude.
  uint64_t max_finite() const;
  /// The encoding of +infinity (Ieee formats only).
  uint64_t infinity() const { return ((uint64_t{1} << exponent_bits) - 1) << mantissa_bits; }
  /// The encoding of the positive NaN a conversion produces (0 where the format has no NaN).
  uint64_t quiet_nan() const;
};

/// The layout of a float or storage-float scalar.
FloatFormat float_format(Scalar s);

/// The exact value of a storage-float encoding (NaN keeps the encoding's sign).
double storage_float_to_double(Scalar s, uint64_t bits);
/// `v` rounded to nearest-even in the storage float `s` (docs/ir.md §4.6): e4m3 and e2m1
/// saturate overflow and infinities to their largest finite value; e5m2 overflows to infinity;
/// NaN gives the format's NaN with the sign kept (e2m1, which has none, gives ±0). ue8m0 rounds
/// between powers of two, maps zero, negatives and values below 2^-127 to 2^-127 (0x00),
/// overflow and +infinity to 2^127 (0xFE), NaN to 0xFF.
uint64_t storage_float_from_double(Scalar s, double v);

/// The bits of an f32 rounded to TF32 (10 fraction bits; to nearest, ties away from zero, as
/// PTX's cvt.rna.tf32.f32), still as an f32: how each f32 operand of a matrix product enters it
/// (docs/ir.md §4.13). Overflow rounds to infinity; NaN is kept.
constexpr uint32_t round_to_tf32(uint32_t bits) {
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0)
    return bits;
  return (bits + 0x1000u) & 0xFFFFE000u;
}

} // namespace cubecc::ir
