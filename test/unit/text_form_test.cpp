//===- text_form_test.cpp - Printer and parser properties
//--------------------------------------===//
#include "cubecc/ir/builder.h"
#include "test_support.h"

#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <random>

using namespace cubecc;
using namespace cubecc::ir;

namespace {

/// Prints a one-kernel module holding `const <bits> : <type>`, parses it back and returns the
/// bits the parser produced.
int64_t constant_round_trip(Type type, int64_t bits) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  b.create(Opcode::Const, {}, {type}, {{"value", bits}});
  b.ret();
  std::string text = to_string(m);
  ParseResult r = parse_module(text, "roundtrip.cir");
  EXPECT_TRUE(r.module) << to_string(r.errors) << text;
  if (!r.module)
    return ~bits;
  return r.module->kernels()[0]->body().front()->attributes().get_int("value").value_or(~bits);
}

} // namespace

TEST(TextForm, every_half_and_bfloat_constant_round_trips_bit_exactly) {
  for (Scalar s : {Scalar::F16, Scalar::BF16})
    for (int64_t bits = 0; bits <= 0xffff; ++bits)
      ASSERT_EQ(constant_round_trip(Type::scalar(s), bits), bits)
          << scalar_name(s) << " bits 0x" << std::hex << bits;
}

TEST(TextForm, random_f32_and_f64_constants_round_trip_bit_exactly) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 20000; ++i) {
    auto bits32 = static_cast<int64_t>(rng() & 0xffffffffu);
    ASSERT_EQ(constant_round_trip(Type::scalar(Scalar::F32), bits32), bits32) << std::hex << bits32;
    auto bits64 = static_cast<int64_t>(rng());
    ASSERT_EQ(constant_round_trip(Type::scalar(Scalar::F64), bits64), bits64) << std::hex << bits64;
  }
}

TEST(TextForm, integer_constants_round_trip_at_the_edges_of_every_width) {
  for (Scalar s : {Scalar::I8, Scalar::I16, Scalar::I32, Scalar::I64, Scalar::U8, Scalar::U16,
                   Scalar::U32, Scalar::U64}) {
    unsigned w = scalar_bits(s);
    uint64_t mask = w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
    for (uint64_t v : {uint64_t{0}, uint64_t{1}, mask, mask >> 1, (mask >> 1) + 1, uint64_t{42}}) {
      auto bits = static_cast<int64_t>(v & mask);
      EXPECT_EQ(constant_round_trip(Type::scalar(s), bits), bits) << scalar_name(s) << " " << v;
    }
  }
}

TEST(TextForm, printing_a_parsed_module_reproduces_it) {
  const char *text = R"(module @m {
  kernel @k(%buf: buffer<i32, readwrite>, %n: i32) workgroup(64, 2, 1) attributes {note = "a \"q\"\0A", tile = -3} {
    %0 = const 0 : i32
    %1 = const 1 : i32
    %sum, %last = for %0, %n, %1, %0, %0 {unroll = 4} : i32, i32 (%i: i32, %acc: i32, %prev: i32) {
      %v = load %buf, %i : i32
      %big = gt %v, %1 : bool
      if %big {
        break %acc, %v
      }
      %next = add %acc, %v : i32
      yield %next, %v
    } loc("k.cpp":3:5)
    %w = while %sum : i32 (%x: i32) {
      %more = gt %x, %0 : bool
      condition %more, %x
    } do (%y: i32) {
      %z = sub %y, %1 : i32
      yield %z
    }
    store %buf, %0, %w
    return
  }
}
)";
  auto m = test::parse_valid(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(to_string(*m), text);
}

TEST(TextForm, an_if_with_results_keeps_an_else_that_yields_nothing) {
  // Found by the parser fuzzer: the module does not verify (the else yields no value), but the
  // parser accepts it, so printing must give text that parses back to the same module. The short
  // form without `else` is only for ifs without results.
  const char *text = R"(module @m {
  kernel @k(%c: bool, %a: f32) {
    %r = if %c : f32 {
      yield %a
    } else {
      yield
    }
    return
  }
}
)";
  ir::ParseResult parsed = ir::parse_module(text, "test.cir");
  ASSERT_TRUE(parsed.module) << ir::to_string(parsed.errors);
  std::string once = ir::to_string(*parsed.module);
  EXPECT_NE(once.find("} else {"), std::string::npos) << once;
  ir::ParseResult again = ir::parse_module(once, "printed.cir");
  ASSERT_TRUE(again.module) << ir::to_string(again.errors) << "\n" << once;
  EXPECT_EQ(ir::to_string(*again.module), once);
  EXPECT_FALSE(ir::verify(*parsed.module).empty()); // and it is still refused by the verifier
}

TEST(TextForm, duplicate_name_hints_are_made_unique_and_then_stay_stable) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Value *p = k.add_parameter(Type::scalar(Scalar::I32), "x");
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  Value *a = b.op(Opcode::Add, {p, p});
  a->set_name("x");
  Value *c = b.op(Opcode::Mul, {a, a});
  c->set_name("x_1");
  b.ret();
  std::string once = to_string(m);
  EXPECT_NE(once.find("%x_1 = add %x, %x"), std::string::npos) << once;
  EXPECT_NE(once.find("%x_1_1 = mul %x_1, %x_1"), std::string::npos) << once;
  auto reparsed = test::parse_valid(once);
  ASSERT_TRUE(reparsed);
  EXPECT_EQ(to_string(*reparsed), once);
}

TEST(TextForm, locations_can_be_left_out_of_the_text) {
  auto m = test::parse_valid(R"(module @m {
  kernel @k() {
    return loc("a.cpp":1:2)
  } loc("a.cpp":1:1)
})");
  ASSERT_TRUE(m);
  std::string text = to_string(*m, {.locations = false});
  EXPECT_EQ(text.find("loc("), std::string::npos) << text;
}

TEST(TextForm, parse_errors_carry_the_buffer_name_line_and_column) {
  ParseResult r = parse_module("module @m {\n  kernel @k() {\n    %0 = nope : f32\n", "in.cir");
  ASSERT_FALSE(r.module);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].str(), "in.cir:3:10: error: unknown operation 'nope'");
}

namespace {

/// The bits `const <literal> : <type>` parses to, or -1 when it does not parse.
int64_t literal_bits(std::string_view literal, std::string_view type) {
  std::string text = fmt::format("module @m {{\n  kernel @k() {{\n    %c = const {} : {}\n    "
                                 "return\n  }}\n}}\n",
                                 literal, type);
  ParseResult r = parse_module(text, "literal.cir");
  if (!r.module)
    return -1;
  return r.module->kernels()[0]->body().front()->attributes().get_int("value").value_or(-1);
}

} // namespace

TEST(TextForm, decimal_literals_round_once_to_nearest_even_in_the_constant_type) {
  // Halfway between two f16 values rounds to even; anything above halfway rounds up, even when
  // rounding the decimal to f32 first would land exactly on the halfway point.
  EXPECT_EQ(literal_bits("1.00048828125", "f16"), 0x3c00);
  EXPECT_EQ(literal_bits("1.00048828125001", "f16"), 0x3c01);
  EXPECT_EQ(literal_bits("2.98023223876953125e-08", "f16"), 0x0000); // half the smallest subnormal
  EXPECT_EQ(literal_bits("2.98023224e-08", "f16"), 0x0001);
  EXPECT_EQ(literal_bits("1.0039063", "bf16"), 0x3f81);
  EXPECT_EQ(literal_bits("1.00390625", "bf16"), 0x3f80);
  // Just below the point where rounding reaches infinity: the largest finite value.
  EXPECT_EQ(literal_bits("65519.999", "f16"), 0x7bff);
  EXPECT_EQ(literal_bits("65520", "f16"), -1);
  EXPECT_EQ(literal_bits("3.3961775e38", "bf16"), 0x7f7f);
  // Tiny values round to zero, as IEEE arithmetic does, for every float type.
  EXPECT_EQ(literal_bits("1e-50", "f16"), 0);
  EXPECT_EQ(literal_bits("1e-50", "f32"), 0);
  EXPECT_EQ(literal_bits("-1e-400", "f64"), static_cast<int64_t>(0x8000000000000000u));
  EXPECT_EQ(literal_bits("1e999", "f64"), -1);
}

TEST(TextForm, half_constants_print_with_the_fewest_digits_that_read_back) {
  auto printed = [](int64_t bits, Type t) { return format_constant(t, bits); };
  EXPECT_EQ(printed(0x3555, Type::scalar(Scalar::F16)), "0.3333");
  EXPECT_EQ(printed(0x2e66, Type::scalar(Scalar::F16)), "0.1");
  EXPECT_EQ(printed(0x7bff, Type::scalar(Scalar::F16)), "65500.0");
  EXPECT_EQ(printed(0x6400, Type::scalar(Scalar::F16)), "1024.0");
  EXPECT_EQ(printed(0x0001, Type::scalar(Scalar::F16)), "6e-08");
  EXPECT_EQ(printed(0x4049, Type::scalar(Scalar::BF16)), "3.14");
}

TEST(TextForm, sibling_regions_may_reuse_a_name) {
  const char *text = R"(module @m {
  kernel @k(%n: u32) workgroup(1, 1, 1) {
    %0 = const 0 : u32
    %1 = const 1 : u32
    for %0, %n, %1 (%i: u32) {
      %x = add %i, %i : u32
      yield
    }
    for %0, %n, %1 (%i: u32) {
      %x = mul %i, %i : u32
      yield
    }
    %x = add %n, %n : u32
    return
  }
}
)";
  auto m = test::parse_valid(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(to_string(*m), text);
}

TEST(TextForm, a_name_still_visible_cannot_be_defined_again) {
  EXPECT_NE(test::first_error(R"(module @m {
  kernel @k(%n: u32) {
    %x = add %n, %n : u32
    %c = eq %n, %n : bool
    if %c {
      %x = mul %n, %n : u32
      yield
    }
    return
  }
})")
                .find("6:7: error: redefinition of value '%x' (first defined at 3:5)"),
            std::string::npos);
}
