//===- verifier_test.cpp - What the verifier accepts and refuses ------------------------------===//
//
// Most refusals are covered by test/error (through the text form). These are the cases the
// parser cannot produce, made with the Builder, plus the barrier rule's accept/refuse pairs.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/builder.h"
#include "test_support.h"

using namespace cubecc;
using namespace cubecc::ir;

namespace {

std::string first_problem(const Module &m) {
  auto problems = verify(m);
  return problems.empty() ? "" : problems.front().str();
}

std::string barrier_kernel(std::string_view condition_source) {
  return std::string(R"(module @m {
  kernel @k(%buf: buffer<u32, readwrite>, %n: u32) workgroup(64, 1, 1) {
)") + std::string(condition_source) +
         R"(
    if %c {
      barrier
      yield
    }
    return
  }
})";
}

} // namespace

TEST(Verifier, a_use_that_its_definition_does_not_dominate_is_refused) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  Value *one = b.const_int(Type::scalar(Scalar::I32), 1);
  Value *sum = b.op(Opcode::Add, {one, one});
  b.ret();
  // Move the add before the constant it uses.
  auto add = k.body().take(sum->defining_op());
  k.body().insert(k.body().front(), std::move(add));
  EXPECT_NE(first_problem(m).find("does not dominate"), std::string::npos) << first_problem(m);
}

TEST(Verifier, a_value_from_another_kernel_is_refused) {
  Module m;
  Kernel &k1 = m.add_kernel("a");
  Value *p = k1.add_parameter(Type::scalar(Scalar::F32));
  Builder b1(m);
  b1.set_insertion_point_to_end(k1.body());
  b1.ret();
  Kernel &k2 = m.add_kernel("b");
  Builder b2(m);
  b2.set_insertion_point_to_end(k2.body());
  b2.op(Opcode::Neg, {p});
  b2.ret();
  EXPECT_NE(first_problem(m).find("'neg' in kernel @b: operand 0 does not dominate"),
            std::string::npos)
      << first_problem(m);
}

TEST(Verifier, constant_bits_beyond_the_type_width_are_refused) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  b.create(Opcode::Const, {}, {Type::scalar(Scalar::U8)}, {{"value", 256}});
  b.ret();
  EXPECT_NE(first_problem(m).find("bits set beyond the 8 bits of u8"), std::string::npos)
      << first_problem(m);
}

TEST(Verifier, wrong_result_counts_and_malformed_types_are_refused) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Value *p = k.add_parameter(Type::scalar(Scalar::F32));
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  b.create(Opcode::Neg, {p}, {});
  b.create(Opcode::Splat, {p}, {Type::vector(Scalar::F32, 5)});
  b.ret();
  auto problems = verify(m);
  ASSERT_EQ(problems.size(), 2u) << to_string(problems);
  EXPECT_NE(problems[0].message.find("has 0 result(s), must have 1"), std::string::npos);
  EXPECT_NE(problems[1].message.find("vectors have 2, 3, 4, 8 or 16 lanes"), std::string::npos);
}

TEST(Verifier, diagnostics_use_the_op_location_and_note_the_text_position) {
  ParseResult r = parse_module(R"(module @m {
  kernel @k(%x: f32, %y: i32) {
    %s = add %x, %y : f32 loc("user.cpp":12:7)
    return
  }
})",
                               "in.cir");
  ASSERT_TRUE(r.module);
  auto problems = verify(*r.module, &r.source_map);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].str(), "user.cpp:12:7: error: 'add' in kernel @k: operand types differ: "
                               "f32 and i32\n  note: in the IR text at in.cir:3:5");
}

TEST(Verifier, barrier_under_a_uniform_condition_is_accepted) {
  EXPECT_EQ(test::first_error(barrier_kernel("    %z = const 0 : u32\n    %c = gt %n, %z : bool")),
            "");
  // Loads at a uniform index give uniform values; workgroup ids are uniform too.
  EXPECT_EQ(test::first_error(barrier_kernel(R"(    %z = const 0 : u32
    %v = load %buf, %z : u32
    %wg = workgroup_id : u32x3
    %w = vec.extract %wg {lane = 0} : u32
    %s = add %v, %w : u32
    %c = gt %s, %z : bool)")),
            "");
}

TEST(Verifier, barrier_under_a_condition_on_the_invocation_is_refused) {
  for (const char *source : {
           "    %l = local_index : u32\n    %z = const 0 : u32\n    %c = eq %l, %z : bool",
           "    %z = const 0 : u32\n    %o = atomic.add %buf, %z, %z : u32\n    %c = eq %o, %z : "
           "bool",
           "    %e = subgroup.elect : bool\n    %c = and %e, %e : bool",
           // A load at a varying index varies.
           "    %g = global_id : u32x3\n    %i = vec.extract %g {lane = 0} : u32\n"
           "    %v = load %buf, %i : u32\n    %z = const 0 : u32\n    %c = eq %v, %z : bool",
       }) {
    std::string error = test::first_error(barrier_kernel(source));
    EXPECT_NE(error.find("'barrier' in kernel @k: is reached under control flow that depends on "
                         "the invocation"),
              std::string::npos)
        << source << "\n"
        << error;
  }
}

TEST(Verifier, barrier_after_a_varying_break_is_refused_and_after_a_uniform_one_accepted) {
  auto kernel = [](std::string_view condition) {
    return std::string(R"(module @m {
  kernel @k(%n: u32) workgroup(64, 1, 1) {
    %z = const 0 : u32
    %one = const 1 : u32
    %l = local_index : u32
    for %z, %n, %one (%i: u32) {
      %stop = )") +
           std::string(condition) +
           R"(
      if %stop {
        break
      }
      barrier
      yield
    }
    return
  }
})";
  };
  EXPECT_EQ(test::first_error(kernel("gt %i, %n : bool")), "");
  EXPECT_NE(test::first_error(kernel("gt %i, %l : bool")).find("'barrier'"), std::string::npos);
}

TEST(Verifier, a_value_carried_around_a_loop_becomes_varying_when_a_varying_value_feeds_it) {
  // %acc starts uniform but the yield feeds the invocation index back into it: a barrier under a
  // condition on %acc (after the loop) is divergent. A single forward sweep would miss this.
  std::string text = R"(module @m {
  kernel @k(%n: u32) workgroup(64, 1, 1) {
    %z = const 0 : u32
    %one = const 1 : u32
    %r = for %z, %n, %one, %z : u32 (%i: u32, %acc: u32) {
      %c = gt %acc, %z : bool
      if %c {
        barrier
        yield
      }
      %l = local_index : u32
      yield %l
    }
    return
  }
})";
  EXPECT_NE(test::first_error(text).find("'barrier'"), std::string::npos)
      << test::first_error(text);
}

TEST(Verifier, a_loop_result_is_varying_when_its_initial_value_is) {
  // With zero iterations the result is the (varying) initial value, even though every yield
  // feeds back a uniform one.
  std::string text = R"(module @m {
  kernel @k(%n: u32) workgroup(64, 1, 1) {
    %z = const 0 : u32
    %one = const 1 : u32
    %l = local_index : u32
    %r = for %z, %n, %one, %l : u32 (%i: u32, %acc: u32) {
      yield %z
    }
    %c = gt %r, %z : bool
    if %c {
      barrier
      yield
    }
    return
  }
})";
  EXPECT_NE(test::first_error(text).find("'barrier'"), std::string::npos)
      << test::first_error(text);
}

TEST(Verifier, barriers_are_checked_in_every_kernel_even_after_an_error_in_another) {
  std::string text = R"(module @m {
  kernel @broken(%x: f32, %y: i32) {
    %s = add %x, %y : f32
    return
  }
  kernel @divergent() workgroup(64, 1, 1) {
    %l = local_index : u32
    %z = const 0 : u32
    %c = eq %l, %z : bool
    if %c {
      barrier
      yield
    }
    return
  }
})";
  ParseResult r = parse_module(text, "two.cir");
  ASSERT_TRUE(r.module);
  auto problems = verify(*r.module, &r.source_map);
  ASSERT_EQ(problems.size(), 2u) << to_string(problems);
  EXPECT_NE(problems[1].message.find("'barrier' in kernel @divergent"), std::string::npos);
}

TEST(Printer, names_from_the_api_that_the_text_form_cannot_hold_are_made_printable) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Value *a = k.add_parameter(Type::scalar(Scalar::F32), "a b");
  Value *b = k.add_parameter(Type::scalar(Scalar::F32), "0");
  k.add_parameter(Type::scalar(Scalar::F32), "x-y");
  Builder builder(m);
  builder.set_insertion_point_to_end(k.body());
  builder.op(Opcode::Add, {a, b});
  builder.ret();
  std::string text = to_string(m);
  EXPECT_NE(text.find("kernel @k(%a_b: f32, %v0: f32, %x_y: f32)"), std::string::npos) << text;
  EXPECT_NE(text.find("%0 = add %a_b, %v0 : f32"), std::string::npos) << text;
  auto reparsed = test::parse_valid(text);
  ASSERT_TRUE(reparsed);
  EXPECT_EQ(to_string(*reparsed), text);
}
