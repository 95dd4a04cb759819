//===- float16_test.cpp - binary16 / bfloat16 conversions
//--------------------------------------===//
#include "cubecc/ir/float16.h"
#include "float_samples.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

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

// fma of f16 rounds once. The exact product 0x3c01 * 0x3bff = (1 + 2^-10)(1 - 2^-11) is
// 1 + 2^-11 - 2^-21; adding 0x0009 (9 * 2^-24) gives 1 + 2^-11 + 2^-24: just above the halfway
// point between 1 and 1 + 2^-10, so 1 + 2^-10. Through f32 it first rounds onto the halfway point
// (2^-24 is half an f32 ulp; ties to even) and then ties to even at 1.
TEST(Float16, fma_rounds_once) {
  using cubecc::ir::Opcode;
  using cubecc::ir::Scalar;
  EXPECT_EQ(cubecc::ir::evaluate_lane(Opcode::Fma, Scalar::F16, 0x3c01, 0x3bff, 0x0009), 0x3c01u);
  EXPECT_EQ(cubecc::ir::evaluate_lane(Opcode::Fma, Scalar::F16, 0xbc01, 0x3bff, 0x8009), 0xbc01u);
  // Just below the halfway point (1 + 2^-11 - 2^-24): 1.
  EXPECT_EQ(cubecc::ir::evaluate_lane(Opcode::Fma, Scalar::F16, 0x3c01, 0x3bff, 0x0007), 0x3c00u);
  // Exactly halfway (1 + 2^-11): ties to even, 1.
  EXPECT_EQ(cubecc::ir::evaluate_lane(Opcode::Fma, Scalar::F16, 0x3c01, 0x3bff, 0x0008), 0x3c00u);
  // bf16: (1 + 2^-7)(1 - 2^-8) + 2^-15 = 1 + 2^-8, a tie: to even, 1; with 2^-15 + 2^-22 above it.
  EXPECT_EQ(cubecc::ir::evaluate_lane(Opcode::Fma, Scalar::BF16, 0x3f81, 0x3f7f, 0x3800), 0x3f80u);
  EXPECT_EQ(cubecc::ir::evaluate_lane(Opcode::Fma, Scalar::BF16, 0x3f81, 0x3f7f, 0x3801), 0x3f81u);
}

// fma of f16 and bf16 against an exact host reference: a * b + c is exact in binary128 when
// the operands' exponents are at most ~90 apart (every f16 triple; bf16 triples drawn so), and
// the nearest f16/bf16 value is picked among the neighbours of its f64 rounding by comparing
// distances in binary128 (ties to the even bit pattern). Half of the triples have an addend near
// the product's magnitude, where rounding through f32 first goes wrong about once in 1,300.
TEST(Float16, fma_matches_an_exact_reference_on_random_operands) {
  using cubecc::ir::Opcode;
  using cubecc::ir::Scalar;
  std::mt19937_64 rng(0xf3a);
  for (Scalar s : {Scalar::F16, Scalar::BF16}) {
    size_t compared = 0;
    while (compared < 200000) {
      auto [a, b, c] = cubecc::test::half_fma_operands(s, rng, rng() % 2);
      double x = cubecc::ir::to_double(s, a), y = cubecc::ir::to_double(s, b),
             z = cubecc::ir::to_double(s, c);
      if (!std::isfinite(x) || !std::isfinite(y) || !std::isfinite(z) || x * y == 0)
        continue;
      if (s == Scalar::BF16 && z != 0 && std::abs(std::ilogb(x * y) - std::ilogb(z)) > 90)
        continue;
      __float128 exact = __float128(x) * __float128(y) + __float128(z);
      if (exact == 0)
        continue; // the sign of an exact zero is not the question here
      uint64_t near = cubecc::ir::from_double(s, double(exact));
      uint64_t want = near;
      __float128 best = -1;
      for (uint64_t candidate : {near - 1, near, near + 1}) {
        double v = cubecc::ir::to_double(s, candidate & 0xffff);
        if (std::isnan(v) || (candidate & 0x8000) != (near & 0x8000))
          continue;
        __float128 d = exact - __float128(v);
        d = d < 0 ? -d : d;
        if (best < 0 || d < best || (d == best && (candidate & 1) == 0)) {
          best = d;
          want = candidate;
        }
      }
      if (std::isinf(double(exact)) || std::isinf(cubecc::ir::to_double(s, near)))
        want = near; // overflow: the rounding to infinity is from_double's
      uint64_t got = cubecc::ir::evaluate_lane(Opcode::Fma, s, a, b, c);
      ASSERT_EQ(got, want) << cubecc::ir::scalar_name(s) << " fma(" << std::hex << a << ", " << b
                           << ", " << c << ")";
      ++compared;
    }
  }
}

} // namespace
