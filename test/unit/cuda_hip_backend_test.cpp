//===- cuda_hip_backend_test.cpp - CUDA and HIP: every kernel through NVRTC, ptxas and hipRTC -===//
//
// Every example kernel, every valid .cir file of the repository and 100 random kernels, at -O2,
// are compiled by NVRTC to PTX (compute_80) and CUBIN (sm_80, sm_90), every PTX is assembled by
// the toolkit's standalone ptxas for sm_90, and the same kernels go through hipRTC for gfx90a.
// A kernel may only be refused for a feature the target lacks ("... does not support"). Compile
// errors carry the compiler's log at the user's location; architectures that NVRTC or comgr do
// not know are refused before the compiler sees them (hipRTC would crash on them).
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/cuda.h"
#include "cubecc/codegen/hip.h"
#include "cubecc/dsl/registry.h"
#include "cubecc/passes/pass_manager.h"
#include "random_ir.h"
#include "test_support.h"
#include "toolkit_support.h"

// Not public headers: the compile steps one at a time, and the log mapping.
#include "common/compiler_log.h"
#include "cuda/nvrtc_internal.h"
#include "hip/hiprtc_internal.h"

#include <gmock/gmock.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace cubecc;

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kCudaArchs = {"sm_80", "sm_90"};
const std::vector<std::string> kHipArchs = {"gfx90a"};

struct Counts {
  size_t compiled = 0;
  std::vector<std::string> refusals;
};

/// A refusal must be a feature the target lacks, named with the kernel.
void check_refusal(const std::string &what, const ir::Kernel &kernel,
                   const std::vector<ir::Diagnostic> &errors, Counts &counts) {
  ASSERT_FALSE(errors.empty()) << what << ": kernel " << kernel.name()
                               << " refused without a message";
  for (const ir::Diagnostic &e : errors) {
    EXPECT_NE(e.message.find("does not support"), std::string::npos)
        << what << ": kernel " << kernel.name() << " failed:\n"
        << e.str();
    counts.refusals.push_back(e.str());
  }
}

void compile_all_cuda(const ir::Module &module, const std::string &what, Counts &counts) {
  for (const auto &kernel : module.kernels()) {
    std::vector<ir::Diagnostic> errors;
    auto binary = codegen::compile_cuda(*kernel, kCudaArchs, errors);
    if (!binary) {
      check_refusal(what, *kernel, errors, counts);
      continue;
    }
    EXPECT_EQ(binary->ptx_arch, "compute_80");
    EXPECT_NE(binary->ptx.find(".target sm_80"), std::string::npos) << what;
    ASSERT_EQ(binary->cubins.size(), 2u) << what;
    for (const auto &cubin : binary->cubins)
      EXPECT_EQ(cubin.bytes.compare(0, 4,
                                    "\x7f"
                                    "ELF"),
                0)
          << what << " " << cubin.arch;
    std::string problems = test::ptxas(binary->ptx, what + ": kernel " + kernel->name());
    EXPECT_EQ(problems, "") << "\n" << binary->source.text << "\n" << binary->ptx;
    ++counts.compiled;
  }
}

void compile_all_hip(const ir::Module &module, const std::string &what, Counts &counts) {
  for (const auto &kernel : module.kernels()) {
    std::vector<ir::Diagnostic> errors;
    auto binary = codegen::compile_hip(*kernel, kHipArchs, errors);
    if (!binary) {
      check_refusal(what, *kernel, errors, counts);
      continue;
    }
    ASSERT_EQ(binary->code_objects.size(), 1u) << what;
    const std::string &elf = binary->code_objects[0].bytes;
    ASSERT_GE(elf.size(), 20u) << what;
    EXPECT_EQ(elf.compare(0, 4,
                          "\x7f"
                          "ELF"),
              0)
        << what;
    // e_machine (offset 18, little endian) is EM_AMDGPU (224).
    EXPECT_EQ(static_cast<unsigned char>(elf[18]) | static_cast<unsigned char>(elf[19]) << 8, 224)
        << what;
    ++counts.compiled;
  }
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

void optimize(ir::Module &module) {
  auto errors = passes::optimize(module, 2);
  ASSERT_TRUE(errors.empty()) << ir::to_string(errors);
}

std::unique_ptr<ir::Module> example_kernels() {
  auto module = std::make_unique<ir::Module>();
  std::vector<ir::Diagnostic> errors;
  for (const auto &k : dsl::registered_kernels())
    k.trace(*module, k, errors);
  EXPECT_TRUE(errors.empty()) << ir::to_string(errors);
  optimize(*module);
  return module;
}

/// Every valid .cir file of the repository at -O2, one module each.
std::vector<std::pair<std::string, std::unique_ptr<ir::Module>>> cir_files() {
  std::vector<std::pair<std::string, std::unique_ptr<ir::Module>>> out;
  for (const char *dir : {"test/lit", "examples/ir"})
    for (const auto &entry : fs::recursive_directory_iterator(fs::path(CUBECC_SOURCE_DIR) / dir)) {
      if (entry.path().extension() != ".cir")
        continue;
      if (auto module = parse_file(entry.path())) {
        optimize(*module);
        out.emplace_back(entry.path().string(), std::move(module));
      }
    }
  return out;
}

#define SKIP_WITHOUT_NVRTC()                                                                       \
  do {                                                                                             \
    std::string why;                                                                               \
    if (codegen::nvrtc_version(&why).empty())                                                      \
      GTEST_SKIP() << why;                                                                         \
  } while (0)
#define SKIP_WITHOUT_HIPRTC()                                                                      \
  do {                                                                                             \
    std::string why;                                                                               \
    if (codegen::hiprtc_version(&why).empty())                                                     \
      GTEST_SKIP() << why;                                                                         \
  } while (0)

// --- CUDA ---------------------------------------------------------------------------------------

TEST(CudaBackend, every_example_kernel_compiles_to_ptx_and_cubin_that_ptxas_accepts) {
  SKIP_WITHOUT_NVRTC();
  auto module = example_kernels();
  ASSERT_FALSE(module->kernels().empty());
  Counts counts;
  compile_all_cuda(*module, "examples -O2", counts);
  EXPECT_EQ(counts.compiled, module->kernels().size());
  std::cout << "[          ] " << counts.compiled << " example kernels through NVRTC and ptxas\n";
}

TEST(CudaBackend, matrix_gemms_compile_for_sm80_and_sm90_without_register_spills) {
  // Every matrix.mma shape in the GEMM of test_support.h, through NVRTC and `ptxas -v` for each
  // arch that has it (fp8 from sm_89, 8-bit integers from sm_80); the registers and spills ptxas
  // reports are printed.
  SKIP_WITHOUT_NVRTC();
  size_t compiled = 0;
  for (const ir::MatrixShape &shape : ir::matrix_shapes())
    for (const std::string arch : {"sm_80", "sm_90"}) {
      std::string what = fmt::format("{} on {}", shape.str(), arch);
      auto module = test::parse_valid(test::matrix_gemm_ir(shape, /*b_col_major=*/true));
      ASSERT_TRUE(module);
      optimize(*module);
      std::vector<ir::Diagnostic> errors;
      auto binary =
          codegen::compile_cuda(*module->kernels()[0], {arch}, errors, codegen::CudaOutputs::Ptx);
      if (ir::is_storage_float(shape.a) && arch == "sm_80") {
        EXPECT_FALSE(binary) << what;
        EXPECT_THAT(ir::to_string(errors), ::testing::HasSubstr("does not support")) << what;
        continue;
      }
      ASSERT_TRUE(binary) << what << ": " << ir::to_string(errors);
      EXPECT_NE(binary->ptx.find("mma.sync.aligned.m16n8k"), std::string::npos) << what;
      std::string report = test::ptxas_verbose(binary->ptx, arch);
      // Known defect: the f16 accumulator of 16x16x16 on sm_90 keeps its 8 halves in a 16-byte
      // stack frame (12 bytes of spills at 32 registers); sm_80 holds it in registers.
      bool known_spill = shape.accumulator == ir::Scalar::F16 && shape.n == 16 && arch == "sm_90";
      if (!known_spill)
        EXPECT_THAT(report, ::testing::HasSubstr("0 bytes spill stores, 0 bytes spill loads"))
            << what << "\n"
            << report;
      else
        EXPECT_THAT(report, ::testing::HasSubstr("Used ")) << what << "\n" << report;
      size_t at = report.find("Used ");
      std::cout << "[          ] " << what << ": "
                << (at == std::string::npos ? report : report.substr(at, report.find(',', at) - at))
                << "\n";
      ++compiled;
    }
  size_t fp8 = 0; // refused on sm_80
  for (const ir::MatrixShape &shape : ir::matrix_shapes())
    fp8 += ir::is_storage_float(shape.a);
  EXPECT_EQ(fp8, 8u);
  EXPECT_EQ(compiled, 2 * ir::matrix_shapes().size() - fp8);
}

TEST(CudaBackend, a_compile_makes_only_the_outputs_asked_for) {
  SKIP_WITHOUT_NVRTC();
  auto module = example_kernels();
  const ir::Kernel &kernel = *module->kernels().front();
  std::vector<ir::Diagnostic> errors;
  auto ptx = codegen::compile_cuda(kernel, {"sm_90"}, errors, codegen::CudaOutputs::Ptx);
  ASSERT_TRUE(ptx) << ir::to_string(errors);
  EXPECT_NE(ptx->ptx.find(".target sm_90"), std::string::npos);
  EXPECT_TRUE(ptx->cubins.empty());
  auto cubin = codegen::compile_cuda(kernel, {"sm_90"}, errors, codegen::CudaOutputs::Cubins);
  ASSERT_TRUE(cubin) << ir::to_string(errors);
  EXPECT_TRUE(cubin->ptx.empty());
  ASSERT_EQ(cubin->cubins.size(), 1u);
  EXPECT_EQ(cubin->cubins[0].arch, "sm_90");
  EXPECT_EQ(cubin->cubins[0].bytes.compare(0, 4,
                                           "\x7f"
                                           "ELF"),
            0);
}

TEST(CudaBackend, every_valid_cir_file_compiles_to_ptx_and_cubin_that_ptxas_accepts) {
  SKIP_WITHOUT_NVRTC();
  Counts counts;
  size_t files = 0;
  for (auto &[path, module] : cir_files()) {
    ++files;
    compile_all_cuda(*module, path + " -O2", counts);
  }
  EXPECT_GE(files, 20u);
  EXPECT_GE(counts.compiled, 50u) << "too few kernels were compiled: the inputs are not found?";
  std::cout << "[          ] " << counts.compiled << " kernels of " << files
            << " .cir files through NVRTC and ptxas, " << counts.refusals.size() << " refused\n";
  for (const std::string &r : counts.refusals)
    std::cout << "[          ]   " << r << "\n";
}

TEST(CudaBackend, random_kernels_compile_to_ptx_and_cubin_that_ptxas_accepts) {
  SKIP_WITHOUT_NVRTC();
  Counts counts;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    auto module = test::parse_valid(test::random_kernel(seed));
    ASSERT_TRUE(module);
    optimize(*module);
    compile_all_cuda(*module, "random kernel " + std::to_string(seed), counts);
  }
  EXPECT_EQ(counts.compiled, 100u);
}

TEST(CudaBackend, features_and_architectures) {
  codegen::TargetFeatures f = codegen::cuda_features("sm_90a");
  EXPECT_EQ(f.target, "cuda:sm_90a");
  EXPECT_EQ(f.subgroup_size, 32u);
  EXPECT_TRUE(f.linear_subgroups && f.fused_fma && f.float64_atomic_add && f.bfloat16);
  EXPECT_EQ(f.max_shared_bytes, 232448u); // 227 KiB with the opt-in
  EXPECT_EQ(codegen::cuda_features("sm_80").max_shared_bytes, 166912u);
  EXPECT_EQ(codegen::cuda_features("sm_89").max_shared_bytes, 101376u);
  EXPECT_EQ(f.max_param_block_bytes, 4096u);
  EXPECT_EQ(f.max_workgroup_size[2], 64u);
  SKIP_WITHOUT_NVRTC();
  EXPECT_EQ(codegen::default_cuda_archs(),
            (std::vector<std::string>{"sm_80", "sm_90", "sm_90a", "sm_100", "sm_120"}));
  EXPECT_EQ(codegen::cuda_detail::ptx_arch({"sm_90a", "sm_100", "sm_80"}), "compute_80");
  EXPECT_EQ(codegen::cuda_detail::ptx_arch({"sm_90a"}), "compute_90");
  auto refused = [](const std::string &arch) {
    std::vector<ir::Diagnostic> errors;
    EXPECT_FALSE(codegen::cuda_detail::check_cuda_archs({"sm_90", arch}, errors));
    return errors.empty() ? std::string("<accepted>") : errors.front().str();
  };
  EXPECT_EQ(refused("sm_75"), "error: target 'cuda:sm_75': cubecc compiles for sm_80 and newer");
  EXPECT_EQ(refused("compute_90"),
            "error: target 'cuda:compute_90': 'compute_90' is not a CUDA architecture (sm_NN, "
            "e.g. sm_80, sm_90; arch-specific sm_NNa from sm_90a; family sm_NNf from sm_100f)");
  for (const char *arch : {"sm_80a", "sm_89a", "sm_90f", "sm_090", "sm_100x"})
    EXPECT_NE(refused(arch).find("is not a CUDA architecture"), std::string::npos) << arch;
  EXPECT_TRUE(codegen::cuda_detail::parse_cuda_arch("sm_100f").has_value());
  EXPECT_EQ(refused("sm_990").find("error: target 'cuda:sm_990': NVRTC " +
                                   codegen::nvrtc_version() +
                                   " does not know sm_990 (it knows: sm_"),
            0u)
      << refused("sm_990");
  std::vector<ir::Diagnostic> errors;
  EXPECT_FALSE(codegen::cuda_detail::check_cuda_archs({}, errors));
}

TEST(CudaBackend, a_compile_error_reports_nvrtcs_log_at_the_users_line) {
  SKIP_WITHOUT_NVRTC();
  codegen::CSource source;
  source.entry = "entry";
  source.abi.name = "broken";
  source.text = "#include <cuda_fp16.h>\n"
                "#line 7 \"user.cpp\"\n"
                "extern \"C\" __global__ void entry(float *p) {\n"
                "  p[0] = __half2float(__float2half(p[0])) + undefined_x;\n"
                "}\n";
  std::vector<ir::Diagnostic> errors;
  EXPECT_FALSE(codegen::cuda_detail::nvrtc_compile(source, "sm_90", errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].file, "user.cpp");
  EXPECT_EQ(errors[0].line, 8u);
  EXPECT_EQ(errors[0].message, "kernel 'broken': NVRTC failed for target 'cuda:sm_90': error: "
                               "identifier \"undefined_x\" is undefined");
  ASSERT_FALSE(errors[0].notes.empty());
  EXPECT_EQ(errors[0].notes.back().find("NVRTC log:\nuser.cpp(8): error: identifier "
                                        "\"undefined_x\" is undefined"),
            0u)
      << errors[0].notes.back();

  // Without #line: the `// file:line:col` comment nearest above the failing line.
  source.text = "extern \"C\" __global__ void entry(float *p) {\n"
                "  float a = p[0]; // k.cpp:12:3\n"
                "  p[1] = a +\n"
                "         undefined_y;\n"
                "}\n";
  errors.clear();
  EXPECT_FALSE(codegen::cuda_detail::nvrtc_compile(source, "compute_80", errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].str().substr(0, 20), "k.cpp:12:3: error: k");
  EXPECT_NE(errors[0].str().find("note: at line 4 of the generated CUDA source"), std::string::npos)
      << errors[0].str();
}

TEST(CudaBackend, ptx_and_cubin_of_a_valid_source) {
  SKIP_WITHOUT_NVRTC();
  codegen::CSource source;
  source.entry = "entry";
  source.abi.name = "scale";
  source.text = "#include <cuda_bf16.h>\n"
                "extern \"C\" __global__ void entry(float *p, unsigned long long n) {\n"
                "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                "  if (i < n) p[i] = __bfloat162float(__float2bfloat16(p[i] * 3.0f + 1.0f));\n"
                "}\n";
  std::vector<ir::Diagnostic> errors;
  auto binary = codegen::cuda_detail::compile_cuda_source(source, {"sm_90", "sm_80"}, errors);
  ASSERT_TRUE(binary) << ir::to_string(errors);
  EXPECT_EQ(binary->ptx_arch, "compute_80");
  // --fmad=false: the multiply and the add stay two instructions.
  EXPECT_EQ(binary->ptx.find("fma.rn.f32"), std::string::npos) << binary->ptx;
  EXPECT_NE(binary->ptx.find("mul.rn.f32"), std::string::npos) << binary->ptx;
  ASSERT_EQ(binary->cubins.size(), 2u);
  EXPECT_EQ(binary->cubins[0].arch, "sm_90");
  EXPECT_EQ(test::ptxas(binary->ptx, "scale"), "");
}

// --- HIP ----------------------------------------------------------------------------------------

TEST(HipBackend, matrix_gemms_compile_to_mfma_for_gfx90a_or_are_refused_by_shape) {
  SKIP_WITHOUT_HIPRTC();
  size_t compiled = 0;
  for (const ir::MatrixShape &shape : ir::matrix_shapes()) {
    auto module = test::parse_valid(test::matrix_gemm_ir(shape, /*b_col_major=*/false));
    ASSERT_TRUE(module);
    optimize(*module);
    std::vector<ir::Diagnostic> errors;
    auto binary = codegen::compile_hip(*module->kernels()[0], {"gfx90a"}, errors);
    bool mfma =
        shape.m == 16 && shape.n == 16 && shape.k == 16 && shape.accumulator == ir::Scalar::F32;
    if (!mfma) {
      EXPECT_FALSE(binary);
      EXPECT_THAT(ir::to_string(errors), ::testing::HasSubstr("does not support (it has "));
      continue;
    }
    ASSERT_TRUE(binary) << ir::to_string(errors);
    ASSERT_EQ(binary->code_objects.size(), 1u);
    ++compiled;
  }
  EXPECT_EQ(compiled, 2u); // f16 and bf16 16x16x16 -> f32
}

TEST(HipBackend, every_example_kernel_compiles_for_gfx90a) {
  SKIP_WITHOUT_HIPRTC();
  auto module = example_kernels();
  Counts counts;
  compile_all_hip(*module, "examples -O2", counts);
  EXPECT_EQ(counts.compiled, module->kernels().size());
  std::cout << "[          ] " << counts.compiled << " example kernels through hipRTC\n";
}

TEST(HipBackend, every_valid_cir_file_compiles_for_gfx90a) {
  SKIP_WITHOUT_HIPRTC();
  Counts counts;
  size_t files = 0;
  for (auto &[path, module] : cir_files()) {
    ++files;
    compile_all_hip(*module, path + " -O2", counts);
  }
  EXPECT_GE(counts.compiled, 50u) << "too few kernels were compiled: the inputs are not found?";
  std::cout << "[          ] " << counts.compiled << " kernels of " << files
            << " .cir files through hipRTC, " << counts.refusals.size() << " refused\n";
  for (const std::string &r : counts.refusals)
    std::cout << "[          ]   " << r << "\n";
}

TEST(HipBackend, random_kernels_compile_for_gfx90a) {
  SKIP_WITHOUT_HIPRTC();
  Counts counts;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    auto module = test::parse_valid(test::random_kernel(seed));
    ASSERT_TRUE(module);
    optimize(*module);
    compile_all_hip(*module, "random kernel " + std::to_string(seed), counts);
  }
  EXPECT_EQ(counts.compiled, 100u);
}

TEST(HipBackend, features_and_architectures) {
  codegen::TargetFeatures f = codegen::hip_features("gfx90a");
  EXPECT_EQ(f.target, "hip:gfx90a");
  EXPECT_EQ(f.subgroup_size, 64u);
  EXPECT_TRUE(f.linear_subgroups && f.fused_fma && f.float32_atomic_add && f.float64);
  EXPECT_EQ(f.max_shared_bytes, 65536u);
  EXPECT_EQ(codegen::hip_features("gfx942").subgroup_size, 64u);
  EXPECT_EQ(codegen::hip_features("gfx1030").subgroup_size, 32u);
  SKIP_WITHOUT_HIPRTC();
  EXPECT_TRUE(codegen::hip_arch_known("gfx90a"));
  EXPECT_TRUE(codegen::hip_arch_known("gfx90a:xnack-"));
  auto refused = [](const std::vector<std::string> &archs) {
    std::vector<ir::Diagnostic> errors;
    EXPECT_FALSE(codegen::hip_detail::check_hip_archs(archs, errors));
    return errors.empty() ? std::string("<accepted>") : errors.front().str();
  };
  EXPECT_EQ(refused({"sm_90"}), "error: target 'hip:sm_90': 'sm_90' is not an AMD GPU "
                                "architecture (gfxNNN, e.g. gfx90a, gfx942)");
  EXPECT_EQ(refused({"gfx90a", "gfx1030"}),
            "error: targets 'hip:gfx90a' and 'hip:gfx1030' run wavefronts of different sizes (64 "
            "and 32), for which cubecc writes different code: compile for them separately");
}

TEST(HipBackend, gfx942_is_refused_with_the_known_list_when_comgr_does_not_know_it) {
  SKIP_WITHOUT_HIPRTC();
  std::vector<std::string> isas = codegen::hip_detail::comgr_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_NE(std::find(isas.begin(), isas.end(), "gfx90a"), isas.end());
  std::string why;
  if (codegen::hip_arch_known("gfx942", &why))
    GTEST_SKIP() << "this comgr knows gfx942";
  // Refused before hipRTC sees it (hipRTC of ROCm 5.2 crashes inside comgr on it).
  auto module = test::parse_valid(test::random_kernel(1));
  ASSERT_TRUE(module);
  std::vector<ir::Diagnostic> errors;
  EXPECT_FALSE(codegen::compile_hip(*module->kernels()[0], {"gfx90a", "gfx942"}, errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message.find("hip:gfx942: the installed comgr (ROCm "), 0u)
      << errors[0].message;
  EXPECT_NE(errors[0].message.find(") does not know gfx942; known: gfx600, "), std::string::npos)
      << errors[0].message;
  EXPECT_NE(errors[0].message.find(", gfx90a, "), std::string::npos) << errors[0].message;
}

TEST(HipBackend, a_compile_error_reports_hiprtcs_log_at_the_users_line) {
  SKIP_WITHOUT_HIPRTC();
  codegen::CSource source;
  source.entry = "entry";
  source.abi.name = "broken";
  source.text = "#line 7 \"user.cpp\"\n"
                "extern \"C\" __global__ void entry(float *p) {\n"
                "  p[0] = __half2float(__float2half(p[0])) + undefined_x;\n"
                "}\n";
  std::vector<ir::Diagnostic> errors;
  EXPECT_FALSE(codegen::hip_detail::hiprtc_compile(source, "gfx90a", errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].file, "user.cpp");
  EXPECT_EQ(errors[0].line, 8u);
  EXPECT_EQ(errors[0].col, 45u);
  EXPECT_EQ(errors[0].message, "kernel 'broken': hipRTC failed for target 'hip:gfx90a': error: use "
                               "of undeclared identifier 'undefined_x'");
  ASSERT_FALSE(errors[0].notes.empty());
  EXPECT_EQ(errors[0].notes.back().find("hipRTC log:\nuser.cpp:8:45: error: use of undeclared "
                                        "identifier 'undefined_x'"),
            0u)
      << errors[0].notes.back();
}

// --- Logs ---------------------------------------------------------------------------------------

TEST(CompilerLog, finds_the_first_error_of_nvrtc_and_clang_logs) {
  auto nv = codegen::first_compiler_error("k.cu(3): warning: unused\nk.cu(5): error: bad thing\n"
                                          "k.cu(9): error: second\n");
  ASSERT_TRUE(nv);
  EXPECT_EQ(nv->file, "k.cu");
  EXPECT_EQ(nv->line, 5u);
  EXPECT_EQ(nv->text, "bad thing");
  auto fatal = codegen::first_compiler_error("k.cu(1): catastrophic error: cannot open x.h\n");
  ASSERT_TRUE(fatal);
  EXPECT_EQ(fatal->severity, "catastrophic error");
  auto clang = codegen::first_compiler_error(
      "In file included from a.h:1:\n/x/y.cpp:12:7: fatal error: 'z.h' file not found\n");
  ASSERT_TRUE(clang);
  EXPECT_EQ(clang->file, "/x/y.cpp");
  EXPECT_EQ(clang->line, 12u);
  EXPECT_EQ(clang->col, 7u);
  EXPECT_FALSE(codegen::first_compiler_error("all good\n"));
  // Not past a function boundary or a #line directive.
  EXPECT_FALSE(codegen::source_comment_location("  a; // a.cpp:1\n}\n  b;\n", 3));
  auto nested = codegen::source_comment_location("  // a.cpp:1\n  if (x) {\n  }\n  b;\n", 4);
  ASSERT_TRUE(nested);
  EXPECT_EQ(nested->line, 1u);
  EXPECT_FALSE(codegen::source_comment_location("x; // a.cpp:1\n#line 3 \"b\"\ny;\n", 3));
  auto at = codegen::source_comment_location("  x; // a.cpp:1\n  // dir/b.cpp:4:2\n  z;\n", 3);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->file, "dir/b.cpp");
  EXPECT_EQ(at->line, 4u);
  EXPECT_EQ(at->col, 2u);
}

} // namespace
