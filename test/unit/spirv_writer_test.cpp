//===- spirv_writer_test.cpp - The SPIR-V writer: every module validates, refusals are clear -===//
//
// Every valid .cir file of the repository (the op-by-op lit inputs cover every op and type) and
// every example kernel is written at -O0 and -O2 and checked with the SPIRV-Tools validator in
// process. A kernel may only be refused for a feature the target lacks, with a message naming the
// kernel, the op and the feature; each refusal rule is also tested on its own. Running the modules
// is the e2e suite's job (test/e2e).
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/spirv.h"
#include "cubecc/dsl/registry.h"
#include "cubecc/passes/pass_manager.h"
#include "spirv_test_support.h"
#include "test_support.h"

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace cubecc;

namespace {

namespace fs = std::filesystem;

void optimize(ir::Module &module, int level) {
  auto errors = passes::optimize(module, level);
  ASSERT_TRUE(errors.empty()) << ir::to_string(errors);
}

/// Writes every kernel of `module`; returns how many were written (validated) and appends the
/// refusals' messages. A module that fails validation fails the test.
size_t write_all(const ir::Module &module, const std::string &what,
                 const codegen::TargetFeatures &features, std::vector<std::string> &refusals) {
  size_t written = 0;
  for (const auto &kernel : module.kernels()) {
    std::vector<ir::Diagnostic> errors;
    auto spirv = codegen::emit_spirv(*kernel, features, errors);
    if (!spirv) {
      EXPECT_FALSE(errors.empty())
          << what << ": kernel " << kernel->name() << " refused without a message";
      for (const ir::Diagnostic &e : errors) {
        EXPECT_NE(e.message.find("target '"), std::string::npos)
            << what << ": kernel " << kernel->name() << " failed for another reason:\n"
            << e.str();
        EXPECT_NE(e.message.find(kernel->name()), std::string::npos) << e.str();
        refusals.push_back(e.str());
      }
      continue;
    }
    std::string problems = codegen::validate_spirv(spirv->words);
    EXPECT_EQ(problems, "") << what << ": kernel " << kernel->name() << ":\n"
                            << codegen::disassemble_spirv(spirv->words);
    ++written;
  }
  return written;
}

std::unique_ptr<ir::Module> parse_file(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  ir::ParseResult r = ir::parse_module(text.str(), path.string());
  if (!r.module || !ir::verify(*r.module, &r.source_map).empty())
    return nullptr; // inputs of must-fail lit tests
  return std::move(r.module);
}

/// Calls `f` with the path of every .cir file under test/lit and examples/ir.
template <class F> void for_each_cir_file(F &&f) {
  for (const char *dir : {"test/lit", "examples/ir"})
    for (const auto &entry : fs::recursive_directory_iterator(fs::path(CUBECC_SOURCE_DIR) / dir))
      if (entry.path().extension() == ".cir")
        f(entry.path());
}

TEST(SpirvWriter, every_valid_cir_file_of_the_repository_writes_valid_spirv) {
  size_t written = 0, files = 0;
  std::vector<std::string> refusals;
  for_each_cir_file([&](const fs::path &path) {
    for (int level : {0, 2}) {
      auto module = parse_file(path);
      if (!module)
        continue;
      files += level == 0;
      optimize(*module, level);
      written += write_all(*module, path.string() + " -O" + std::to_string(level),
                           codegen::TargetFeatures::vulkan_baseline(), refusals);
    }
  });
  EXPECT_GE(files, 20u);
  EXPECT_GE(written, 100u) << "too few kernels were written: the inputs are not found?";
  // f64 transcendentals (GLSL.std.450 has none), 8/16-bit and bf16 atomics, f64 atomics,
  // shared memory over 32 KiB, matrix ops (lavapipe has no cooperative matrices) and a required
  // subgroup size other than lavapipe's are the only refusals on lavapipe's feature set.
  for (const std::string &r : refusals)
    EXPECT_TRUE(
        r.find("on f64") != std::string::npos || r.find("atomics on") != std::string::npos ||
        r.find("bytes of shared memory") != std::string::npos ||
        r.find("needs matrix ops, which target 'vulkan' does not support") != std::string::npos ||
        r.find("needs subgroups of 32 invocations (its subgroup_size attribute), which target "
               "'vulkan' does not support") != std::string::npos)
        << r;
}

// The .cir files with matrix ops, for an NVIDIA GPU (VK_NV_cooperative_matrix's f16 shapes):
// what SPIR-V can hold is written and validates; the rest (bf16 and fp8 fragments, shapes the
// target lacks, wave64 subgroups) is refused with the target's name.
TEST(SpirvWriter, matrix_kernels_write_valid_cooperative_matrix_spirv_for_vulkan_nvidia) {
  size_t written = 0, files = 0;
  std::vector<std::string> refusals;
  for_each_cir_file([&](const fs::path &path) {
    auto module = parse_file(path);
    if (!module || ir::to_string(*module).find("matrix.") == std::string::npos)
      return;
    ++files;
    optimize(*module, 2);
    written +=
        write_all(*module, path.string(), codegen::TargetFeatures::vulkan_nvidia(), refusals);
  });
  EXPECT_GE(files, 3u);
  EXPECT_GE(written, 5u);
  for (const std::string &r : refusals)
    EXPECT_NE(r.find("which target 'vulkan:nvidia' does not support"), std::string::npos) << r;
}

TEST(SpirvWriter, every_example_kernel_writes_valid_spirv_at_O0_and_O3) {
  ASSERT_FALSE(dsl::registered_kernels().empty());
  for (int level : {0, 3}) {
    ir::Module module;
    std::vector<ir::Diagnostic> errors;
    for (const auto &k : dsl::registered_kernels())
      k.trace(module, k, errors);
    ASSERT_TRUE(errors.empty()) << ir::to_string(errors);
    optimize(module, level);
    std::vector<std::string> refusals;
    EXPECT_EQ(write_all(module, "examples -O" + std::to_string(level),
                        codegen::TargetFeatures::vulkan_baseline(), refusals),
              module.kernels().size());
    EXPECT_TRUE(refusals.empty());
  }
}

/// The first error of writing the only kernel of `text` for `features`.
std::string refusal(std::string_view text, const codegen::TargetFeatures &features) {
  auto module = test::parse_valid(text);
  if (!module)
    return "<invalid test input>";
  std::vector<ir::Diagnostic> errors;
  auto spirv = codegen::emit_spirv(*module->kernels()[0], features, errors);
  if (spirv)
    return "";
  return errors.empty() ? "<refused without a message>" : errors.front().str();
}

TEST(SpirvWriter, refuses_what_the_target_lacks_naming_kernel_op_and_feature) {
  codegen::TargetFeatures lavapipe = codegen::TargetFeatures::vulkan_baseline();
  // bf16 is emulated (16-bit storage, f32 registers); without 16-bit storage it is refused.
  const char *bf16_kernel = R"(module @m {
  kernel @k(%b: buffer<bf16, readwrite>) {
    %i = local_index : u32
    %v = load %b, %i : bf16
    store %b, %i, %v
    return
  }
})";
  EXPECT_EQ(refusal(bf16_kernel, lavapipe), "");
  codegen::TargetFeatures no_16bit = lavapipe;
  no_16bit.float16 = false;
  EXPECT_EQ(refusal(bf16_kernel, no_16bit),
            "error: kernel 'k': parameter 0 has type buffer<bf16, readwrite>, which target "
            "'vulkan' does not support");
  EXPECT_EQ(refusal(R"(module @m {
  kernel @k(%b: buffer<f64, readwrite>) {
    %i = local_index : u32
    %v = load %b, %i : f64
    %e = exp %v : f64 loc("k.cpp":7:3)
    store %b, %i, %e
    return
  }
})",
                    lavapipe),
            "k.cpp:7:3: error: kernel 'k': op 'exp' needs 'exp' on f64 (GLSL.std.450 defines it "
            "for 16- and 32-bit floats only; compute in f32 with an explicit cast), which target "
            "'vulkan' does not support");
  EXPECT_EQ(refusal(R"(module @m {
  kernel @k(%b: buffer<u16, readwrite>) {
    %i = local_index : u32
    %one = const 1 : u16
    %old = atomic.add %b, %i, %one : u16
    return
  }
})",
                    lavapipe),
            "error: kernel 'k': op 'atomic.add' needs atomics on u16 (Vulkan has 32- and 64-bit "
            "atomics only), which target 'vulkan' does not support");

  const char *i64_kernel = R"(module @m {
  kernel @k(%b: buffer<i64, readwrite>) {
    %i = local_index : u32
    %v = load %b, %i : i64
    %s = subgroup.sum %v : i64
    store %b, %i, %s
    return
  }
})";
  EXPECT_EQ(refusal(i64_kernel, lavapipe), "");
  codegen::TargetFeatures no_int64 = lavapipe;
  no_int64.int64 = false;
  no_int64.target = "vulkan (test device)";
  EXPECT_EQ(refusal(i64_kernel, no_int64),
            "error: kernel 'k': op 'load' uses 64-bit integers (shaderInt64), which target "
            "'vulkan (test device)' does not support");
  codegen::TargetFeatures no_subgroups = lavapipe;
  no_subgroups.subgroup_arithmetic = false;
  EXPECT_EQ(refusal(i64_kernel, no_subgroups),
            "error: kernel 'k': op 'subgroup.sum' needs subgroup arithmetic "
            "(VK_SUBGROUP_FEATURE_ARITHMETIC_BIT), which target 'vulkan' does not support");

  EXPECT_EQ(refusal(R"(module @m {
  kernel @k(%b: buffer<f32, readwrite>) workgroup(64, 1, 1) {
    %s = shared.alloc : shared<f32, 9000>
    %i = local_index : u32
    %v = load %b, %i : f32
    store %s, %i, %v
    return
  }
})",
                    lavapipe),
            "error: kernel 'k' uses 36000 bytes of shared memory; target 'vulkan' has 32768 (the "
            "largest array, here, has 36000 bytes): use smaller tiles or fewer arrays, or a target "
            "with more (CUDA sm_90 has 227 KiB)");
}

// A bundle records what a module relies on (docs/environments.md): the target's flags, and a
// fused fma, a subgroup size or layout and matrix shapes only where the code depends on them, so
// SPIR-V written for one Vulkan target runs on every device that has what it uses.
TEST(SpirvWriter, a_module_relies_only_on_the_features_its_code_depends_on) {
  const codegen::TargetFeatures lavapipe = codegen::TargetFeatures::vulkan_baseline();
  const codegen::TargetFeatures nvidia = codegen::TargetFeatures::vulkan_nvidia();
  codegen::TargetFeatures plain = test::spirv_relies_on(
      test::f32_kernel_text("workgroup(64, 1, 1)", "    %r = add %v, %v : f32\n"), nvidia);
  EXPECT_FALSE(plain.fused_fma);
  EXPECT_EQ(plain.subgroup_size, 0u);
  EXPECT_FALSE(plain.linear_subgroups);
  EXPECT_EQ(plain.matrix_shapes, 0u);
  EXPECT_FALSE(plain.float64); // no Float64 capability
  EXPECT_FALSE(plain.int64);
  EXPECT_TRUE(plain.float32_atomics); // no capability shows it: the target's
  EXPECT_EQ(plain.unmet_on(lavapipe), "");
  EXPECT_EQ(plain.unmet_on(nvidia), "");
  // A GPU without f64 (Intel Arc, Apple through MoltenVK) takes it, not a kernel that uses f64.
  codegen::TargetFeatures no_f64 = nvidia;
  no_f64.float64 = false;
  EXPECT_EQ(plain.unmet_on(no_f64), "");
  const std::string wide = test::f32_kernel_text(
      "workgroup(64, 1, 1)", "    %w = cast %v : f64\n    %r = cast %w : f32\n");
  codegen::TargetFeatures f64 = test::spirv_relies_on(wide, lavapipe);
  EXPECT_TRUE(f64.float64);
  EXPECT_EQ(f64.unmet_on(no_f64), "f64");

  const std::string fma =
      test::f32_kernel_text("workgroup(64, 1, 1)", "    %r = fma %v, %v, %v : f32\n");
  EXPECT_EQ(test::spirv_relies_on(fma, nvidia).unmet_on(lavapipe), "a fused fma");
  EXPECT_EQ(test::spirv_relies_on(fma, lavapipe).unmet_on(nvidia),
            ""); // computed exactly through f64

  // One row of invocations: subgroups are consecutive on every device.
  const std::string row =
      test::f32_kernel_text("workgroup(64, 1, 1)", "    %r = subgroup.sum %v : f32\n");
  EXPECT_EQ(test::spirv_relies_on(row, nvidia).unmet_on(lavapipe), "");
  EXPECT_EQ(test::spirv_relies_on(row, lavapipe).unmet_on(nvidia), "");
  // Two rows: NVIDIA's subgroups are linear; lavapipe's are x rows of 8.
  const std::string rows =
      test::f32_kernel_text("workgroup(32, 2, 1)", "    %r = subgroup.sum %v : f32\n");
  EXPECT_EQ(test::spirv_relies_on(rows, nvidia).unmet_on(lavapipe),
            "subgroups of consecutive invocations");
  EXPECT_EQ(test::spirv_relies_on(rows, lavapipe).unmet_on(nvidia),
            "subgroups of 8 invocations (the device's have 32)");
  // A required subgroup size is relied on wherever the kernel runs.
  const std::string sized = test::f32_kernel_text(
      "workgroup(64, 1, 1) attributes {subgroup_size = 32}", "    %r = subgroup.sum %v : f32\n");
  EXPECT_EQ(test::spirv_relies_on(sized, nvidia).subgroup_size, 32u);

  // Matrix ops: only the shape the kernel multiplies in.
  auto gemm = parse_file(fs::path(CUBECC_SOURCE_DIR) / "test/lit/codegen/matrix-spirv.cir");
  ASSERT_TRUE(gemm);
  std::vector<ir::Diagnostic> errors;
  auto spirv = codegen::emit_spirv(*gemm->kernels()[0], nvidia, errors);
  ASSERT_TRUE(spirv) << ir::to_string(errors);
  EXPECT_EQ(ir::matrix_shapes_text(spirv->relies_on.matrix_shapes), "16x16x16 f16->f32");
  EXPECT_EQ(spirv->relies_on.unmet_on(lavapipe), "the matrix shapes 16x16x16 f16->f32");
  // A fragment without a matrix.mma needs a device that has its type all the same.
  codegen::TargetFeatures fill = test::spirv_relies_on(R"(module @m {
  kernel @k(%c: buffer<f32, readwrite>) workgroup(32, 1, 1) {
    %z = const 0 : f32
    %m = matrix.fill %z : matrix<subgroup, acc, f32, 16, 8>
    %zero = const 0 : u32
    %ld = const 8 : u32
    matrix.store %c, %zero, %ld, %m
    return
  }
})",
                                                       nvidia);
  EXPECT_EQ(ir::matrix_shapes_text(fill.matrix_shapes), "16x8x16 f16->f32");
}

// The fingerprint a bundle stores reads back to the same features; anything else is refused.
TEST(TargetFeatures, fingerprints_read_back_and_nothing_else_does) {
  for (const codegen::TargetFeatures &f :
       {codegen::TargetFeatures::vulkan_baseline(), codegen::TargetFeatures::vulkan_nvidia(),
        codegen::TargetFeatures::metal_baseline()}) {
    std::optional<codegen::TargetFeatures> back =
        codegen::TargetFeatures::from_fingerprint(f.fingerprint());
    ASSERT_TRUE(back) << f.fingerprint();
    EXPECT_EQ(back->fingerprint(), f.fingerprint());
    EXPECT_EQ(back->unmet_on(f), "");
    EXPECT_EQ(f.unmet_on(*back), "");
  }
  const std::string good = codegen::TargetFeatures::vulkan_nvidia().fingerprint();
  for (std::string bad :
       {std::string(), good + ".", good + "x", "2" + good.substr(1), good.substr(0, 19),
        good.substr(0, good.rfind('.')), good.substr(0, good.rfind('.') + 1) + "01024",
        good.substr(0, good.rfind('.') + 1) + "-1", good.substr(0, good.rfind('.') + 1) + "+64",
        good.substr(0, good.rfind('.') + 1) + "4294967296", good.substr(0, 20) + ".8.x"})
    EXPECT_FALSE(codegen::TargetFeatures::from_fingerprint(bad)) << bad;
  // What features ask of a device, in the same words.
  EXPECT_NE(codegen::TargetFeatures::vulkan_nvidia().needs().find(
                "a fused fma; signed zeros, infinities and NaNs kept; subgroup arithmetic; "),
            std::string::npos);
  EXPECT_NE(codegen::TargetFeatures::vulkan_nvidia().needs().find(
                "; subgroups of 32 invocations; the matrix shapes 16x16x16 f16->f32"),
            std::string::npos);
  // What is missing is named, all of it.
  codegen::TargetFeatures device = codegen::TargetFeatures::vulkan_baseline();
  device.float64 = false;
  EXPECT_EQ(codegen::TargetFeatures::vulkan_nvidia().unmet_on(device),
            "f64; a fused fma; subgroups of consecutive invocations; subgroups of 32 invocations "
            "(the device's have 8); the matrix shapes " +
                ir::matrix_shapes_text(codegen::TargetFeatures::vulkan_nvidia().matrix_shapes));
}

TEST(SpirvWriter, a_parameter_block_over_the_push_constant_limit_moves_to_a_buffer) {
  // 40 u32 scalars: 160 bytes, over lavapipe's 128.
  std::string params, sum = "    %acc0 = const 0 : u32\n";
  for (int i = 0; i < 40; ++i) {
    params += ", %s" + std::to_string(i) + ": u32";
    sum += "    %acc" + std::to_string(i + 1) + " = add %acc" + std::to_string(i) + ", %s" +
           std::to_string(i) + " : u32\n";
  }
  auto module = test::parse_valid("module @m {\n  kernel @k(%out: buffer<u32, readwrite>" + params +
                                  ") {\n    %i = local_index : u32\n" + sum +
                                  "    store %out, %i, %acc40\n    return\n  }\n}\n");
  ASSERT_TRUE(module);
  std::vector<ir::Diagnostic> errors;
  auto spirv = codegen::emit_spirv(*module->kernels()[0],
                                   codegen::TargetFeatures::vulkan_baseline(), errors);
  ASSERT_TRUE(spirv) << ir::to_string(errors);
  EXPECT_TRUE(spirv->abi.param_block_in_buffer);
  EXPECT_EQ(spirv->abi.param_block_bytes, 160u);
  EXPECT_EQ(codegen::validate_spirv(spirv->words), "");
  std::string text = codegen::disassemble_spirv(spirv->words);
  EXPECT_NE(text.find("OpDecorate %parameters Binding 1"), std::string::npos) << text;
}

TEST(SpirvWriter, glsl_and_msl_come_from_spirv_cross) {
  auto module = test::parse_valid(R"(module @m {
  kernel @scale(%x: buffer<f32, readwrite>, %a: f32) workgroup(64, 1, 1) {
    %i = global_id : u32x3
    %i0 = vec.extract %i {lane = 0} : u32
    %v = load %x, %i0 : f32
    %r = mul %v, %a : f32
    store %x, %i0, %r
    return
  }
})");
  ASSERT_TRUE(module);
  std::vector<ir::Diagnostic> errors;
  auto spirv = codegen::emit_spirv(*module->kernels()[0],
                                   codegen::TargetFeatures::vulkan_baseline(), errors);
  ASSERT_TRUE(spirv);
  std::string error;
  auto glsl = codegen::spirv_to_glsl(spirv->words, error);
  ASSERT_TRUE(glsl) << error;
  EXPECT_NE(glsl->find("layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;"),
            std::string::npos)
      << *glsl;
  EXPECT_NE(glsl->find("buffer x_buffer"), std::string::npos) << *glsl;
  auto msl = codegen::spirv_to_msl(spirv->words, error);
  ASSERT_TRUE(msl) << error;
  EXPECT_NE(msl->find("kernel void main0("), std::string::npos) << *msl;
}

} // namespace

#include "random_ir.h"

namespace {

TEST(SpirvWriter, random_kernels_write_valid_spirv) {
  // Random control flow (ifs with results, loops with carried values, break and continue at any
  // depth), shared memory and subgroup operations: the structured control flow rules of SPIR-V.
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    for (int level : {0, 2}) {
      auto module = test::parse_valid(test::random_kernel(seed));
      ASSERT_TRUE(module);
      optimize(*module, level);
      std::vector<std::string> refusals;
      EXPECT_EQ(write_all(*module, "random kernel " + std::to_string(seed),
                          codegen::TargetFeatures::vulkan_baseline(), refusals),
                1u);
    }
  }
}

} // namespace

namespace {

TEST(SpirvWriter, every_example_kernel_cross_compiles_to_glsl_and_msl) {
  ir::Module module;
  std::vector<ir::Diagnostic> errors;
  for (const auto &k : dsl::registered_kernels())
    k.trace(module, k, errors);
  ASSERT_TRUE(errors.empty()) << ir::to_string(errors);
  optimize(module, 2);
  for (const auto &kernel : module.kernels()) {
    std::string error;
    auto vulkan = codegen::emit_spirv(*kernel, codegen::TargetFeatures::vulkan_baseline(), errors);
    ASSERT_TRUE(vulkan) << ir::to_string(errors);
    EXPECT_TRUE(codegen::spirv_to_glsl(vulkan->words, error)) << kernel->name() << ": " << error;
    auto metal = codegen::emit_spirv(*kernel, codegen::TargetFeatures::metal_baseline(), errors);
    ASSERT_TRUE(metal) << ir::to_string(errors);
    EXPECT_TRUE(codegen::spirv_to_msl(metal->words, error)) << kernel->name() << ": " << error;
  }
}

} // namespace
