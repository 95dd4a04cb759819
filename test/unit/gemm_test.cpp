//===- gemm_test.cpp - Matrix fragments in the DSL, and the tensor-core GEMM -----------------===//
//
// The DSL's matrices (dsl::MatrixA/B, dsl::Accumulator, dsl::mma, dsl::convert) traced and run
// in the interpreter against host references written independently of it; every registered
// GEMM variant (examples/tensor_cores/gemm.cpp) against a host GEMM, through NVRTC and
// `ptxas -v` for sm_80 and sm_90 (no register spills), through hipRTC for gfx90a, and refused by
// the SPIR-V writer with a message naming the kernel. A binary of its own: the GEMM library's
// registered kernels must not join the examples that every backend runs.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/cuda.h"
#include "cubecc/codegen/hip.h"
#include "cubecc/codegen/spirv.h"
#include "cubecc/dsl.h"
#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/interpreter.h"
#include "cubecc/ir/printer.h"
#include "cubecc/passes/pass_manager.h"
#include "gemm.h"
#include "toolkit_support.h"

#include <fmt/format.h>
#include <gmock/gmock.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

using namespace cubecc;
namespace dsl = cubecc::dsl;

namespace {

// --- host helpers --------------------------------------------------------------------------------

/// f16 or bf16 bits of `v` (rounded to nearest even by the C++ types), and back.
uint16_t to_bits(ir::Scalar s, float v) {
  if (s == ir::Scalar::F16)
    return std::bit_cast<uint16_t>(static_cast<_Float16>(v));
  uint32_t bits = std::bit_cast<uint32_t>(v); // bf16: the top half of the float, rounded even
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
float from_bits(ir::Scalar s, uint16_t b) {
  if (s == ir::Scalar::F16)
    return static_cast<float>(std::bit_cast<_Float16>(b));
  return std::bit_cast<float>(uint32_t{b} << 16);
}

/// Small values exactly representable in f16 and bf16 (k/8, |k| <= 16), so that the inputs are
/// the same numbers in both types.
std::vector<uint16_t> random_matrix(ir::Scalar s, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-16, 16);
  std::vector<uint16_t> out(n);
  for (auto &v : out)
    v = to_bits(s, small(rng) / 8.0f);
  return out;
}

ir::HostBuffer buffer16(ir::Scalar s, const std::vector<uint16_t> &v) {
  ir::HostBuffer b{s, std::vector<uint8_t>(v.size() * 2)};
  std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
  return b;
}
ir::HostBuffer buffer32(const std::vector<float> &v) {
  ir::HostBuffer b{ir::Scalar::F32, std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
  return b;
}
float f32_at(const ir::HostBuffer &b, size_t i) {
  float v;
  std::memcpy(&v, b.bytes.data() + i * 4, 4);
  return v;
}
ir::Argument buf(ir::HostBuffer &b) {
  return {&b, {}};
}
ir::Argument u32(uint64_t v) {
  return {nullptr, {v}};
}
/// A row-major rank-2 tensor argument: buffer, shape, strides.
void tensor2(std::vector<ir::Argument> &args, ir::HostBuffer &b, uint64_t rows, uint64_t cols) {
  args.insert(args.end(), {buf(b), u32(rows), u32(cols), u32(cols), u32(1)});
}

std::unique_ptr<ir::Module> optimized(std::unique_ptr<ir::Module> module) {
  if (!module)
    return module;
  auto errors = passes::optimize(*module, 2);
  EXPECT_TRUE(errors.empty()) << ir::to_string(errors);
  return module;
}

// --- DSL kernels -----------------------------------------------------------------------------

using A16 = dsl::MatrixA<dsl::f16, 16, 16>;
using B16 = dsl::MatrixB<dsl::f16, 16, 16>;
using B8 = dsl::MatrixB<dsl::f16, 16, 8>;
using Acc8 = dsl::Accumulator<float, 16, 8>;
using Acc16 = dsl::Accumulator<float, 16, 16>;

/// One subgroup, three products: D = A (16x16, row-major) B (16x8, column-major) + C (16x8);
/// S = A A (A loaded again as a B operand); E = f16(S) B, the accumulator S converted into an A
/// operand.
void mma_chain(dsl::Tensor<const dsl::f16> a, dsl::Tensor<const dsl::f16> b,
               dsl::Tensor<const float> c, dsl::Tensor<float> d, dsl::Tensor<float> e) {
  A16 ma = A16::load(a, 0u, 16u);
  B8 mb = B8::load(b, 0u, 16u, dsl::ColMajor);
  Acc8 md = dsl::mma(ma, mb, Acc8::load(c, 0u, 8u));
  md.store(d, 0u, 8u);
  Acc16 square = dsl::mma(ma, B16::load(a, 0u, 16u), Acc16::fill(0.0f));
  Acc8 me = dsl::mma(dsl::convert<A16>(square), mb, Acc8::fill(0.0f));
  me.store(e, 0u, 8u);
}

/// Sums `parts` 16x16 blocks of `a` (stacked along the rows) as A operands times the identity,
/// carrying the accumulator and a scalar count through dsl::for_carry.
void carried_sum(dsl::Tensor<const dsl::f16> a, dsl::Tensor<const dsl::f16> identity,
                 dsl::Tensor<float> out, dsl::Tensor<uint32_t> count, dsl::Scalar<uint32_t> parts) {
  B16 id = B16::load(identity, 0u, 16u);
  auto [sum, n] = dsl::for_carry(
      0u, parts, std::tuple{Acc16::fill(0.0f), dsl::Val<uint32_t>(0u)},
      [&](dsl::Val<uint32_t> p, const std::tuple<Acc16, dsl::Val<uint32_t>> &carried) {
        A16 block = A16::load(a, p * 256u, 16u);
        return std::tuple{dsl::mma(block, id, std::get<0>(carried)),
                          dsl::Val<uint32_t>(std::get<1>(carried) + 1u)};
      });
  sum.store(out, 0u, 16u);
  dsl::if_(dsl::local_index() == 0u, [&] { count[0u] = n; });
}

/// Matrices loaded from and stored to slices (a runtime start; a slice of a slice): the index
/// counts from the slice's start. D = A B with A, B and D `at` elements into their tensors.
void mma_on_slices(dsl::Tensor<const dsl::f16> a, dsl::Tensor<const dsl::f16> b,
                   dsl::Tensor<float> d, dsl::Scalar<uint32_t> at) {
  A16 ma = A16::load(dsl::slice(a, at, 256u), 0u, 16u);
  B8 mb = B8::load(dsl::slice(dsl::slice(b, 8u, 1000u), at - 8u, 128u), 0u, 16u, dsl::ColMajor);
  dsl::mma(ma, mb, Acc8::fill(0.0f)).store(dsl::slice(d, at, 128u), 0u, 8u);
}

TEST(MatrixDsl, products_chain_and_convert_as_the_host_computes_them) {
  auto traced = dsl::trace<mma_chain>("mma_chain", {.workgroup = {32, 1, 1}});
  ASSERT_TRUE(traced.module) << ir::to_string(traced.errors);
  auto module = optimized(std::move(traced.module));
  const auto f16 = ir::Scalar::F16;
  std::vector<uint16_t> a = random_matrix(f16, 256, 1), b = random_matrix(f16, 128, 2);
  std::vector<float> c(128);
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = static_cast<float>(i % 7) - 3.0f;
  ir::HostBuffer ba = buffer16(f16, a), bb = buffer16(f16, b), bc = buffer32(c),
                 bd = buffer32(std::vector<float>(128)), be = buffer32(std::vector<float>(128));
  std::vector<ir::Argument> args;
  for (ir::HostBuffer *x : {&ba, &bb, &bc, &bd, &be})
    args.insert(args.end(), {buf(*x), u32(x->size()), u32(1)});
  ir::LaunchConfig config;
  auto errors = ir::interpret(*module->kernels()[0], args, config);
  ASSERT_TRUE(errors.empty()) << ir::to_string(errors);

  auto av = [&](int i, int k) { return static_cast<double>(from_bits(f16, a[i * 16 + k])); };
  auto bv = [&](int k, int j) { return static_cast<double>(from_bits(f16, b[j * 16 + k])); };
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double dsum = c[i * 8 + j], esum = 0;
      for (int k = 0; k < 16; ++k) {
        dsum += av(i, k) * bv(k, j);
        double s = 0; // S[i][k] = sum_l A[i][l] A[l][k], then rounded to f16 as the A operand
        for (int l = 0; l < 16; ++l)
          s += av(i, l) * av(l, k);
        esum += static_cast<double>(static_cast<_Float16>(static_cast<float>(s))) * bv(k, j);
      }
      EXPECT_EQ(f32_at(bd, i * 8 + j), static_cast<float>(dsum)) << "D[" << i << "][" << j << "]";
      EXPECT_EQ(f32_at(be, i * 8 + j), static_cast<float>(esum)) << "E[" << i << "][" << j << "]";
    }
}

TEST(MatrixDsl, loads_and_stores_through_slices_count_from_the_slices_start) {
  auto traced = dsl::trace<mma_on_slices>("mma_on_slices", {.workgroup = {32, 1, 1}});
  ASSERT_TRUE(traced.module) << ir::to_string(traced.errors);
  auto module = optimized(std::move(traced.module));
  const auto f16 = ir::Scalar::F16;
  const uint32_t at = 64;
  std::vector<uint16_t> a = random_matrix(f16, at + 256, 3), b = random_matrix(f16, at + 128, 4);
  ir::HostBuffer ba = buffer16(f16, a), bb = buffer16(f16, b),
                 bd = buffer32(std::vector<float>(at + 128, -1.0f));
  std::vector<ir::Argument> args;
  for (ir::HostBuffer *x : {&ba, &bb, &bd})
    args.insert(args.end(), {buf(*x), u32(x->size()), u32(1)});
  args.push_back(u32(at));
  auto errors = ir::interpret(*module->kernels()[0], args, ir::LaunchConfig{});
  ASSERT_TRUE(errors.empty()) << ir::to_string(errors);
  for (uint32_t k = 0; k < at; ++k)
    EXPECT_EQ(f32_at(bd, k), -1.0f) << "D[" << k << "], before the slice";
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double sum = 0;
      for (int k = 0; k < 16; ++k)
        sum += static_cast<double>(from_bits(f16, a[at + i * 16 + k])) *
               static_cast<double>(from_bits(f16, b[at + j * 16 + k]));
      EXPECT_EQ(f32_at(bd, at + i * 8 + j), static_cast<float>(sum))
          << "D[" << i << "][" << j << "]";
    }
}

TEST(MatrixDsl, for_carry_carries_a_fragment_and_a_value_through_the_loop) {
  auto traced = dsl::trace<carried_sum>("carried_sum", {.workgroup = {32, 1, 1}});
  ASSERT_TRUE(traced.module) << ir::to_string(traced.errors);
  // The accumulator and the count are the loop's carried values, not memory.
  std::string text = ir::to_string(*traced.module);
  EXPECT_THAT(text, ::testing::HasSubstr("matrix<subgroup, acc, f32, 16, 16>, u32 ("));
  const auto f16 = ir::Scalar::F16;
  const uint32_t parts = 5;
  std::vector<uint16_t> a = random_matrix(f16, 256 * parts, 3), identity(256, to_bits(f16, 0));
  for (int i = 0; i < 16; ++i)
    identity[i * 17] = to_bits(f16, 1);
  ir::HostBuffer ba = buffer16(f16, a), bi = buffer16(f16, identity),
                 bo = buffer32(std::vector<float>(256)),
                 bn{ir::Scalar::U32, std::vector<uint8_t>(4)};
  for (int level : {0, 2}) {
    SCOPED_TRACE(fmt::format("-O{}", level));
    auto module = dsl::trace<carried_sum>("carried_sum", {.workgroup = {32, 1, 1}}).module;
    ASSERT_TRUE(module);
    ASSERT_TRUE(passes::optimize(*module, level).empty());
    std::vector<ir::Argument> args = {buf(ba), u32(ba.size()), u32(1),    buf(bi), u32(256),
                                      u32(1),  buf(bo),        u32(256),  u32(1),  buf(bn),
                                      u32(1),  u32(1),         u32(parts)};
    auto errors = ir::interpret(*module->kernels()[0], args, {});
    ASSERT_TRUE(errors.empty()) << ir::to_string(errors);
    for (int e = 0; e < 256; ++e) {
      double sum = 0;
      for (uint32_t p = 0; p < parts; ++p)
        sum += from_bits(f16, a[p * 256 + e]);
      ASSERT_EQ(f32_at(bo, e), static_cast<float>(sum)) << e;
    }
    uint32_t n;
    std::memcpy(&n, bn.bytes.data(), 4);
    EXPECT_EQ(n, parts);
  }
}

void break_in_for_carry(dsl::Tensor<float> out) {
  auto s = dsl::for_carry(0u, 4u, dsl::Val<float>(0.0f),
                          [&](dsl::Val<uint32_t> i, const dsl::Val<float> &acc) {
                            dsl::if_(i == 2u, [&] { dsl::break_(); });
                            return dsl::Val<float>(acc + 1.0f);
                          });
  out[0u] = s;
}

void return_through_for_carry(dsl::Tensor<float> out) {
  auto s = dsl::for_carry(
      0u, 4u, dsl::Val<float>(0.0f), [&](dsl::Val<uint32_t>, const dsl::Val<float> &acc) {
        dsl::for_(0u, 2u,
                  [&](dsl::Val<uint32_t> j) { dsl::if_(j == 1u, [&] { dsl::return_(); }); });
        return dsl::Val<float>(acc + 1.0f);
      });
  out[0u] = s;
}

TEST(MatrixDsl, an_early_exit_from_a_for_carry_is_refused_at_its_line) {
  auto broken = dsl::trace<break_in_for_carry>("k");
  ASSERT_FALSE(broken.module);
  EXPECT_THAT(ir::to_string(broken.errors),
              ::testing::HasSubstr("break_ inside a for_carry body cannot leave its iteration"));
  EXPECT_THAT(ir::to_string(broken.errors), ::testing::HasSubstr("gemm_test.cpp"));
  // return_ in a plain loop inside the carrying one would break out of both.
  auto returned = dsl::trace<return_through_for_carry>("k");
  ASSERT_FALSE(returned.module);
  EXPECT_THAT(ir::to_string(returned.errors),
              ::testing::HasSubstr("return_ inside a for_carry body"));
}

// --- the GEMM ---------------------------------------------------------------------------------

/// The GEMM's registered kernels, by name, traced and optimized at -O2 into one module.
std::unique_ptr<ir::Module> gemm_kernels() {
  auto module = std::make_unique<ir::Module>("gemm");
  std::vector<ir::Diagnostic> errors;
  for (const dsl::RegisteredKernel &k : dsl::registered_kernels())
    k.trace(*module, k, errors);
  EXPECT_TRUE(errors.empty()) << ir::to_string(errors);
  return optimized(std::move(module));
}

const ir::Kernel *find_kernel(const ir::Module &module, const std::string &name) {
  for (const auto &k : module.kernels())
    if (k->name() == name)
      return k.get();
  return nullptr;
}

/// Runs `variant` of the GEMM for `type` on the interpreter at m x n x k (A and B row-major in
/// `a` and `b`, whose elements' values `value` decodes) and checks every element of C against the
/// host's sum in double. The callers' inputs are multiples of 1/8 below 2, so every partial sum is
/// exact in f32 and the results must be equal.
void expect_exact_gemm(const ir::Module &module, const examples::GemmVariantInfo &variant,
                       ir::Scalar type, ir::HostBuffer a, ir::HostBuffer b, uint64_t m, uint64_t n,
                       uint64_t k,
                       const std::function<double(const ir::HostBuffer &, size_t)> &value) {
  std::string name = variant.name(std::string(ir::scalar_name(type)));
  SCOPED_TRACE(name);
  const ir::Kernel *kernel = find_kernel(module, name);
  ASSERT_TRUE(kernel);
  examples::GemmLaunch launch = examples::gemm_launch(variant, m, n, k);
  ASSERT_TRUE(launch.valid);
  ir::HostBuffer c = buffer32(std::vector<float>(m * n, -1.0f));
  std::vector<ir::Argument> args;
  tensor2(args, a, m, k);
  tensor2(args, b, k, n);
  tensor2(args, c, m, n);
  ir::LaunchConfig config;
  config.num_workgroups = launch.grid;
  config.subgroup_size = static_cast<uint32_t>(variant.subgroup);
  auto errors = ir::interpret(*kernel, args, config);
  ASSERT_TRUE(errors.empty()) << ir::to_string(errors);
  for (uint64_t i = 0; i < m; ++i)
    for (uint64_t j = 0; j < n; ++j) {
      double exact = 0;
      for (uint64_t kk = 0; kk < k; ++kk)
        exact += value(a, i * k + kk) * value(b, kk * n + j);
      ASSERT_EQ(f32_at(c, i * n + j), static_cast<float>(exact)) << "C[" << i << "][" << j << "]";
    }
}

TEST(Gemm, every_variant_matches_a_host_gemm_in_the_interpreter) {
  // Sizes with a partial block tile on every side (M and N not multiples of any tile, K not a
  // multiple of kBK), within the variants' rule that K and N are multiples of the load width.
  const uint64_t m = 40, n = 72, k = 80;
  auto module = gemm_kernels();
  for (ir::Scalar type : {ir::Scalar::F16, ir::Scalar::BF16}) {
    ir::HostBuffer a = buffer16(type, random_matrix(type, m * k, 4)),
                   b = buffer16(type, random_matrix(type, k * n, 5));
    auto value = [type](const ir::HostBuffer &buffer, size_t i) {
      uint16_t bits;
      std::memcpy(&bits, buffer.bytes.data() + 2 * i, 2);
      return static_cast<double>(from_bits(type, bits));
    };
    for (const examples::GemmVariantInfo &variant : examples::gemm_variants())
      expect_exact_gemm(*module, variant, type, a, b, m, n, k, value);
  }
}

TEST(Gemm, every_fp8_variant_matches_a_host_gemm_in_the_interpreter) {
  // K and N multiples of the 16-element loads, neither a multiple of every tile; the inputs are
  // k/8 (|k| <= 16), exact in e4m3.
  const uint64_t m = 40, n = 80, k = 96;
  auto module = gemm_kernels();
  auto e4m3 = [](size_t count, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> small(-16, 16);
    ir::HostBuffer out{ir::Scalar::E4M3, std::vector<uint8_t>(count)};
    for (auto &v : out.bytes)
      v = static_cast<uint8_t>(ir::storage_float_from_double(ir::Scalar::E4M3, small(rng) / 8.0));
    return out;
  };
  auto value = [](const ir::HostBuffer &buffer, size_t i) {
    return ir::storage_float_to_double(ir::Scalar::E4M3, buffer.bytes[i]);
  };
  for (const examples::GemmVariantInfo &variant : examples::gemm_fp8_variants())
    expect_exact_gemm(*module, variant, ir::Scalar::E4M3, e4m3(m * k, 6), e4m3(k * n, 7), m, n, k,
                      value);
  // 16 elements per load: K and N must be multiples of 16.
  EXPECT_FALSE(examples::gemm_launch(examples::gemm_fp8_variants()[0], 64, 72, 64).valid);
}

TEST(Gemm, the_interpreter_refuses_a_launch_with_other_subgroups) {
  auto module = gemm_kernels();
  const ir::Kernel *kernel = find_kernel(*module, "gemm_f16_64x64x32_w32x32_s2_v8_sg64");
  ASSERT_TRUE(kernel);
  EXPECT_EQ(kernel->attributes().get_int(ir::kSubgroupSizeAttribute), 64);
  ir::HostBuffer a = buffer16(ir::Scalar::F16, std::vector<uint16_t>(64 * 64)), b = a,
                 c = buffer32(std::vector<float>(64 * 64));
  std::vector<ir::Argument> args;
  tensor2(args, a, 64, 64);
  tensor2(args, b, 64, 64);
  tensor2(args, c, 64, 64);
  ir::LaunchConfig config; // subgroups of 32
  auto errors = ir::interpret(*kernel, args, config);
  EXPECT_THAT(ir::to_string(errors),
              ::testing::HasSubstr("needs subgroups of 64 invocations (its subgroup_size "
                                   "attribute); this launch has subgroups of 32"));
}

TEST(Gemm, launches_refuse_shapes_the_variant_cannot_load) {
  for (size_t v = 0; v < examples::gemm_variants().size(); ++v) {
    const examples::GemmVariantInfo &info = examples::gemm_variants()[v];
    EXPECT_TRUE(examples::gemm_launch(v, 1, 4096, 4096).valid) << v;
    EXPECT_EQ(examples::gemm_launch(v, 4096, 4100, 4096).valid, info.vec <= 4) << v;
    EXPECT_FALSE(examples::gemm_launch(v, 0, 64, 64).valid) << v;
    EXPECT_FALSE(examples::gemm_launch(v, 1u << 20, 1u << 13, 64).valid) << v; // M N > 2^32
    auto l = examples::gemm_launch(v, 100, 200, 64);
    EXPECT_EQ(l.grid[0], (200 + info.bn - 1) / info.bn);
    EXPECT_EQ(l.grid[1], (100 + info.bm - 1) / info.bm);
  }
  EXPECT_FALSE(examples::gemm_launch(examples::gemm_variants().size(), 64, 64, 64).valid);
}

TEST(Gemm, every_variant_compiles_for_sm80_and_sm90_without_register_spills) {
  std::string why;
  if (codegen::nvrtc_version(&why).empty())
    GTEST_SKIP() << why;
  auto module = gemm_kernels();
  size_t compiled = 0, refused = 0;
  for (const auto &kernel : module->kernels())
    for (const std::string arch : {"sm_80", "sm_90"}) {
      std::string what = kernel->name() + " on " + arch;
      std::vector<ir::Diagnostic> errors;
      auto binary = codegen::compile_cuda(*kernel, {arch}, errors, codegen::CudaOutputs::Ptx);
      if (kernel->name().find("_sg64") != std::string::npos) { // AMD's: refused, not run wrong
        EXPECT_FALSE(binary) << what;
        EXPECT_THAT(ir::to_string(errors),
                    ::testing::HasSubstr("needs subgroups of 64 invocations (its subgroup_size "
                                         "attribute), which target 'cuda:" +
                                         arch + "' does not support (its subgroups have 32"));
        ++refused;
        continue;
      }
      const bool fp8 = kernel->name().find("_e4m3_") != std::string::npos;
      if (fp8 && arch == "sm_80") { // fp8 mma.sync needs sm_89
        EXPECT_FALSE(binary) << what;
        EXPECT_THAT(ir::to_string(errors),
                    ::testing::HasSubstr("needs the matrix shape 16x16x32 e4m3->f32, which "
                                         "target 'cuda:sm_80' does not support"));
        EXPECT_THAT(ir::to_string(errors), ::testing::HasSubstr("fp8 shapes sm_89"));
        EXPECT_EQ(errors.size(), 1u) << "one error per missing shape";
        ++refused;
        continue;
      }
      ASSERT_TRUE(binary) << what << ": " << ir::to_string(errors);
      if (fp8) {
        EXPECT_NE(binary->ptx.find("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"),
                  std::string::npos)
            << what;
        // 'a' from the shared tile through ldmatrix (no transpose); 'b' is row-major there, which
        // ldmatrix cannot transpose for 8-bit elements.
        EXPECT_NE(binary->ptx.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos)
            << what;
        EXPECT_EQ(binary->ptx.find(".trans"), std::string::npos) << what;
      } else {
        EXPECT_NE(binary->ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos) << what;
        // Fragments come from the shared tiles through ldmatrix (A as is, B transposed).
        EXPECT_NE(binary->ptx.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos)
            << what;
        EXPECT_NE(binary->ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"),
                  std::string::npos)
            << what;
      }
      // Pipelines (3 or 4 stages) fill the tiles with cp.async; the others load through
      // registers, 128 bits at a time where the variant loads 8 elements.
      const bool pipelined = kernel->name().find("_s3_") != std::string::npos ||
                             kernel->name().find("_s4_") != std::string::npos;
      EXPECT_EQ(binary->ptx.find("cp.async.cg.shared.global") != std::string::npos, pipelined)
          << what;
      EXPECT_EQ(binary->ptx.find("cp.async.wait_group 1;") != std::string::npos ||
                    binary->ptx.find("cp.async.wait_group 2;") != std::string::npos,
                pipelined)
          << what;
      if (!pipelined && kernel->name().find("_v8") != std::string::npos) {
        EXPECT_NE(binary->ptx.find("ld.global.v4.u32"), std::string::npos) << what;
      }
      std::string report = test::ptxas_verbose(binary->ptx, arch);
      EXPECT_THAT(report, ::testing::HasSubstr("0 bytes spill stores, 0 bytes spill loads"))
          << what << "\n"
          << report;
      size_t at = report.find("Used ");
      std::cout << "[          ] " << what << ": "
                << (at == std::string::npos ? report
                                            : report.substr(at, report.find('\n', at) - at))
                << "\n";
      ++compiled;
    }
  EXPECT_EQ(compiled + refused, 2 * module->kernels().size());
  // The two wave64 variants on both archs, and the fp8 ones on sm_80.
  EXPECT_EQ(refused, 4u + examples::gemm_fp8_variants().size());
}

TEST(Gemm, wave64_variants_compile_to_mfma_for_gfx90a) {
  std::string why;
  if (codegen::hiprtc_version(&why).empty())
    GTEST_SKIP() << why;
  auto module = gemm_kernels();
  size_t compiled = 0;
  for (const auto &kernel : module->kernels()) {
    std::vector<ir::Diagnostic> errors;
    if (kernel->name().find("_sg64") == std::string::npos) { // NVIDIA's: refused on wave64
      EXPECT_FALSE(codegen::compile_hip(*kernel, {"gfx90a"}, errors)) << kernel->name();
      EXPECT_THAT(
          ir::to_string(errors),
          ::testing::HasSubstr("needs subgroups of 32 invocations (its subgroup_size "
                               "attribute), which target 'hip:gfx90a' does not support (its "
                               "subgroups have 64"));
      continue;
    }
    auto binary = codegen::compile_hip(*kernel, {"gfx90a"}, errors);
    ASSERT_TRUE(binary) << kernel->name() << ": " << ir::to_string(errors);
    ASSERT_EQ(binary->code_objects.size(), 1u);
    // The products are MFMA instructions in the code object (llvm-objdump disassembles it).
    std::string disassembly;
    test::run_on_temporary_file(binary->code_objects[0].bytes,
                                std::string("'") + CUBECC_LLVM_OBJDUMP + "' -d --mcpu=gfx90a ", "",
                                disassembly);
    EXPECT_THAT(disassembly, ::testing::HasSubstr("v_mfma_f32_16x16x16")) << kernel->name();
    ++compiled;
  }
  EXPECT_EQ(compiled, 2u); // f16 and bf16
}

TEST(Gemm, the_spirv_writer_refuses_it_naming_the_kernel) {
  auto module = gemm_kernels();
  const ir::Kernel &kernel = *module->kernels().front();
  std::vector<ir::Diagnostic> errors;
  EXPECT_FALSE(codegen::emit_spirv(kernel, codegen::TargetFeatures::vulkan_baseline(), errors));
  std::string text = ir::to_string(errors);
  EXPECT_THAT(text, ::testing::HasSubstr(kernel.name()));
  EXPECT_THAT(text,
              ::testing::HasSubstr("needs matrix ops, which target 'vulkan' does not support"));
  // One error for the matrix ops, not one per op; the other says lavapipe's subgroups are not
  // the 32 the kernel requires.
  EXPECT_EQ(errors.size(), 2u) << text;
  EXPECT_THAT(text, ::testing::HasSubstr("needs subgroups of 32 invocations"));
  EXPECT_THAT(text, ::testing::HasSubstr("lavapipe offers no cooperative matrices"));
}

// For an NVIDIA GPU under Vulkan (VK_NV_cooperative_matrix, f16 operands), every f16 variant of
// warp size is written as cooperative matrices and passes spirv-val; bf16 and fp8 (no SPIR-V type
// in 1.5) and the wave64 variants are refused by name. Running them needs such a GPU.
TEST(Gemm, f16_variants_write_cooperative_matrix_spirv_for_vulkan_nvidia) {
  auto module = gemm_kernels();
  const codegen::TargetFeatures nvidia = codegen::TargetFeatures::vulkan_nvidia();
  size_t written = 0, refused = 0;
  for (const auto &kernel : module->kernels()) {
    std::vector<ir::Diagnostic> errors;
    auto spirv = codegen::emit_spirv(*kernel, nvidia, errors);
    const bool f16 = kernel->name().starts_with("gemm_f16_");
    const bool wave64 = kernel->name().find("_sg64") != std::string::npos;
    if (!f16 || wave64) {
      EXPECT_FALSE(spirv) << kernel->name();
      std::string text = ir::to_string(errors);
      EXPECT_THAT(text, ::testing::HasSubstr(kernel->name()));
      EXPECT_THAT(text, ::testing::HasSubstr("which target 'vulkan:nvidia' does not support"));
      if (!wave64) {
        EXPECT_THAT(text, ::testing::HasSubstr("VK_NV_cooperative_matrix has f16 operands"));
      }
      ++refused;
      continue;
    }
    ASSERT_TRUE(spirv) << kernel->name() << ": " << ir::to_string(errors);
    EXPECT_EQ(codegen::validate_spirv(spirv->words), "") << kernel->name();
    std::string assembly = codegen::disassemble_spirv(spirv->words);
    EXPECT_THAT(assembly, ::testing::HasSubstr("OpCooperativeMatrixMulAddNV")) << kernel->name();
    EXPECT_THAT(assembly, ::testing::HasSubstr("OpCooperativeMatrixLoadNV")) << kernel->name();
    EXPECT_THAT(assembly, ::testing::HasSubstr("OpCooperativeMatrixStoreNV")) << kernel->name();
    ++written;
  }
  EXPECT_EQ(written + refused, module->kernels().size());
  EXPECT_GE(written, examples::gemm_variants().size() - 2); // every f16 variant but wave64
}

} // namespace
