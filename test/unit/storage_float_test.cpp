//===- storage_float_test.cpp - e4m3, e5m2, e2m1, ue8m0: values, rounding, two implementations
//-===//
//
// The reference conversions (ir/src/float_formats.cpp, double arithmetic) are checked against
// values taken from the OCP 8-bit and MX specifications, written out here by hand. Then the
// legalize pass's integer expansion, which every backend emits, runs in the interpreter on every
// encoding of each storage float (to f16, bf16, f32, f64, and to each other storage float) and on
// f16, bf16, f32 and f64 values at and around every rounding point (to each storage float), and
// must give the reference's bits exactly.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/interpreter.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/semantics.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/legalize.h"
#include "float_samples.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace cubecc {
namespace {

using ir::Scalar;

constexpr Scalar kStorage[] = {Scalar::E4M3, Scalar::E5M2, Scalar::E2M1, Scalar::UE8M0};
constexpr Scalar kFloats[] = {Scalar::F16, Scalar::BF16, Scalar::F32, Scalar::F64};

double value(Scalar s, uint64_t bits) {
  return ir::to_double(s, bits);
}
uint64_t encode(Scalar s, double v) {
  return ir::from_double(s, v);
}

TEST(StorageFloat, DecodesTheSpecificationsValues) {
  // OCP 8-bit floating point, v1.0, tables 1 and 2.
  EXPECT_EQ(value(Scalar::E4M3, 0x7E), 448.0);
  EXPECT_EQ(value(Scalar::E4M3, 0xFE), -448.0);
  EXPECT_EQ(value(Scalar::E4M3, 0x08), std::ldexp(1.0, -6)); // smallest normal
  EXPECT_EQ(value(Scalar::E4M3, 0x07), 0.875 * std::ldexp(1.0, -6));
  EXPECT_EQ(value(Scalar::E4M3, 0x01), std::ldexp(1.0, -9)); // smallest subnormal
  EXPECT_EQ(value(Scalar::E4M3, 0x38), 1.0);
  EXPECT_EQ(value(Scalar::E4M3, 0x77), 240.0); // 2^7 * 1.875: all-ones exponent is finite
  EXPECT_TRUE(std::isnan(value(Scalar::E4M3, 0x7F)));
  EXPECT_TRUE(std::isnan(value(Scalar::E4M3, 0xFF)));
  EXPECT_TRUE(std::signbit(value(Scalar::E4M3, 0x80)));
  EXPECT_EQ(value(Scalar::E5M2, 0x7B), 57344.0);
  EXPECT_EQ(value(Scalar::E5M2, 0x04), std::ldexp(1.0, -14));
  EXPECT_EQ(value(Scalar::E5M2, 0x01), std::ldexp(1.0, -16));
  EXPECT_EQ(value(Scalar::E5M2, 0x3C), 1.0);
  EXPECT_EQ(value(Scalar::E5M2, 0x7C), HUGE_VAL);
  EXPECT_EQ(value(Scalar::E5M2, 0xFC), -HUGE_VAL);
  EXPECT_TRUE(std::isnan(value(Scalar::E5M2, 0x7D)));
  // OCP Microscaling formats, v1.0, section 5.3.3 (FP4) and 5.4 (E8M0).
  const double e2m1[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (uint64_t code = 0; code < 8; ++code) {
    EXPECT_EQ(value(Scalar::E2M1, code), e2m1[code]) << code;
    EXPECT_EQ(value(Scalar::E2M1, code | 8), -e2m1[code]) << code;
  }
  EXPECT_EQ(value(Scalar::E2M1, 0xF7), 6.0) << "the upper four bits of an e2m1 byte are ignored";
  EXPECT_EQ(value(Scalar::UE8M0, 0x7F), 1.0);
  EXPECT_EQ(value(Scalar::UE8M0, 0x00), std::ldexp(1.0, -127));
  EXPECT_EQ(value(Scalar::UE8M0, 0xFE), std::ldexp(1.0, 127));
  EXPECT_TRUE(std::isnan(value(Scalar::UE8M0, 0xFF)));
}

TEST(StorageFloat, RoundsToNearestEvenAndSaturatesWhereTheFormatHasNoInfinity) {
  // e4m3 near 1: steps of 1/8. 1 + 1/16 ties to 1.0 (even), 1 + 3/16 to 1.25 (even).
  EXPECT_EQ(encode(Scalar::E4M3, 1.0625), 0x38u);
  EXPECT_EQ(encode(Scalar::E4M3, 1.0625 + 1e-9), 0x39u);
  EXPECT_EQ(encode(Scalar::E4M3, 1.1875), 0x3Au);
  // Overflow: e4m3 and e2m1 saturate (also infinity); e5m2 goes to infinity.
  EXPECT_EQ(encode(Scalar::E4M3, 464.0), 0x7Eu); // the tie above 448 rounds to it (even)
  EXPECT_EQ(encode(Scalar::E4M3, 1e6), 0x7Eu);
  EXPECT_EQ(encode(Scalar::E4M3, -HUGE_VAL), 0xFEu);
  EXPECT_EQ(encode(Scalar::E2M1, 100.0), 0x7u);
  EXPECT_EQ(encode(Scalar::E2M1, 5.0), 0x6u);      // tie between 4 and 6: 4 (even mantissa)
  EXPECT_EQ(encode(Scalar::E5M2, 61440.0), 0x7Cu); // the tie above 57344: to even, infinity
  EXPECT_EQ(encode(Scalar::E5M2, 61439.0), 0x7Bu);
  EXPECT_EQ(encode(Scalar::E5M2, -HUGE_VAL), 0xFCu);
  // Underflow to subnormals and zero, with the sign kept.
  EXPECT_EQ(encode(Scalar::E4M3, std::ldexp(1.0, -10)), 0x00u); // half the smallest: even, 0
  EXPECT_EQ(encode(Scalar::E4M3, std::ldexp(1.5, -10)), 0x01u);
  EXPECT_EQ(encode(Scalar::E4M3, -std::ldexp(1.0, -30)), 0x80u);
  EXPECT_EQ(encode(Scalar::E2M1, 0.25), 0x0u);
  EXPECT_EQ(encode(Scalar::E2M1, 0.75), 0x2u); // tie between 0.5 and 1: 1 (even)
  // NaN keeps its sign where the format has NaN; e2m1 has none and gives a signed zero.
  double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(encode(Scalar::E4M3, nan), 0x7Fu);
  EXPECT_EQ(encode(Scalar::E4M3, -nan), 0xFFu);
  EXPECT_EQ(encode(Scalar::E5M2, nan), 0x7Eu);
  EXPECT_EQ(encode(Scalar::E2M1, -nan), 0x8u);
  // ue8m0: the nearest power of two (ties to the even encoding), clamped; no zero, no sign.
  EXPECT_EQ(encode(Scalar::UE8M0, 1.0), 0x7Fu);
  EXPECT_EQ(encode(Scalar::UE8M0, 1.4), 0x7Fu);
  EXPECT_EQ(encode(Scalar::UE8M0, 1.5), 0x80u); // tie between 0x7F and 0x80: 0x80
  EXPECT_EQ(encode(Scalar::UE8M0, 3.0), 0x80u); // tie between 0x80 and 0x81: 0x80
  EXPECT_EQ(encode(Scalar::UE8M0, 0.0), 0x00u);
  EXPECT_EQ(encode(Scalar::UE8M0, -4.0), 0x00u);
  EXPECT_EQ(encode(Scalar::UE8M0, HUGE_VAL), 0xFEu);
  EXPECT_EQ(encode(Scalar::UE8M0, nan), 0xFFu);
}

TEST(StorageFloat, EveryEncodingRoundTripsThroughItsValue) {
  for (Scalar s : kStorage) {
    ir::FloatFormat f = ir::float_format(s);
    for (uint64_t code = 0; code < (uint64_t{1} << f.bits()); ++code) {
      double v = value(s, code);
      if (std::isnan(v))
        continue;
      EXPECT_EQ(encode(s, v), code) << ir::scalar_name(s) << " " << code;
    }
  }
}

//===--- The legalized expansion against the reference, in the interpreter ----------------===//

/// One invocation per element: out[i] = cast(in[i]).
std::unique_ptr<ir::Module> cast_kernel(Scalar from, Scalar to) {
  std::string text = fmt::format(R"(module @m {{
  kernel @k(%a: buffer<{0}, read>, %out: buffer<{1}, readwrite>) workgroup(64, 1, 1) {{
    %gid = global_id : u32x3
    %i = vec.extract %gid {{lane = 0}} : u32
    %x = load %a, %i : {0}
    %y = cast %x : {1}
    store %out, %i, %y
    return
  }}
}}
)",
                                 ir::scalar_name(from), ir::scalar_name(to));
  ir::ParseResult parsed = ir::parse_module(text, "storage_float_test.cir");
  EXPECT_TRUE(parsed.module) << ir::to_string(parsed.errors) << text;
  return std::move(parsed.module);
}

/// The bytes of cast(inputs) from the kernel as written (the reference semantics) and from its
/// legalized form; `inputs` holds bit patterns of `from`.
std::pair<std::vector<uint64_t>, std::vector<uint64_t>> both_ways(Scalar from, Scalar to,
                                                                  std::vector<uint64_t> inputs) {
  size_t n = inputs.size();
  inputs.resize((n + 63) / 64 * 64);
  unsigned in_bytes = ir::scalar_bits(from) / 8, out_bytes = ir::scalar_bits(to) / 8;
  ir::HostBuffer a{from, std::vector<uint8_t>(inputs.size() * in_bytes)};
  for (size_t i = 0; i < inputs.size(); ++i)
    std::memcpy(a.bytes.data() + i * in_bytes, &inputs[i], in_bytes); // little-endian
  std::vector<uint64_t> results[2];
  for (int legalized = 0; legalized < 2; ++legalized) {
    std::unique_ptr<ir::Module> module = cast_kernel(from, to);
    if (!module)
      return {};
    if (legalized) {
      passes::legalize(*module, passes::LegalizeTarget::portable());
      EXPECT_EQ(ir::to_string(ir::verify(*module)), "");
      module->kernels()[0]->walk([&](const ir::Operation *op) {
        EXPECT_TRUE(passes::is_legal(*op)) << op->name();
        if (op->opcode() == ir::Opcode::Cast) {
          EXPECT_FALSE(ir::is_storage_float(op->operand(0)->type().element()) ||
                       ir::is_storage_float(op->result()->type().element()))
              << ir::to_string(*module);
        }
      });
    }
    ir::HostBuffer out{to, std::vector<uint8_t>(inputs.size() * out_bytes)};
    std::vector<ir::Argument> args{{&a, {}}, {&out, {}}};
    ir::LaunchConfig config;
    config.num_workgroups = {static_cast<uint32_t>(inputs.size() / 64), 1, 1};
    EXPECT_EQ(ir::to_string(ir::interpret(*module->kernels()[0], args, config)), "");
    for (size_t i = 0; i < n; ++i) {
      uint64_t bits = 0;
      std::memcpy(&bits, out.bytes.data() + i * out_bytes, out_bytes);
      results[legalized].push_back(bits);
    }
  }
  return {results[0], results[1]};
}

void expect_same(Scalar from, Scalar to, const std::vector<uint64_t> &inputs) {
  auto [reference, legalized] = both_ways(from, to, inputs);
  ASSERT_EQ(reference.size(), inputs.size());
  ASSERT_EQ(legalized.size(), inputs.size());
  unsigned shown = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (reference[i] != legalized[i] && shown++ < 10)
      ADD_FAILURE() << fmt::format("cast {} 0x{:x} to {}: reference 0x{:x}, legalized 0x{:x}",
                                   ir::scalar_name(from), inputs[i], ir::scalar_name(to),
                                   reference[i], legalized[i]);
  }
}

TEST(StorageFloat, EveryEncodingConvertsToEveryFloatTypeAsTheReferenceDoes) {
  for (Scalar s : kStorage) {
    for (Scalar to : kFloats)
      expect_same(s, to, test::every_pattern(8));
    for (Scalar to : kStorage)
      expect_same(s, to, test::every_pattern(8));
  }
}

// Samples, not every f16 and bf16 value: the interpreter runs the expansion too slowly for that
// here; the device tests (test/e2e/storage_float_test.cpp) convert every f16 and bf16 value.
TEST(StorageFloat, FloatValuesAroundEveryRoundingPointConvertAsTheReferenceDoes) {
  for (Scalar from : kFloats) {
    std::vector<uint64_t> inputs = test::rounding_point_samples(from, 2000);
    for (Scalar s : kStorage)
      expect_same(from, s, inputs);
  }
}

TEST(StorageFloat, TheVerifierKeepsStorageFloatsOutOfArithmetic) {
  auto errors = [](const std::string &body) {
    std::string text = "module @m {\n  kernel @k(%x: e4m3, %y: i32) workgroup(1, 1, 1) {\n" + body +
                       "    return\n  }\n}\n";
    ir::ParseResult parsed = ir::parse_module(text, "t.cir");
    if (!parsed.module)
      return ir::to_string(parsed.errors);
    return ir::to_string(ir::verify(*parsed.module));
  };
  EXPECT_NE(errors("    %a = add %x, %x : e4m3\n").find("works on integer or float types"),
            std::string::npos);
  EXPECT_NE(errors("    %a = eq %x, %x : bool\n").find("cast storage floats to f32"),
            std::string::npos);
  EXPECT_NE(errors("    %a = cast %y : e4m3\n").find("cast through f32"), std::string::npos);
  EXPECT_NE(errors("    %a = cast %x : i32\n").find("cast through f32"), std::string::npos);
  EXPECT_EQ(errors("    %a = cast %x : f32\n    %b = cast %a : e5m2\n    %c = bitcast %b : u8\n"),
            "");
  EXPECT_NE(errors("    %a = const 0x10 : e2m1\n").find("beyond the 4 bits"), std::string::npos);
}

} // namespace
} // namespace cubecc
