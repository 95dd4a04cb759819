//===- interpreter_test.cpp - The reference interpreter against host computations -----------===//
#include "cubecc/dsl/registry.h"
#include "cubecc/ir/float16.h"
#include "cubecc/ir/interpreter.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/legalize.h"
#include "cubecc/passes/pass_manager.h"
#include "test_support.h"

#include <bit>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>

using namespace cubecc;
using namespace cubecc::ir;

namespace {

template <class T> HostBuffer buffer_of(Scalar s, const std::vector<T> &values) {
  HostBuffer b{s, std::vector<uint8_t>(values.size() * sizeof(T))};
  std::memcpy(b.bytes.data(), values.data(), b.bytes.size());
  return b;
}

template <class T> std::vector<T> values_of(const HostBuffer &b) {
  std::vector<T> out(b.bytes.size() / sizeof(T));
  std::memcpy(out.data(), b.bytes.data(), b.bytes.size());
  return out;
}

Argument u32(uint32_t v) {
  return Argument{nullptr, {v}};
}
Argument f32(float v) {
  return Argument{nullptr, {std::bit_cast<uint32_t>(v)}};
}
Argument buf(HostBuffer &b) {
  return Argument{&b, {}};
}

std::string run(const Kernel &k, std::vector<Argument> args, LaunchConfig config = {}) {
  return to_string(interpret(k, args, config));
}

} // namespace

TEST(Interpreter, runs_the_dsl_axpy_example_like_the_host) {
  const dsl::RegisteredKernel *axpy = nullptr;
  for (const auto &k : dsl::registered_kernels())
    if (k.name == "axpy")
      axpy = &k;
  ASSERT_TRUE(axpy);
  Module m;
  std::vector<Diagnostic> errors;
  axpy->trace(m, *axpy, errors);
  ASSERT_TRUE(errors.empty()) << to_string(errors);
  const uint32_t n = 1000; // not a multiple of the workgroup: the bounds check matters
  std::vector<float> x(n), y(n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-10, 10);
  for (uint32_t i = 0; i < n; ++i) {
    x[i] = dist(rng);
    y[i] = dist(rng);
  }
  HostBuffer bx = buffer_of(Scalar::F32, x), by = buffer_of(Scalar::F32, y);
  float a = 1.5f;
  LaunchConfig config;
  config.num_workgroups = {(n + 255) / 256, 1, 1};
  EXPECT_EQ(
      run(*m.kernels()[0], {buf(bx), u32(n), u32(1), buf(by), u32(n), u32(1), f32(a)}, config), "");
  std::vector<float> out = values_of<float>(by);
  for (uint32_t i = 0; i < n; ++i) {
    float expected = a * x[i] + y[i]; // two roundings, as the IR (no contraction) says
    ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(expected)) << i;
  }
}

TEST(Interpreter, barriers_shared_memory_and_subgroups_reduce_a_workgroup) {
  auto m = test::parse_valid(R"(module @m {
  kernel @k(%in: buffer<u32, read>, %out: buffer<u32, readwrite>) workgroup(64, 1, 1) {
    %tile = shared.alloc : shared<u32, 64>
    %li = local_index : u32
    %v = load %in, %li : u32
    %s = subgroup.sum %v : u32
    %sg = subgroup_id : u32
    %lane = subgroup_lane : u32
    %z = const 0 : u32
    %first = eq %lane, %z : bool
    if %first {
      store %tile, %sg, %s
      yield
    }
    barrier
    %leader = eq %li, %z : bool
    if %leader {
      %count = num_subgroups : u32
      %one = const 1 : u32
      %total = for %z, %count, %one, %z : u32 (%k: u32, %acc: u32) {
        %p = load %tile, %k : u32
        %next = add %acc, %p : u32
        yield %next
      }
      store %out, %z, %total
      yield
    }
    return
  }
})");
  ASSERT_TRUE(m);
  std::vector<uint32_t> in(64);
  std::iota(in.begin(), in.end(), 1);
  for (uint32_t width : {1u, 8u, 32u, 64u}) {
    HostBuffer bin = buffer_of(Scalar::U32, in),
               bout = buffer_of(Scalar::U32, std::vector<uint32_t>(1));
    LaunchConfig config;
    config.subgroup_size = width;
    EXPECT_EQ(run(*m->kernels()[0], {buf(bin), buf(bout)}, config), "") << width;
    EXPECT_EQ(values_of<uint32_t>(bout)[0], 64u * 65u / 2) << "subgroup width " << width;
  }
}

TEST(Interpreter, subgroup_scans_shuffles_and_ballots_follow_lane_order) {
  auto m = test::parse_valid(R"(module @m {
  kernel @k(%out: buffer<u32, readwrite>) workgroup(8, 1, 1) {
    %li = local_index : u32
    %one = const 1 : u32
    %inc = subgroup.inclusive_sum %li : u32
    %exc = subgroup.exclusive_sum %li : u32
    %xor = subgroup.shuffle_xor %li, %one : u32
    %down = subgroup.shuffle_down %li, %one : u32
    %odd = and %li, %one : u32
    %is_odd = eq %odd, %one : bool
    %ballot = subgroup.ballot %is_odd : u32x4
    %mask = vec.extract %ballot {lane = 0} : u32
    %c4 = const 4 : u32
    %base = mul %li, %c4 : u32
    store %out, %base, %inc
    %i1 = add %base, %one : u32
    store %out, %i1, %exc
    %c2 = const 2 : u32
    %i2 = add %base, %c2 : u32
    store %out, %i2, %xor
    %c3 = const 3 : u32
    %i3 = add %base, %c3 : u32
    %r = add %down, %mask : u32
    store %out, %i3, %r
    return
  }
})");
  ASSERT_TRUE(m);
  HostBuffer out = buffer_of(Scalar::U32, std::vector<uint32_t>(32));
  LaunchConfig config;
  config.subgroup_size = 4;
  ASSERT_EQ(run(*m->kernels()[0], {buf(out)}, config), "");
  std::vector<uint32_t> r = values_of<uint32_t>(out);
  for (uint32_t i = 0; i < 8; ++i) {
    uint32_t base = i & ~3u, lane = i & 3u;
    uint32_t inclusive = 0;
    for (uint32_t j = base; j <= i; ++j)
      inclusive += j;
    EXPECT_EQ(r[i * 4 + 0], inclusive) << i;
    EXPECT_EQ(r[i * 4 + 1], inclusive - i) << i;
    EXPECT_EQ(r[i * 4 + 2], i ^ 1u) << i;
    uint32_t down = lane + 1 < 4 ? i + 1 : i;     // past the end: the invocation's own value
    EXPECT_EQ(r[i * 4 + 3], down + 0b1010u) << i; // lanes 1 and 3 of each subgroup are odd
  }
}

TEST(Interpreter, print_formats_each_invocations_values_in_invocation_order) {
  // Constants the test knows the printed form of: printf's %g for floats (f16 and bf16 exactly,
  // widened), decimal for integers of every width and sign, 0 or 1 for bool, vectors in
  // parentheses, escaped braces, a literal '%'.
  auto m = test::parse_valid(R"(module @m {
  kernel @k(%n: i64) workgroup(3, 1, 1) {
    %li = local_index : u32
    %c = const 0xc8 : u8
    %neg = bitcast %c : i8
    %big = const 0xffffffffffffffff : u64
    %h = const 0x3e00 : f16
    %b = const 0x3fc0 : bf16
    %third = const 0x3eaaaaab : f32
    %huge = const 0x7e37e43c8800759c : f64
    %one = const 1 : u32
    %odd = and %li, %one : u32
    %is_odd = eq %odd, %one : bool
    %pair = vec.build %li, %odd : u32x2
    print %li, %neg, %big, %n, %h, %b, %third, %huge, %is_odd, %pair {format = "{} {} {} {} {} {} {} {} {} {} {{}} 100%\n"}
    print {format = "end\n"}
    return
  }
})");
  ASSERT_TRUE(m);
  std::vector<std::string> printed;
  LaunchConfig config;
  config.print = [&](std::string_view text) { printed.emplace_back(text); };
  Argument n{nullptr, {static_cast<uint64_t>(int64_t{-5})}};
  ASSERT_EQ(run(*m->kernels()[0], {n}, config), "");
  // Invocations advance together op by op: every invocation's first print, then every second.
  EXPECT_EQ(printed, (std::vector<std::string>{
                         "0 -56 18446744073709551615 -5 1.5 1.5 0.333333 1e+300 0 (0, 0) {} 100%\n",
                         "1 -56 18446744073709551615 -5 1.5 1.5 0.333333 1e+300 1 (1, 1) {} 100%\n",
                         "2 -56 18446744073709551615 -5 1.5 1.5 0.333333 1e+300 0 (2, 0) {} 100%\n",
                         "end\n", "end\n", "end\n"}));
}

TEST(Interpreter, loops_with_break_and_continue_carry_values_per_invocation) {
  // Each invocation sums k for k in [0, 100) skipping multiples of 3, stopping once the sum
  // exceeds its own limit (local_index * 10): invocations leave the loop at different times.
  auto m = test::parse_valid(R"(module @m {
  kernel @k(%out: buffer<u32, readwrite>) workgroup(16, 1, 1) {
    %li = local_index : u32
    %c10 = const 10 : u32
    %limit = mul %li, %c10 : u32
    %z = const 0 : u32
    %one = const 1 : u32
    %c3 = const 3 : u32
    %c100 = const 100 : u32
    %sum = for %z, %c100, %one, %z : u32 (%k: u32, %acc: u32) {
      %r = rem %k, %c3 : u32
      %skip = eq %r, %z : bool
      if %skip {
        continue %acc
      }
      %next = add %acc, %k : u32
      %over = gt %next, %limit : bool
      if %over {
        break %next
      }
      yield %next
    }
    store %out, %li, %sum
    return
  }
})");
  ASSERT_TRUE(m);
  HostBuffer out = buffer_of(Scalar::U32, std::vector<uint32_t>(16));
  ASSERT_EQ(run(*m->kernels()[0], {buf(out)}), "");
  std::vector<uint32_t> r = values_of<uint32_t>(out);
  for (uint32_t li = 0; li < 16; ++li) {
    uint32_t acc = 0;
    for (uint32_t k = 0; k < 100; ++k) {
      if (k % 3 == 0)
        continue;
      acc += k;
      if (acc > li * 10)
        break;
    }
    EXPECT_EQ(r[li], acc) << li;
  }
}

TEST(Interpreter, a_while_loop_runs_until_each_invocations_condition_fails) {
  // Collatz steps of local_index + 1.
  auto m = test::parse_valid(R"(module @m {
  kernel @k(%out: buffer<u32, readwrite>) workgroup(32, 1, 1) {
    %li = local_index : u32
    %one = const 1 : u32
    %z = const 0 : u32
    %two = const 2 : u32
    %c3 = const 3 : u32
    %start = add %li, %one : u32
    %x, %steps = while %start, %z : u32, u32 (%a: u32, %n: u32) {
      %more = gt %a, %one : bool
      condition %more, %a, %n
    } do (%b: u32, %m: u32) {
      %odd = rem %b, %two : u32
      %is_odd = eq %odd, %one : bool
      %next = if %is_odd : u32 {
        %t = mul %b, %c3 : u32
        %u = add %t, %one : u32
        yield %u
      } else {
        %h = div %b, %two : u32
        yield %h
      }
      %m1 = add %m, %one : u32
      yield %next, %m1
    }
    store %out, %li, %steps
    return
  }
})");
  ASSERT_TRUE(m);
  HostBuffer out = buffer_of(Scalar::U32, std::vector<uint32_t>(32));
  ASSERT_EQ(run(*m->kernels()[0], {buf(out)}), "");
  std::vector<uint32_t> r = values_of<uint32_t>(out);
  for (uint32_t li = 0; li < 32; ++li) {
    uint32_t a = li + 1, steps = 0;
    while (a > 1) {
      a = a % 2 ? 3 * a + 1 : a / 2;
      ++steps;
    }
    EXPECT_EQ(r[li], steps) << li;
  }
}

TEST(Interpreter, f16_arithmetic_rounds_once_to_nearest_even) {
  auto m = test::parse_valid(R"(module @m {
  kernel @k(%a: f16, %b: f16, %out: buffer<f16, readwrite>) {
    %z = const 0 : u32
    %s = add %a, %b : f16
    store %out, %z, %s
    %one = const 1 : u32
    %p = mul %a, %b : f16
    store %out, %one, %p
    return
  }
})");
  ASSERT_TRUE(m);
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    uint16_t a = rng() & 0x7bff, b = rng() & 0xfbff; // finite halves
    HostBuffer out{Scalar::F16, std::vector<uint8_t>(4)};
    ASSERT_EQ(run(*m->kernels()[0], {Argument{nullptr, {a}}, Argument{nullptr, {b}}, buf(out)}),
              "");
    std::vector<uint16_t> r = values_of<uint16_t>(out);
    double x = f16_bits_to_float(a), y = f16_bits_to_float(b);
    // Computed exactly in double (a sum or product of two halves fits), rounded once.
    EXPECT_EQ(r[0], float_to_f16_bits(static_cast<float>(x + y))) << x << " + " << y;
    EXPECT_EQ(r[1], float_to_f16_bits(static_cast<float>(x * y))) << x << " * " << y;
  }
}

TEST(Interpreter, casts_saturate_and_truncate_as_documented) {
  auto m = test::parse_valid(R"(module @m {
  kernel @k(%x: f32, %out: buffer<i32, readwrite>, %bytes: buffer<u8, readwrite>) {
    %z = const 0 : u32
    %i = cast %x : i32
    store %out, %z, %i
    %u = cast %x : u8
    store %bytes, %z, %u
    return
  }
})");
  ASSERT_TRUE(m);
  struct Case {
    float x;
    int32_t as_i32;
    uint8_t as_u8;
  } cases[] = {{2.9f, 2, 2},           {-2.9f, -2, 0},        {1e10f, INT32_MAX, 255},
               {-1e10f, INT32_MIN, 0}, {std::nanf(""), 0, 0}, {255.5f, 255, 255}};
  for (const Case &c : cases) {
    HostBuffer out = buffer_of(Scalar::I32, std::vector<int32_t>(1));
    HostBuffer bytes = buffer_of(Scalar::U8, std::vector<uint8_t>(1));
    ASSERT_EQ(run(*m->kernels()[0], {f32(c.x), buf(out), buf(bytes)}), "");
    EXPECT_EQ(values_of<int32_t>(out)[0], c.as_i32) << c.x;
    EXPECT_EQ(values_of<uint8_t>(bytes)[0], c.as_u8) << c.x;
  }
}

TEST(Interpreter, an_out_of_bounds_access_names_the_op_index_and_size) {
  auto m = test::parse_valid(R"(module @m {
  kernel @k(%data: buffer<f32, readwrite>) workgroup(4, 1, 1) {
    %li = local_index : u32
    %c8 = const 8 : u32
    %i = add %li, %c8 : u32
    %v = load %data, %i : f32 loc("user.cpp":7:9)
    return
  }
})");
  ASSERT_TRUE(m);
  HostBuffer data = buffer_of(Scalar::F32, std::vector<float>(10));
  EXPECT_EQ(run(*m->kernels()[0], {buf(data)}),
            "user.cpp:7:9: error: 'load' in kernel @k (workgroup (0, 0, 0)): index 10 is out of "
            "bounds of buffer parameter 0 ('data') (10 elements) in invocation 2\n");
}

TEST(Interpreter, a_barrier_reached_by_part_of_the_workgroup_is_reported) {
  // The verifier refuses this kernel (the condition comes from a load at a varying index); the
  // interpreter is the last line of defence for IR that reaches it without verification.
  ParseResult parsed = parse_module(R"(module @m {
  kernel @k(%flags: buffer<u32, read>) workgroup(8, 1, 1) {
    %li = local_index : u32
    %t = load %flags, %li : u32
    %z = const 0 : u32
    %go = ne %t, %z : bool
    if %go {
      barrier loc("user.cpp":3:3)
    }
    return
  }
})",
                                    "t.cir");
  ASSERT_TRUE(parsed.module);
  EXPECT_FALSE(verify(*parsed.module).empty());
  HostBuffer flags = buffer_of(Scalar::U32, std::vector<uint32_t>{1, 1, 0, 1, 1, 1, 1, 1});
  EXPECT_EQ(run(*parsed.module->kernels()[0], {buf(flags)}),
            "user.cpp:3:3: error: 'barrier' in kernel @k (workgroup (0, 0, 0)): reached by 7 of "
            "the workgroup's 8 invocations; every invocation must reach each barrier\n");
}

//===- Asynchronous copies (docs/ir.md §4.14) ------------------------------------------------===//

namespace {

/// Each of 8 invocations copies 4 f32 of `in` (zeros past `n`) into a shared tile with
/// async.copy, in two groups (elements 0..15, then 16..31); `WAIT` is replaced by the waits
/// under test. Then every invocation reads its 4 elements back and writes them to `out`.
std::unique_ptr<Module> async_copy_kernel(std::string_view wait) {
  std::string text = R"(module @m {
  kernel @k(%in: buffer<f32, read>, %out: buffer<f32, write>, %n: u32) workgroup(8, 1, 1) {
    %tile = shared.alloc : shared<f32, 32>
    %li = local_index : u32
    %four = const 4 : u32
    %at = mul %li, %four : u32
    %inside = lt %at, %n : bool
    %half = const 4 : u32
    %first = lt %li, %half : bool
    if %first {
      async.copy %tile, %at, %in, %at, %inside {lanes = 4}
      yield
    }
    async.commit
    %second = ge %li, %half : bool
    if %second {
      async.copy %tile, %at, %in, %at, %inside {lanes = 4} loc("user.cpp":9:5)
      yield
    }
    async.commit
WAIT
    barrier
    %v = load %tile, %at : f32x4 loc("user.cpp":12:5)
    store %out, %at, %v
    return
  }
})";
  text.replace(text.find("WAIT"), 4, wait);
  return test::parse_valid(text);
}

} // namespace

TEST(Interpreter, async_copies_land_at_the_wait_with_zeros_where_the_source_is_not_read) {
  auto m = async_copy_kernel("    async.wait {pending = 0}");
  ASSERT_TRUE(m);
  std::vector<float> in(32);
  std::iota(in.begin(), in.end(), 1.0f);
  HostBuffer in_buffer = buffer_of(Scalar::F32, in);
  HostBuffer out = buffer_of(Scalar::F32, std::vector<float>(32, -1.0f));
  EXPECT_EQ(run(*m->kernels()[0], {buf(in_buffer), buf(out), u32(20)}), "");
  std::vector<float> want(32, 0.0f);
  std::copy(in.begin(), in.begin() + 20, want.begin());
  EXPECT_EQ(values_of<float>(out), want);
}

TEST(Interpreter, reading_shared_memory_before_its_copy_is_waited_for_is_refused) {
  // pending = 1 lands the first group only: invocations 4..7 read elements still in flight.
  auto m = async_copy_kernel("    async.wait {pending = 1}");
  ASSERT_TRUE(m);
  HostBuffer in = buffer_of(Scalar::F32, std::vector<float>(32, 1.0f));
  HostBuffer out = buffer_of(Scalar::F32, std::vector<float>(32));
  EXPECT_EQ(run(*m->kernels()[0], {buf(in), buf(out), u32(32)}),
            "user.cpp:12:5: error: 'load' in kernel @k (workgroup (0, 0, 0)): invocation 4 "
            "touches element 16 of shared array of 32 f32 while an async.copy into it is in "
            "flight; wait for its group (async.wait) and then a barrier before using the copied "
            "data or overwriting it\n");
  // Without any wait nothing lands, and an uncommitted copy is not waited for either.
  auto none = async_copy_kernel("");
  ASSERT_TRUE(none);
  EXPECT_NE(run(*none->kernels()[0], {buf(in), buf(out), u32(32)})
                .find("invocation 0 touches element 0 of shared array"),
            std::string::npos);
}

TEST(Interpreter, legalized_async_copies_compute_what_the_interpreter_does) {
  // The legalize pass (targets without asynchronous copies) does each copy at once: the same
  // results as the interpreter's latest-possible landing, for every n.
  for (uint32_t n : {0u, 3u, 16u, 20u, 32u}) {
    auto m = async_copy_kernel("    async.wait {pending = 0}");
    auto lowered = async_copy_kernel("    async.wait {pending = 0}");
    ASSERT_TRUE(m && lowered);
    passes::legalize(*lowered, passes::LegalizeTarget::portable());
    ASSERT_EQ(to_string(verify(*lowered)), "");
    EXPECT_EQ(to_string(*lowered).find("async."), std::string::npos) << to_string(*lowered);
    std::vector<float> in(32);
    std::iota(in.begin(), in.end(), 0.5f);
    HostBuffer in_buffer = buffer_of(Scalar::F32, in);
    HostBuffer want = buffer_of(Scalar::F32, std::vector<float>(32, -1.0f)), got = want;
    EXPECT_EQ(run(*m->kernels()[0], {buf(in_buffer), buf(want), u32(n)}), "");
    EXPECT_EQ(run(*lowered->kernels()[0], {buf(in_buffer), buf(got), u32(n)}), "");
    EXPECT_EQ(values_of<float>(got), values_of<float>(want)) << "n = " << n;
  }
}

TEST(Interpreter, bounds_checked_async_copies_read_zeros_and_skip_what_falls_outside) {
  // The source index runs past the 24-element buffer for invocations 6 and 7: in checked mode
  // their copies read zeros instead of failing.
  auto m = async_copy_kernel("    async.wait {pending = 0}");
  ASSERT_TRUE(m);
  passes::PassManager manager;
  ASSERT_FALSE(manager.add_pipeline("bounds-check"));
  std::ostringstream out_text, err_text;
  ASSERT_TRUE(manager.run(*m, out_text, err_text).empty());
  std::vector<float> in(24, 2.0f);
  HostBuffer in_buffer = buffer_of(Scalar::F32, in);
  HostBuffer out = buffer_of(Scalar::F32, std::vector<float>(32, -1.0f));
  EXPECT_EQ(run(*m->kernels()[0], {buf(in_buffer), buf(out), u32(32)}), "");
  std::vector<float> want(32, 0.0f);
  std::fill(want.begin(), want.begin() + 24, 2.0f);
  EXPECT_EQ(values_of<float>(out), want);
}
