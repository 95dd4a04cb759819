//===- float16_test.cpp - binary16 / bfloat16 conversions
//--------------------------------------===//
#include "cubecc/ir/float16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

using namespace cubecc::ir;

TEST(Float16, every_non_nan_half_survives_a_trip_through_float) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = f16_bits_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f))
      continue;
    EXPECT_EQ(float_to_f16_bits(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Float16, known_values_convert_exactly) {
  EXPECT_EQ(f16_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_bits_to_float(0x7bff), 65504.0f);              // largest finite half
  EXPECT_EQ(f16_bits_to_float(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_EQ(f16_bits_to_float(0x0400), std::ldexp(1.0f, -14)); // smallest normal
  EXPECT_EQ(f16_bits_to_float(0xc000), -2.0f);
  EXPECT_TRUE(std::isinf(f16_bits_to_float(0x7c00)));
}

TEST(Float16, float_to_half_rounds_to_nearest_even) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties go to even (1).
  EXPECT_EQ(float_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(float_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above halfway rounds up.
  EXPECT_EQ(float_to_f16_bits(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00); // rounds past the largest finite: infinity
  EXPECT_EQ(float_to_f16_bits(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000); // half the smallest subnormal: even
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_f16_bits(-0.0f), 0x8000);
}

TEST(Float16, nan_stays_nan) {
  EXPECT_EQ(float_to_f16_bits(std::nanf("")) & 0x7c00, 0x7c00);
  EXPECT_NE(float_to_f16_bits(std::nanf("")) & 0x3ff, 0);
  EXPECT_NE(float_to_bf16_bits(std::bit_cast<float>(0x7f800001u)) & 0x7f, 0);
}

TEST(BFloat16, every_non_nan_bfloat_survives_a_trip_through_float) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float f = bf16_bits_to_float(static_cast<uint16_t>(b));
    if (std::isnan(f))
      continue;
    EXPECT_EQ(float_to_bf16_bits(f), b) << "bfloat 0x" << std::hex << b;
  }
}

TEST(BFloat16, float_to_bfloat_rounds_to_nearest_even) {
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0x3f808000u)), 0x3f80); // tie, even below
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0x3f818000u)), 0x3f82); // tie, even above
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0x3f808001u)), 0x3f81);
}

#include "cubecc/ir/semantics.h"

namespace {

// Casts to f16 and bf16 round once, even from f64 and 64-bit integers: a value just above a
// halfway point must not first round onto it (through float) and then tie to even.
TEST(Float16, casts_from_f64_and_i64_round_once) {
  using cubecc::ir::Scalar;
  // bf16 4.453125 = halfway between 4.4375 (0x408e) and 4.46875 (0x408f); 2^-38 above it.
  double above = 4.453125 + std::ldexp(1.0, -38);
  EXPECT_EQ(cubecc::ir::from_double(Scalar::BF16, above), 0x408fu);
  EXPECT_EQ(cubecc::ir::from_double(Scalar::BF16, 4.453125), 0x408eu); // exact tie: to even
  EXPECT_EQ(cubecc::ir::from_double(Scalar::BF16, -above), 0xc08fu);
  // f16: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(cubecc::ir::from_double(Scalar::F16, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)),
            0x3c01u);
  EXPECT_EQ(cubecc::ir::from_double(Scalar::F16, 1.0 + std::ldexp(1.0, -11)), 0x3c00u);
  // i64 2^60 + 2^52 + 1: halfway between two bf16 values plus 1, beyond double's 53 bits.
  uint64_t big = (uint64_t{1} << 60) + (uint64_t{1} << 52) + 1;
  EXPECT_EQ(cubecc::ir::convert_lane(Scalar::I64, Scalar::BF16, big),
            cubecc::ir::from_double(Scalar::BF16, std::ldexp(1.0, 60) + std::ldexp(1.0, 53)));
  EXPECT_EQ(cubecc::ir::convert_lane(Scalar::U64, Scalar::BF16, big - 1),
            cubecc::ir::from_double(Scalar::BF16, std::ldexp(1.0, 60)));
}

} // namespace
