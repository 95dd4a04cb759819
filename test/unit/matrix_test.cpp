//===- matrix_test.cpp - Matrix fragments: verifier rules and interpreter semantics ------===//
//
// The interpreter defines what matrix.fill, load, store, mma and convert compute (docs/ir.md
// §4.13); these tests hold it to host references written independently of it: a GEMM tiled
// over subgroups and workgroups, each input and accumulator type, both memory layouts, and the
// role change of an accumulator. The errors a kernel can make (a divergent matrix op, operands
// that differ within a subgroup, a partial subgroup, an access out of bounds) are reported, not
// computed through.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/interpreter.h"
#include "cubecc/ir/semantics.h"
#include "cubecc/passes/pass_manager.h"
#include "test_support.h"

#include <fmt/format.h>
#include <gmock/gmock.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

using namespace cubecc;
using namespace cubecc::ir;

namespace {

/// Random values of `s`, as bit patterns, small enough that sums stay well inside f16's range.
std::vector<uint64_t> random_bits(Scalar s, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-8, 8), byte(0, 255);
  std::vector<uint64_t> out(n);
  for (auto &v : out)
    v = is_integer(s) ? static_cast<uint64_t>(byte(rng)) // every i8 or u8
                      : from_double(s, small(rng) / 4.0 + (small(rng) & 1 ? 1.0 / 64 : 0.0));
  return out;
}

// The host reference rounds and decodes with C++'s own types (_Float16, float; bf16 is the top
// half of a float), not with cubecc's conversions, so that an error in those shows. fp8 inputs
// are decoded with cubecc's storage-float conversion (checked in storage_float_test.cpp).
uint64_t host_round(Scalar s, double v) {
  if (s == Scalar::F16)
    return std::bit_cast<uint16_t>(static_cast<_Float16>(v));
  if (s == Scalar::I32) // exact here (|v| < 2^53), wrapped to 32 bits
    return static_cast<uint32_t>(static_cast<int64_t>(v));
  return std::bit_cast<uint32_t>(static_cast<float>(v)); // f32 (the only other accumulator)
}
double host_value(Scalar s, uint64_t bits) {
  switch (s) {
  case Scalar::F16:
    return static_cast<double>(std::bit_cast<_Float16>(static_cast<uint16_t>(bits)));
  case Scalar::BF16:
    return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
  case Scalar::F32:
    return std::bit_cast<float>(static_cast<uint32_t>(bits));
  case Scalar::I8:
    return static_cast<int8_t>(bits);
  case Scalar::U8:
    return static_cast<uint8_t>(bits);
  case Scalar::I32:
    return static_cast<int32_t>(bits);
  default:
    return to_double(s, bits);
  }
}

HostBuffer buffer_of(Scalar s, const std::vector<uint64_t> &bits) {
  size_t bytes = scalar_bits(s) / 8;
  HostBuffer b{s, std::vector<uint8_t>(bits.size() * bytes)};
  for (size_t i = 0; i < bits.size(); ++i)
    std::memcpy(b.bytes.data() + i * bytes, &bits[i], bytes);
  return b;
}

uint64_t element(const HostBuffer &b, size_t i) {
  size_t bytes = scalar_bits(b.element) / 8;
  uint64_t v = 0;
  std::memcpy(&v, b.bytes.data() + i * bytes, bytes);
  return v;
}

Argument buf(HostBuffer &b) {
  return Argument{&b, {}};
}
Argument u32(uint32_t v) {
  return Argument{nullptr, {v}};
}

std::string run(const Kernel &k, std::vector<Argument> args, std::array<uint32_t, 3> groups,
                uint32_t subgroup_size = 32) {
  LaunchConfig config;
  config.num_workgroups = groups;
  config.subgroup_size = subgroup_size;
  return to_string(interpret(k, args, config));
}

struct GemmCase {
  Scalar a, b, acc;
  uint32_t tm, tn, tk;
  bool b_col_major;
};

/// Runs the GEMM in the interpreter and checks every element against a host reference that
/// follows the documented order: per K tile, the exact products summed in double onto the
/// accumulator, rounded once to the accumulator type.
void check_gemm(const GemmCase &g) {
  SCOPED_TRACE(fmt::format("{} x {} -> {}, {}x{}x{}, B {}", scalar_name(g.a), scalar_name(g.b),
                           scalar_name(g.acc), g.tm, g.tn, g.tk,
                           g.b_col_major ? "column-major" : "row-major"));
  const uint32_t m = 2 * g.tm, n = 3 * g.tn, k = 4 * g.tk;
  auto module =
      test::parse_valid(test::matrix_gemm_ir({g.tm, g.tn, g.tk, g.a, g.b, g.acc}, g.b_col_major));
  ASSERT_TRUE(module);
  std::vector<uint64_t> a = random_bits(g.a, size_t{m} * k, 1),
                        b = random_bits(g.b, size_t{k} * n, 2);
  HostBuffer ba = buffer_of(g.a, a), bb = buffer_of(g.b, b);
  HostBuffer bc = buffer_of(g.acc, std::vector<uint64_t>(size_t{m} * n, 0));
  ASSERT_EQ(run(*module->kernels()[0], {buf(ba), buf(bb), buf(bc), u32(m), u32(n), u32(k)},
                {n / g.tn, 1, 1}),
            "");
  double worst = 0;
  for (uint32_t i = 0; i < m; ++i)
    for (uint32_t j = 0; j < n; ++j) {
      double acc = 0, exact = 0;
      for (uint32_t k0 = 0; k0 < k; k0 += g.tk) {
        double sum = acc;
        for (uint32_t kk = k0; kk < k0 + g.tk; ++kk) {
          double bv =
              host_value(g.b, g.b_col_major ? b[size_t{j} * k + kk] : b[size_t{kk} * n + j]);
          sum += host_value(g.a, a[size_t{i} * k + kk]) * bv;
          exact += host_value(g.a, a[size_t{i} * k + kk]) * bv;
        }
        acc = host_value(g.acc, host_round(g.acc, sum));
      }
      uint64_t got = element(bc, size_t{i} * n + j);
      ASSERT_EQ(got, host_round(g.acc, acc)) << "C[" << i << "][" << j << "]";
      worst = std::max(worst, std::abs(host_value(g.acc, got) - exact));
    }
  // Against the exact product the only error is one rounding per K tile (none for integers).
  EXPECT_LE(worst, g.acc == Scalar::F32 ? 1e-4 : g.acc == Scalar::I32 ? 0 : 0.5);
}

} // namespace

TEST(Matrix, gemm_in_the_interpreter_matches_the_host_for_every_shape_and_type) {
  for (const MatrixShape &s : matrix_shapes())
    for (bool col_major : {false, true})
      check_gemm({s.a, s.b, s.accumulator, s.m, s.n, s.k, col_major});
}

TEST(Matrix, an_accumulator_converts_into_an_operand_and_to_another_precision) {
  // P = A * B (f32), then P converted to an f16 'a' operand times B again, stored as f16.
  auto module = test::parse_valid(R"(module @m {
  kernel @k(%a: buffer<f16, read>, %b: buffer<f16, read>, %c: buffer<f16, readwrite>) workgroup(32, 1, 1) {
    %zero = const 0 : u32
    %ld = const 16 : u32
    %fz = const 0 : f32
    %hz = const 0 : f16
    %acc = matrix.fill %fz : matrix<subgroup, acc, f32, 16, 16>
    %ma = matrix.load %a, %zero, %ld : matrix<subgroup, a, f16, 16, 16>
    %mb = matrix.load %b, %zero, %ld : matrix<subgroup, b, f16, 16, 16>
    %p = matrix.mma %ma, %mb, %acc : matrix<subgroup, acc, f32, 16, 16>
    %pa = matrix.convert %p : matrix<subgroup, a, f16, 16, 16>
    %acc2 = matrix.fill %hz : matrix<subgroup, acc, f16, 16, 16>
    %q = matrix.mma %pa, %mb, %acc2 : matrix<subgroup, acc, f16, 16, 16>
    matrix.store %c, %zero, %ld, %q
    return
  }
})");
  ASSERT_TRUE(module);
  std::vector<uint64_t> a = random_bits(Scalar::F16, 256, 3), b = random_bits(Scalar::F16, 256, 4);
  HostBuffer ba = buffer_of(Scalar::F16, a), bb = buffer_of(Scalar::F16, b);
  HostBuffer bc = buffer_of(Scalar::F16, std::vector<uint64_t>(256, 0));
  ASSERT_EQ(run(*module->kernels()[0], {buf(ba), buf(bb), buf(bc)}, {1, 1, 1}), "");
  auto f16 = [](uint64_t bits) { return host_value(Scalar::F16, bits); };
  std::vector<uint64_t> p(256);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double s = 0;
      for (int kk = 0; kk < 16; ++kk)
        s += f16(a[i * 16 + kk]) * f16(b[kk * 16 + j]);
      // f32 accumulator, then cast to f16 (round to nearest even, once from the f32 value).
      p[i * 16 + j] = host_round(Scalar::F16, static_cast<float>(s));
    }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double s = 0;
      for (int kk = 0; kk < 16; ++kk)
        s += f16(p[i * 16 + kk]) * f16(b[kk * 16 + j]);
      ASSERT_EQ(element(bc, i * 16 + j), host_round(Scalar::F16, s)) << i << ", " << j;
    }
}

TEST(Matrix, shared_memory_tiles_feed_the_multiply) {
  // The subgroup stages a 16x16 tile in shared memory with ordinary stores, then loads it as a
  // matrix, column-major (so the fragment is the tile's transpose), and stores the product.
  auto module = test::parse_valid(R"(module @m {
  kernel @k(%a: buffer<bf16, read>, %c: buffer<f32, readwrite>) workgroup(32, 1, 1) {
    %tile = shared.alloc : shared<bf16, 256>
    %li = local_index : u32
    %zero = const 0 : u32
    %one = const 1 : u32
    %ld = const 16 : u32
    %n = const 256 : u32
    %w = const 32 : u32
    for %li, %n, %w (%i: u32) {
      %v = load %a, %i : bf16
      store %tile, %i, %v
      yield
    }
    barrier
    %fz = const 0 : f32
    %acc = matrix.fill %fz : matrix<subgroup, acc, f32, 16, 16>
    %ma = matrix.load %tile, %zero, %ld : matrix<subgroup, a, bf16, 16, 16>
    %mt = matrix.load %tile, %zero, %ld {col_major = 1} : matrix<subgroup, b, bf16, 16, 16>
    %d = matrix.mma %ma, %mt, %acc : matrix<subgroup, acc, f32, 16, 16>
    matrix.store %c, %zero, %ld, %d {col_major = 1}
    return
  }
})");
  ASSERT_TRUE(module);
  std::vector<uint64_t> a = random_bits(Scalar::BF16, 256, 5);
  HostBuffer ba = buffer_of(Scalar::BF16, a);
  HostBuffer bc = buffer_of(Scalar::F32, std::vector<uint64_t>(256, 0));
  ASSERT_EQ(run(*module->kernels()[0], {buf(ba), buf(bc)}, {1, 1, 1}), "");
  auto v = [&](int r, int c) { return host_value(Scalar::BF16, a[r * 16 + c]); };
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double s = 0;
      for (int kk = 0; kk < 16; ++kk)
        s += v(i, kk) * v(j, kk); // A * A^T
      // Stored column-major: element (i, j) at j * 16 + i.
      ASSERT_EQ(element(bc, j * 16 + i), host_round(Scalar::F32, s)) << i << ", " << j;
    }
}

namespace {

/// The interpreter's error for `body` (ops between a common prologue and `return`) in a kernel
/// of `invocations`, or "" when it ran.
std::string interpreter_error(const std::string &body, uint32_t invocations = 32) {
  auto module = test::parse_valid(fmt::format(R"(module @m {{
  kernel @k(%a: buffer<f16, read>, %c: buffer<f32, readwrite>, %off: u32) workgroup({}, 1, 1) {{
    %li = local_index : u32
    %zero = const 0 : u32
    %ld = const 16 : u32
    %fz = const 0 : f32
{}
    return
  }}
}})",
                                              invocations, body));
  if (!module)
    return "<invalid>";
  HostBuffer ba = buffer_of(Scalar::F16, std::vector<uint64_t>(256, 0));
  HostBuffer bc = buffer_of(Scalar::F32, std::vector<uint64_t>(256, 0));
  return run(*module->kernels()[0], {buf(ba), buf(bc), u32(0)}, {1, 1, 1});
}

} // namespace

TEST(Matrix, the_interpreter_reports_misuse_instead_of_computing_through_it) {
  EXPECT_EQ(
      interpreter_error("    %m = matrix.load %a, %off, %ld : matrix<subgroup, a, f16, 16, 16>"),
      "");
  // Only half of the subgroup reaches the load.
  EXPECT_THAT(interpreter_error(R"(    %half = const 16 : u32
    %low = lt %li, %half : bool
    if %low {
      %m = matrix.load %a, %zero, %ld : matrix<subgroup, a, f16, 16, 16>
      yield
    })"),
              ::testing::HasSubstr("reached by 16 of the 32 invocations of subgroup 0; every "
                                   "invocation of the subgroup takes part in a matrix op"));
  // Each invocation passes its own index.
  EXPECT_THAT(
      interpreter_error("    %m = matrix.load %a, %li, %ld : matrix<subgroup, a, f16, 16, 16>"),
      ::testing::HasSubstr("operand 1 differs between invocations 0 and 1 of subgroup 0"));
  // 48 invocations: the second subgroup has 16.
  EXPECT_THAT(
      interpreter_error("    %m = matrix.fill %fz : matrix<subgroup, acc, f32, 16, 16>", 48),
      ::testing::HasSubstr("subgroup 1 has 16 of 32 invocations"));
  // The last row of a 16x16 block at offset 16 with stride 16 ends at element 271 of 256.
  EXPECT_THAT(
      interpreter_error("    %m = matrix.load %a, %ld, %ld : matrix<subgroup, a, f16, 16, 16>"),
      ::testing::HasSubstr("index 256 is out of bounds of buffer parameter 0 ('a') (256 "
                           "elements)"));
  // A matrix yielded by a divergent if differs within the subgroup when it is used.
  EXPECT_THAT(interpreter_error(R"(    %one = const 1.0 : f32
    %odd_bit = const 1 : u32
    %bit = and %li, %odd_bit : u32
    %odd = ne %bit, %zero : bool
    %m = if %odd : matrix<subgroup, acc, f32, 16, 16> {
      %x = matrix.fill %one : matrix<subgroup, acc, f32, 16, 16>
      yield %x
    } else {
      %y = matrix.fill %fz : matrix<subgroup, acc, f32, 16, 16>
      yield %y
    }
    matrix.store %c, %zero, %ld, %m)"),
              ::testing::HasSubstr("reached by 16 of the 32 invocations"));
}

TEST(Matrix, the_verifier_checks_roles_shapes_types_and_memory) {
  auto error = [](const std::string &params, const std::string &body) {
    return test::first_error(fmt::format(R"(module @m {{
  kernel @k({}) workgroup(32, 1, 1) {{
{}
    return
  }}
}})",
                                         params, body));
  };
  const std::string a16 = "matrix<subgroup, a, f16, 16, 16>",
                    b16 = "matrix<subgroup, b, f16, 16, 16>",
                    c16 = "matrix<subgroup, acc, f32, 16, 16>";
  const std::string ops = fmt::format(R"(    %fz = const 0 : f32
    %hz = const 0 : f16
    %c = matrix.fill %fz : {}
    %a = matrix.fill %hz : {}
    %b = matrix.fill %hz : {}
)",
                                      c16, a16, b16);
  EXPECT_EQ(error("", ops + "    %d = matrix.mma %a, %b, %c : " + c16), "");
  EXPECT_THAT(error("", ops + "    %d = matrix.mma %b, %a, %c : " + c16),
              ::testing::HasSubstr("cannot multiply matrix<subgroup, b, f16, 16, 16> by "
                                   "matrix<subgroup, a, f16, 16, 16>"));
  EXPECT_THAT(
      error("", ops + "    %d = matrix.mma %a, %b, %c : matrix<subgroup, acc, f16, 16, 16>"),
      ::testing::HasSubstr("result must be the accumulator type"));
  EXPECT_THAT(error("", "    %hz = const 0 : f16\n    %a = matrix.fill %hz : "
                        "matrix<subgroup, a, f16, 16, 32>\n    %b = matrix.fill %hz : "
                        "matrix<subgroup, b, f16, 32, 16>\n    %fz = const 0 : f32\n    %c = "
                        "matrix.fill %fz : " +
                            c16 + "\n    %d = matrix.mma %a, %b, %c : " + c16),
              ::testing::HasSubstr("of one of the shapes m x n x k 16x16x16 f16->f32"));
  EXPECT_THAT(error("", "    %x = const 0 : f64\n    %a = matrix.fill %x : matrix<subgroup, a, "
                        "f64, 16, 8>"),
              ::testing::HasSubstr("matrix operands a and b hold f16, bf16, e4m3, e5m2, i8, u8 "
                                   "or f32 (multiplied as tf32)"));
  EXPECT_THAT(error("", "    %x = const 0 : u32\n    %a = matrix.fill %x : matrix<subgroup, acc, "
                        "u32, 16, 16>"),
              ::testing::HasSubstr("accumulators hold f32, f16 or i32"));
  // Integer fragments: i8 x u8 -> i32 is a shape; an f16 'a' with an i8 'b' is not; integer
  // fragments never convert.
  const std::string ints = R"(    %iz = const 0 : i32
    %bz = const 0 : i8
    %uz = const 0 : u8
    %ic = matrix.fill %iz : matrix<subgroup, acc, i32, 16, 8>
    %ia = matrix.fill %bz : matrix<subgroup, a, i8, 16, 32>
    %ub = matrix.fill %uz : matrix<subgroup, b, u8, 32, 8>
)";
  EXPECT_EQ(
      error("", ints + "    %d = matrix.mma %ia, %ub, %ic : matrix<subgroup, acc, i32, 16, 8>"),
      "");
  EXPECT_THAT(error("", ints + "    %ic2 = matrix.fill %iz : matrix<subgroup, acc, i32, 16, 16>\n"
                               "    %hz = const 0 : f16\n    %hb = matrix.fill %hz : "
                               "matrix<subgroup, b, f16, 32, 16>\n    %d = matrix.mma %ia, %hb, "
                               "%ic2 : matrix<subgroup, acc, i32, 16, 16>"),
              ::testing::HasSubstr("cannot multiply matrix<subgroup, a, i8, 16, 32> by "
                                   "matrix<subgroup, b, f16, 32, 16>"));
  EXPECT_THAT(error("", ints + "    %x = matrix.convert %ic : matrix<subgroup, a, i8, 16, 8>"),
              ::testing::HasSubstr("integer fragments are only loaded, multiplied and stored"));
  EXPECT_THAT(error("", "    %x = const 0 : f32\n    %a = matrix.fill %x : matrix<subgroup, acc, "
                        "f32, 16, 12>"),
              ::testing::HasSubstr("matrix rows and columns are 8, 16 or 32"));
  EXPECT_THAT(error("", ops + "    %x = matrix.convert %a : " + b16),
              ::testing::HasSubstr("only an accumulator changes its role"));
  EXPECT_THAT(error("", ops + "    %x = matrix.convert %c : matrix<subgroup, a, f16, 16, 8>"),
              ::testing::HasSubstr("of the same rows and columns"));
  EXPECT_THAT(error("", ops + "    %x = add %c, %c : " + c16),
              ::testing::HasSubstr("operand 0 has matrix type " + c16));
  EXPECT_THAT(error("%m: " + c16, ""),
              ::testing::HasSubstr("a matrix lives in the subgroup's registers"));
  EXPECT_THAT(error("", ops + R"(    %l = local.alloc : local<f32, 256>
    %z = const 0 : u32
    matrix.store %l, %z, %z, %c)"),
              ::testing::HasSubstr("not a local array"));
  EXPECT_THAT(error("%in: buffer<f16, read>", ops + R"(    %z = const 0 : u32
    %s = const 16 : i32
    %x = matrix.load %in, %z, %s : )" + a16),
              ::testing::HasSubstr("the stride (operand 2) must have the index's type u32"));
  EXPECT_THAT(error("%out: buffer<f16, read>", ops + R"(    %z = const 0 : u32
    matrix.store %out, %z, %z, %a)"),
              ::testing::HasSubstr("stores to a read-only buffer"));
  EXPECT_THAT(error("%in: buffer<f32, read>", ops + R"(    %z = const 0 : u32
    %x = matrix.load %in, %z, %z {col_major = 2} : )" +
                                                  c16),
              ::testing::HasSubstr("attribute 'col_major' is 0 or 1, not 2"));
  EXPECT_THAT(error("%in: buffer<f32, read>", ops + R"(    %z = const 0 : u32
    %x = matrix.load %in, %z, %z : )" + a16),
              ::testing::HasSubstr("loads matrix<subgroup, a, f16, 16, 16> from memory of f32"));
}

TEST(Matrix, integer_products_are_exact_and_wrap_to_32_bits) {
  // C = A B + C with every A and B element -128 (i8) and 255 (u8): each product is -32640 and
  // the 32 of them -1044480; C starts near INT32_MIN, so the sum wraps past it.
  auto module = test::parse_valid(R"(module @m {
  kernel @k(%a: buffer<i8, read>, %b: buffer<u8, read>, %c: buffer<i32, readwrite>) workgroup(32, 1, 1) {
    %zero = const 0 : u32
    %lda = const 32 : u32
    %ldc = const 8 : u32
    %ma = matrix.load %a, %zero, %lda : matrix<subgroup, a, i8, 16, 32>
    %mb = matrix.load %b, %zero, %ldc : matrix<subgroup, b, u8, 32, 8>
    %mc = matrix.load %c, %zero, %ldc : matrix<subgroup, acc, i32, 16, 8>
    %d = matrix.mma %ma, %mb, %mc : matrix<subgroup, acc, i32, 16, 8>
    matrix.store %c, %zero, %ldc, %d
    return
  }
})");
  ASSERT_TRUE(module);
  HostBuffer ba = buffer_of(Scalar::I8, std::vector<uint64_t>(16 * 32, 0x80));
  HostBuffer bb = buffer_of(Scalar::U8, std::vector<uint64_t>(32 * 8, 0xFF));
  std::vector<uint64_t> c(16 * 8);
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = static_cast<uint32_t>(INT32_MIN + static_cast<int32_t>(i) * 100000);
  HostBuffer bc = buffer_of(Scalar::I32, c);
  ASSERT_EQ(run(*module->kernels()[0], {buf(ba), buf(bb), buf(bc)}, {1, 1, 1}), "");
  for (size_t i = 0; i < c.size(); ++i) {
    int64_t want = int64_t{INT32_MIN} + static_cast<int64_t>(i) * 100000 - 32 * 128 * 255;
    EXPECT_EQ(element(bc, i), static_cast<uint32_t>(want)) << "C[" << i << "]";
  }
}

TEST(Matrix, f32_operands_enter_as_tf32_rounded_to_nearest_ties_away) {
  // D = A I + 0 with an 8x8 identity B: each D element is an A element as the product saw it.
  auto module = test::parse_valid(R"(module @m {
  kernel @k(%a: buffer<f32, read>, %b: buffer<f32, read>, %d: buffer<f32, readwrite>) workgroup(32, 1, 1) {
    %zero = const 0 : u32
    %eight = const 8 : u32
    %ma = matrix.load %a, %zero, %eight : matrix<subgroup, a, f32, 16, 8>
    %mb = matrix.load %b, %zero, %eight : matrix<subgroup, b, f32, 8, 8>
    %fz = const 0 : f32
    %mc = matrix.fill %fz : matrix<subgroup, acc, f32, 16, 8>
    %md = matrix.mma %ma, %mb, %mc : matrix<subgroup, acc, f32, 16, 8>
    matrix.store %d, %zero, %eight, %md
    return
  }
})");
  ASSERT_TRUE(module);
  // (input, what the product sees): 13 fraction bits dropped, half of them (0x1000) rounds away
  // from zero; written out by hand.
  const std::pair<uint32_t, uint32_t> cases[] = {
      {0x3F801000, 0x3F802000}, // 1 + 2^-11, a tie: away (to even would give 1)
      {0x3F800FFF, 0x3F800000}, // just below the tie: down
      {0x3F801001, 0x3F802000}, // just above: up
      {0xBF801000, 0xBF802000}, // negative tie: away from zero
      {0x3F803000, 0x3F804000}, // 1 + 3 2^-11: away (and to even)
      {0x00001000, 0x00002000}, // a subnormal tie
      {0xBF800FFF, 0xBF800000}, // negative, below the tie: toward zero
      {0x3F800000, 0x3F800000}, // exact
  };
  std::vector<uint64_t> a(16 * 8, 0), b(8 * 8, 0);
  for (size_t i = 0; i < std::size(cases); ++i)
    a[i] = cases[i].first; // row 0
  for (uint32_t k = 0; k < 8; ++k)
    b[k * 8 + k] = 0x3F800000; // 1.0
  // Row 1: the largest finite value's tie overflows to infinity; row 2: a NaN stays NaN (its
  // payload's low bits are what rounding drops).
  a[8 + 2] = 0x7F7FF000;
  a[16 + 5] = 0x7F800001;
  HostBuffer ba = buffer_of(Scalar::F32, a), bb = buffer_of(Scalar::F32, b);
  HostBuffer bd = buffer_of(Scalar::F32, std::vector<uint64_t>(16 * 8, 0));
  ASSERT_EQ(run(*module->kernels()[0], {buf(ba), buf(bb), buf(bd)}, {1, 1, 1}), "");
  for (size_t i = 0; i < std::size(cases); ++i)
    EXPECT_EQ(element(bd, i), cases[i].second) << fmt::format("{:#010x}", cases[i].first);
  // (x * 0 of the infinity and of the NaN makes the rest of their rows NaN.)
  EXPECT_EQ(element(bd, 8 + 2), 0x7F800000u);
  EXPECT_TRUE(std::isnan(std::bit_cast<float>(static_cast<uint32_t>(element(bd, 16 + 5)))));
  // And the shape's name says how it multiplies.
  EXPECT_EQ(matrix_shapes_text(1u << *matrix_shape_index(
                                   Type::matrix(MatrixRole::A, Scalar::F32, 16, 8),
                                   Type::matrix(MatrixRole::B, Scalar::F32, 8, 8),
                                   Type::matrix(MatrixRole::Accumulator, Scalar::F32, 16, 8))),
            "16x8x8 tf32->f32");
}

TEST(Matrix, types_print_parse_and_compare_by_role_and_shape) {
  Type a = Type::matrix(MatrixRole::A, Scalar::F16, 16, 16);
  EXPECT_EQ(a.str(), "matrix<subgroup, a, f16, 16, 16>");
  EXPECT_NE(a, Type::matrix(MatrixRole::B, Scalar::F16, 16, 16));
  EXPECT_NE(a, Type::matrix(MatrixRole::A, Scalar::F16, 16, 8));
  EXPECT_TRUE(a.is_matrix());
  EXPECT_FALSE(a.is_memory());
  EXPECT_FALSE(a.is_value());
  EXPECT_EQ(a.with_element(Scalar::BF16), Type::matrix(MatrixRole::A, Scalar::BF16, 16, 16));
  EXPECT_THAT(test::first_error("module @m {\n  kernel @k(%x: matrix<warp, a, f16, 16, 16>) {\n"
                                "    return\n  }\n}"),
              ::testing::HasSubstr("expected the matrix scope 'subgroup' (the only one)"));
  EXPECT_THAT(test::first_error("module @m {\n  kernel @k(%x: matrix<subgroup, c, f16, 16, 16>) "
                                "{\n    return\n  }\n}"),
              ::testing::HasSubstr("expected a matrix role (a, b, acc)"));
  EXPECT_THAT(test::first_error("module @m {\n  kernel @k(%x: matrix<subgroup, a, f16, 65536, "
                                "16>) {\n    return\n  }\n}"),
              ::testing::HasSubstr("is too large (at most 65535)"));
}

TEST(Matrix, bounds_check_turns_blocks_out_of_bounds_into_zeros_and_skipped_stores) {
  // A 16x16 block at `off` with stride 16: in bounds for off = 0, out of bounds (its last row
  // ends at element 271 of 256) for off = 16. Checked, the load gives zeros and the store is
  // skipped; unchecked, the interpreter reports the access.
  auto module = test::parse_valid(R"(module @m {
  kernel @k(%a: buffer<f32, read>, %c: buffer<f32, readwrite>, %off: u32) workgroup(32, 1, 1) {
    %ld = const 16 : u32
    %m = matrix.load %a, %off, %ld : matrix<subgroup, acc, f32, 16, 16>
    %zero = const 0 : u32
    matrix.store %c, %zero, %ld, %m
    matrix.store %c, %off, %ld, %m
    return
  }
})");
  ASSERT_TRUE(module);
  auto run_with = [&](uint32_t off, std::vector<uint64_t> &out) {
    std::vector<uint64_t> in(256);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = from_double(Scalar::F32, static_cast<double>(i + 1));
    HostBuffer ba = buffer_of(Scalar::F32, in);
    HostBuffer bc = buffer_of(Scalar::F32, std::vector<uint64_t>(256, 0));
    std::string errors = run(*module->kernels()[0], {buf(ba), buf(bc), u32(off)}, {1, 1, 1});
    out.clear();
    for (size_t i = 0; i < 256; ++i)
      out.push_back(element(bc, i));
    return errors;
  };
  std::vector<uint64_t> out;
  EXPECT_THAT(run_with(16, out), ::testing::HasSubstr("out of bounds"));
  passes::PassManagerOptions options;
  options.verify_each = true;
  passes::PassManager manager(options);
  ASSERT_FALSE(manager.add_pipeline("bounds-check"));
  std::ostringstream log, err;
  ASSERT_TRUE(manager.run(*module, log, err).empty());
  ASSERT_EQ(run_with(0, out), "");
  for (size_t i = 0; i < 256; ++i)
    ASSERT_EQ(host_value(Scalar::F32, out[i]), static_cast<double>(i + 1)) << i;
  ASSERT_EQ(run_with(16, out), "");
  for (size_t i = 0; i < 256; ++i)
    ASSERT_EQ(out[i], 0u) << i; // zeros stored at 0; the store at 16 skipped
}
