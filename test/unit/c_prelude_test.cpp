//===- c_prelude_test.cpp - The CUDA/HIP prelude's rounding helpers, run on the host
//-----------===//
//
// The part of codegen/common/c_prelude.h between its "cubecc-host-tested" markers (extracted at
// build time, test/utils/extract-prelude-section.cmake) is plain C++ over a few CUDA intrinsics.
// Compiled here with those intrinsics defined by std::bit_cast, it must round exactly as the
// reference interpreter does: f16/bf16 fma and 64-bit integer -> bf16 casts, each one rounding,
// which no test can check on a GPU this machine does not have. (ISO C++20 without -march: the
// compiler contracts nothing, as NVRTC --fmad=false and hipRTC -ffp-contract=off do not.)
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/semantics.h"
#include "cubecc/ir/types.h"
#include "float_samples.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

namespace host_prelude {
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef float f32;
typedef double f64;
inline u32 __float_as_uint(f32 x) {
  return std::bit_cast<u32>(x);
}
inline f32 __uint_as_float(u32 x) {
  return std::bit_cast<f32>(x);
}
inline i64 __double_as_longlong(f64 x) {
  return std::bit_cast<i64>(x);
}
inline f64 __longlong_as_double(i64 x) {
  return std::bit_cast<f64>(x);
}
#define __device__
#include "c_prelude_host_tested.inc"
#undef __device__
} // namespace host_prelude

namespace {

using cubecc::ir::Opcode;
using cubecc::ir::Scalar;

bool same_value(Scalar s, uint64_t a, uint64_t b) {
  return a == b ||
         (std::isnan(cubecc::ir::to_double(s, a)) && std::isnan(cubecc::ir::to_double(s, b)));
}

/// What CUDA/HIP compute for fma of f16/bf16 bits (registers hold them as f32, exactly; the
/// result is rounded once more, to nearest, by cubecc_round_f16/bf16).
uint64_t prelude_fma(Scalar s, uint64_t a, uint64_t b, uint64_t c) {
  float r = host_prelude::cubecc_half_fma_to_odd(
      cubecc::ir::to_double(s, a), cubecc::ir::to_double(s, b), cubecc::ir::to_double(s, c));
  return cubecc::ir::from_double(s, r);
}

TEST(CPrelude, half_fma_rounds_once_as_the_interpreter_does) {
  // Hand-derived: (32 + 2^-5)(32 - 2^-6) + 9 * 2^-14 = 2^10 (1 + 2^-11 + 2^-24) is 1025 in f16;
  // bf16 1.578125 * 2^99 * 2.5 is a halfway point and 122.5 tips it up (0x71fd).
  EXPECT_EQ(prelude_fma(Scalar::F16, 0x5001, 0x4fff, 0x1080), 0x6401u);
  EXPECT_EQ(prelude_fma(Scalar::BF16, 0x714a, 0x4020, 0x42f5), 0x71fdu);
  std::mt19937_64 rng(0xc0de);
  for (Scalar s : {Scalar::F16, Scalar::BF16}) {
    for (int i = 0; i < 300000; ++i) {
      auto [a, b, c] = cubecc::test::half_fma_operands(s, rng, i % 2);
      uint64_t want = cubecc::ir::evaluate_lane(Opcode::Fma, s, a, b, c);
      uint64_t got = prelude_fma(s, a, b, c);
      ASSERT_TRUE(same_value(s, got, want))
          << cubecc::ir::scalar_name(s) << " fma(" << std::hex << a << ", " << b << ", " << c
          << "): prelude " << got << ", interpreter " << want;
    }
  }
}

TEST(CPrelude, casts_from_64_bit_integers_to_bf16_round_once) {
  auto prelude_cast = [](Scalar from, uint64_t v) -> uint64_t {
    double d = from == Scalar::I64 ? host_prelude::cubecc_i64_to_f64_odd(static_cast<int64_t>(v))
                                   : host_prelude::cubecc_u64_to_f64_odd(v);
    return cubecc::ir::from_double(Scalar::BF16, host_prelude::cubecc_f64_to_f32_odd(d));
  };
  // 2^60 + 2^52 + 1: 1 above a bf16 halfway point, past f64's 53 bits (2^60 + 2^53, 0x5d81).
  uint64_t above = (uint64_t{1} << 60) + (uint64_t{1} << 52) + 1;
  EXPECT_EQ(prelude_cast(Scalar::U64, above), 0x5d81u);
  EXPECT_EQ(prelude_cast(Scalar::I64, above), 0x5d81u);
  EXPECT_EQ(prelude_cast(Scalar::I64, ~above + 1), 0xdd81u);
  std::mt19937_64 rng(0xb16);
  for (int i = 0; i < 300000; ++i) {
    uint64_t v = rng() >> (rng() % 64);
    if (i % 2) // a bf16 halfway pattern at the top, and a low 1 bit past f64's precision
      v = (v & ~uint64_t{0xfff}) | ((rng() % 2) << 11) | 1;
    for (Scalar from : {Scalar::U64, Scalar::I64}) {
      uint64_t want = cubecc::ir::convert_lane(from, Scalar::BF16, v);
      ASSERT_EQ(prelude_cast(from, v), want)
          << cubecc::ir::scalar_name(from) << " " << std::hex << v << " -> bf16";
    }
  }
}

} // namespace
