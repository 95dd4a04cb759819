//===- float16.cpp - binary16 and bfloat16 conversions ----------------------------------------===//
#include "cubecc/ir/float16.h"

#include <bit>
#include <cmath>

namespace cubecc::ir {

uint16_t float_to_f16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) // infinity or NaN; NaNs stay NaN (quiet) and keep their top payload bits
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31)
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10)
      return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    unsigned shift = static_cast<unsigned>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t out = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (out & 1u)))
    ++out; // a carry into the exponent is the correct rounding, up to infinity
  return static_cast<uint16_t>(out);
}

float f16_bits_to_float(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float magnitude = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exp == 31)
    return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bf16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

} // namespace cubecc::ir
