//===- matrix_on_devices_test.cpp - Matrix ops on every device that runs them, against the
// interpreter
//
// Every matrix.mma shape (docs/ir.md §2.2) in two kernels, on each device that has it (interp,
// cpu, cuda, hip; a shape the device's target refuses is skipped and counted): a GEMM over K tiles
// loading fragments from global memory, and one product whose operands are staged through
// shared memory first, each operand row- or column-major (on CUDA the shared loads take
// ldmatrix). The device's result is compared with the interpreter's (the reference, run with
// the device's subgroup size): the inputs are small multiples of 1/64, so with an f32
// accumulator every partial sum is exact and the two must agree bit for bit; an f16 accumulator
// may round in another order, within docs/ir.md §4.13's bound.
//
//===-----------------------------------------------------------------------------------------===//
#include "device_launcher.h"

#include "cubecc/ir/parser.h"
#include "cubecc/ir/semantics.h"
#include "cubecc/passes/pass_manager.h"
#include "test_support.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace cubecc;
using namespace cubecc::ir;

namespace {

/// One product D = A B + 0 with A and B staged through shared memory (copied element for element,
/// so their layouts are kept), loaded as fragments from there. `wg` invocations (whole subgroups).
std::string staged_ir(const MatrixShape &s, bool a_col, bool b_col, uint32_t wg) {
  const uint32_t lda = a_col ? s.m : s.k, ldb = b_col ? s.k : s.n;
  return fmt::format(
      R"(module @m {{
  kernel @staged(%a: buffer<{ina}, read>, %b: buffer<{inb}, read>, %c: buffer<{acc}, readwrite>) workgroup({wg}, 1, 1) {{
    %ta = shared.alloc : shared<{ina}, {mk}>
    %tb = shared.alloc : shared<{inb}, {kn}>
    %i = local_index : u32
    %wg = const {wg} : u32
    %mk = const {mk} : u32
    %kn = const {kn} : u32
    for %i, %mk, %wg (%e: u32) {{
      %v = load %a, %e : {ina}
      store %ta, %e, %v
      yield
    }}
    for %i, %kn, %wg (%e: u32) {{
      %v = load %b, %e : {inb}
      store %tb, %e, %v
      yield
    }}
    barrier
    %zero = const 0 : u32
    %lda = const {lda} : u32
    %ldb = const {ldb} : u32
    %ldc = const {n} : u32
    %ma = matrix.load %ta, %zero, %lda {a_attr}: matrix<subgroup, a, {ina}, {m}, {k}>
    %mb = matrix.load %tb, %zero, %ldb {b_attr}: matrix<subgroup, b, {inb}, {k}, {n}>
    %fz = const 0 : {acc}
    %c0 = matrix.fill %fz : matrix<subgroup, acc, {acc}, {m}, {n}>
    %d = matrix.mma %ma, %mb, %c0 : matrix<subgroup, acc, {acc}, {m}, {n}>
    %sg = subgroup_id : u32
    %first = eq %sg, %zero : bool
    if %first {{
      matrix.store %c, %zero, %ldc, %d
      yield
    }}
    return
  }}
}})",
      fmt::arg("ina", scalar_name(s.a)), fmt::arg("inb", scalar_name(s.b)),
      fmt::arg("acc", scalar_name(s.accumulator)), fmt::arg("m", s.m), fmt::arg("n", s.n),
      fmt::arg("k", s.k), fmt::arg("mk", s.m * s.k), fmt::arg("kn", s.k * s.n),
      fmt::arg("lda", lda), fmt::arg("ldb", ldb), fmt::arg("wg", wg),
      fmt::arg("a_attr", a_col ? "{col_major = 1} " : ""),
      fmt::arg("b_attr", b_col ? "{col_major = 1} " : ""));
}

/// Small values of a float `s` (multiples of 1/64 below 2), any value of an integer one, as bits.
HostBuffer random_buffer(Scalar s, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-8, 8), byte(0, 255);
  size_t bytes = scalar_bits(s) / 8;
  HostBuffer b{s, std::vector<uint8_t>(n * bytes)};
  for (size_t i = 0; i < n; ++i) {
    uint64_t v = is_integer(s)
                     ? static_cast<uint64_t>(byte(rng))
                     : from_double(s, small(rng) / 4.0 + (small(rng) & 1 ? 1.0 / 64 : 0.0));
    std::memcpy(b.bytes.data() + i * bytes, &v, bytes);
  }
  return b;
}

double value_at(const HostBuffer &b, size_t i) {
  size_t bytes = scalar_bits(b.element) / 8;
  uint64_t v = 0;
  std::memcpy(&v, b.bytes.data() + i * bytes, bytes);
  if (b.element == Scalar::I32)
    return static_cast<int32_t>(static_cast<uint32_t>(v));
  return to_double(b.element, v);
}

class MatrixOnDevices : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override { CUBECC_SKIP_IF_DEVICE_ABSENT(GetParam()); }

  /// Runs `text`'s kernel on the device and in the interpreter with the same arguments (C, of
  /// `c_elements`, is argument `c_position`), and compares C; false (with the reason in
  /// `refused`) when the device's target does not have the shape.
  bool check(const std::string &text, const MatrixShape &s, std::vector<Argument> args,
             size_t c_position, size_t c_elements, std::array<uint32_t, 3> groups,
             uint32_t mmas_per_element, std::string &refused) {
    auto module = test::parse_valid(text);
    EXPECT_TRUE(module);
    if (!module)
      return true;
    EXPECT_TRUE(passes::optimize(*module, 2).empty());
    const Kernel &kernel = *module->kernels()[0];
    runtime::Device &device = test::shared_device(GetParam());
    HostBuffer on_device{s.accumulator,
                         std::vector<uint8_t>(c_elements * scalar_bits(s.accumulator) / 8)};
    HostBuffer reference = on_device;
    LaunchConfig config;
    config.num_workgroups = groups;
    config.subgroup_size = device.info().subgroup_size;
    args[c_position] = {&on_device, {}};
    std::vector<Diagnostic> errors = test::run_on_device(device, kernel, args, config);
    if (!errors.empty() && to_string(errors).find("does not support") != std::string::npos) {
      refused = to_string(errors);
      return false;
    }
    EXPECT_TRUE(errors.empty()) << to_string(errors);
    args[c_position] = {&reference, {}};
    errors = interpret(kernel, args, config);
    EXPECT_TRUE(errors.empty()) << to_string(errors);
    // f32 and i32: exact. f16: docs/ir.md §4.13's bound per mma, K 2^-9 (|C| + sum |a b|), with
    // |a b| < 4.5 here and |C| at most the earlier mmas' sums, for each mma feeding the element.
    // The CPU sums in the interpreter's order and precision (docs/cpu.md): exact there too.
    const double mmas = mmas_per_element, k = s.k;
    double bound = s.accumulator != Scalar::F16 || GetParam() == "cpu"
                       ? 0
                       : mmas * k * std::ldexp(1.0, -9) * (mmas + 1) * k * 4.5;
    for (size_t i = 0; i < c_elements; ++i) {
      double got = value_at(on_device, i), want = value_at(reference, i);
      EXPECT_LE(std::abs(got - want), bound)
          << "C[" << i << "] = " << got << ", interpreter " << want;
      if (std::abs(got - want) > bound)
        break;
    }
    return true;
  }
};

TEST_P(MatrixOnDevices, gemm_of_every_shape_matches_the_interpreter) {
  size_t ran = 0;
  std::vector<std::string> refused;
  // The CPU's element loops do not depend on the shape: there each shape takes one B layout
  // (alternating), which keeps every layout and shape covered at half the compiles.
  const bool cpu = GetParam() == "cpu";
  for (size_t si = 0; si < matrix_shapes().size(); ++si)
    for (bool b_col : {false, true}) {
      const MatrixShape &s = matrix_shapes()[si];
      if (cpu && b_col != (si % 2 == 1))
        continue;
      SCOPED_TRACE(fmt::format("{} B {}", s.str(), b_col ? "column-major" : "row-major"));
      // test_support.h's GEMM: 64 invocations per workgroup, subgroup g computes rows 16g..;
      // here 2 row blocks, 3 column tiles, 4 K tiles.
      const uint32_t wg = 64, subgroups = wg / test::shared_device(GetParam()).info().subgroup_size;
      const uint32_t m = s.m * subgroups, n = 3 * s.n, k = 4 * s.k;
      HostBuffer a = random_buffer(s.a, size_t{m} * k, 1);
      HostBuffer b = random_buffer(s.b, size_t{k} * n, 2);
      std::string why;
      if (check(test::matrix_gemm_ir(s, b_col), s,
                {{&a, {}}, {&b, {}}, {}, {nullptr, {m}}, {nullptr, {n}}, {nullptr, {k}}}, 2,
                size_t{m} * n, {n / s.n, 1, 1}, 4, why))
        ++ran;
      else
        refused.push_back(s.str() + ": " + why);
    }
  std::cout << "[          ] " << ran << " GEMMs ran on " << GetParam() << ", " << refused.size()
            << " refused by the target\n";
  // Every shape runs on the interpreter, the CPU and NVIDIA from sm_89 (fp8 needs it); gfx90a
  // has two.
  const std::string arch = test::shared_device(GetParam()).info().arch;
  bool has_all =
      GetParam() == "interp" || GetParam() == "cpu" ||
      (GetParam() == "cuda" && arch.rfind("sm_", 0) == 0 && std::stoi(arch.substr(3)) >= 89);
  if (has_all) {
    EXPECT_TRUE(refused.empty()) << refused.front();
  }
  EXPECT_GE(ran, 4u);
}

TEST_P(MatrixOnDevices, operands_staged_in_shared_memory_in_either_layout) {
  const uint32_t wg = test::shared_device(GetParam()).info().subgroup_size;
  size_t ran = 0, refused = 0;
  const bool cpu = GetParam() == "cpu"; // as above: both operands alike, then the other way
  for (size_t si = 0; si < matrix_shapes().size(); ++si)
    for (bool a_col : {false, true})
      for (bool b_col : {false, true}) {
        const MatrixShape &s = matrix_shapes()[si];
        if (cpu && (a_col != b_col || a_col != (si % 2 == 1)))
          continue;
        SCOPED_TRACE(fmt::format("{} A {} B {}", s.str(), a_col ? "column-major" : "row-major",
                                 b_col ? "column-major" : "row-major"));
        HostBuffer a = random_buffer(s.a, size_t{s.m} * s.k, 3);
        HostBuffer b = random_buffer(s.b, size_t{s.k} * s.n, 4);
        // The layout of the input in memory is whatever the attribute says: the same bits read
        // as row- or column-major are different matrices, and both sides read them alike.
        std::string why;
        if (check(staged_ir(s, a_col, b_col, wg), s, {{&a, {}}, {&b, {}}, {}}, 2, size_t{s.m} * s.n,
                  {1, 1, 1}, 1, why))
          ++ran;
        else
          ++refused;
      }
  std::cout << "[          ] " << ran << " staged products ran on " << GetParam() << ", " << refused
            << " refused by the target\n";
  EXPECT_GE(ran, 8u);
}

/// A matrix carried by a loop whose body has barriers (on the CPU it lives in a per-gang slot
/// between the segments), B staged through shared memory each step, then the f16 sum converted
/// to an 'a' operand and multiplied again; each subgroup's rows come from local_index / 32, which
/// the CPU keeps per lane and the matrix ops take from lane 0.
TEST_P(MatrixOnDevices, a_matrix_carried_across_barriers_and_converted) {
  const MatrixShape s{16, 16, 16, Scalar::F16, Scalar::F16, Scalar::F16};
  const uint32_t k = 48;
  const std::string text = R"(module @m {
  kernel @carried(%a: buffer<f16, read>, %b: buffer<f16, read>, %c: buffer<f16, readwrite>, %k: u32) workgroup(64, 1, 1) {
    %tile = shared.alloc : shared<f16, 256>
    %zero = const 0 : u32
    %sixteen = const 16 : u32
    %wsize = const 32 : u32
    %wg = const 64 : u32
    %n256 = const 256 : u32
    %i = local_index : u32
    %warp = div %i, %wsize : u32
    %row = mul %warp, %sixteen : u32
    %arow = mul %row, %k : u32
    %fz = const 0 : f16
    %init = matrix.fill %fz : matrix<subgroup, acc, f16, 16, 16>
    %sum = for %zero, %k, %sixteen, %init : matrix<subgroup, acc, f16, 16, 16> (%kk: u32, %acc: matrix<subgroup, acc, f16, 16, 16>) {
      %boff = mul %kk, %sixteen : u32
      for %i, %n256, %wg (%e: u32) {
        %bi = add %boff, %e : u32
        %v = load %b, %bi : f16
        store %tile, %e, %v
        yield
      }
      barrier
      %ai = add %arow, %kk : u32
      %ma = matrix.load %a, %ai, %k : matrix<subgroup, a, f16, 16, 16>
      %mb = matrix.load %tile, %zero, %sixteen : matrix<subgroup, b, f16, 16, 16>
      %next = matrix.mma %ma, %mb, %acc : matrix<subgroup, acc, f16, 16, 16>
      barrier
      yield %next
    }
    %again = matrix.convert %sum : matrix<subgroup, a, f16, 16, 16>
    %mb2 = matrix.load %b, %zero, %sixteen : matrix<subgroup, b, f16, 16, 16>
    %d = matrix.mma %again, %mb2, %sum : matrix<subgroup, acc, f16, 16, 16>
    %ci = mul %row, %sixteen : u32
    matrix.store %c, %ci, %sixteen, %d
    return
  }
})";
  HostBuffer a = random_buffer(Scalar::F16, size_t{32} * k, 5);
  HostBuffer b = random_buffer(Scalar::F16, size_t{k} * 16, 6);
  std::string why;
  if (!check(text, s, {{&a, {}}, {&b, {}}, {}, {nullptr, {k}}}, 2, 32 * 16, {1, 1, 1}, 4, why))
    GTEST_SKIP() << why;
}

INSTANTIATE_TEST_SUITE_P(Devices, MatrixOnDevices, testing::Values("interp", "cpu", "cuda", "hip"),
                         [](const auto &info) { return info.param; });

} // namespace
