//===- float_samples.h - Float bit patterns around the storage floats' rounding points --------===//
#pragma once

#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/semantics.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <vector>

namespace cubecc::test {

/// Every bit pattern of `bits` bits: 0 .. 2^bits - 1.
inline std::vector<uint64_t> every_pattern(unsigned bits) {
  std::vector<uint64_t> out(size_t{1} << bits);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = i;
  return out;
}

/// Bit patterns of the float type `s` (f16, bf16, f32 or f64): every exponent (f64: those near
/// the storage floats' range, and the extremes) with mantissas at and around each storage
/// float's rounding points (halfway, just below and above, for 0 to 3 kept bits), then `random`
/// random patterns.
inline std::vector<uint64_t> rounding_point_samples(ir::Scalar s, int random) {
  ir::FloatFormat f = ir::float_format(s);
  unsigned w = f.bits(), m = f.mantissa_bits;
  std::vector<uint64_t> mantissas = {0, 1, (uint64_t{1} << m) - 1};
  for (unsigned kept = 0; kept <= 3; ++kept)
    for (uint64_t base : {uint64_t{0}, uint64_t{1} << (m - kept)}) {
      uint64_t half = base + (uint64_t{1} << (m - kept - 1));
      for (uint64_t at : {half - 1, half, half + 1})
        mantissas.push_back(at & ir::width_mask(m));
    }
  std::vector<uint64_t> out;
  for (uint64_t sign : {uint64_t{0}, uint64_t{1}})
    for (uint64_t e = 0; e < (uint64_t{1} << f.exponent_bits); ++e) {
      if (s == ir::Scalar::F64 && !(e < 4 || (e > 1023 - 140 && e < 1023 + 140) || e > 2043))
        continue;
      for (uint64_t mant : mantissas)
        out.push_back((sign << (w - 1)) | (e << m) | mant);
    }
  std::mt19937_64 rng(23);
  for (int i = 0; i < random; ++i)
    out.push_back(rng() & ir::width_mask(w));
  return out;
}

/// Random f16 or bf16 fma operands {a, b, c} as bit patterns. With `near`, the addend's exponent
/// is within a few of the product's (a's and b's biased fields added, less 1.0's), where rounding
/// the sum twice goes wrong most often (about once in 1,300 such triples).
inline std::array<uint64_t, 3> half_fma_operands(ir::Scalar s, std::mt19937_64 &rng, bool near) {
  uint64_t a = rng() & 0xffff, b = rng() & 0xffff, c = rng() & 0xffff;
  if (near) {
    int64_t one = s == ir::Scalar::F16 ? 0x3c00 : 0x3f80;
    int64_t e = int64_t(a & 0x7fff) + int64_t(b & 0x7fff) - one + int64_t(rng() % 1201) - 600;
    c = (c & 0x8000) | uint64_t(std::clamp<int64_t>(e, 0, 0x7fff));
  }
  return {a, b, c};
}

} // namespace cubecc::test
