//===- nvrtc.cpp - The CUDA backend's compiler half: target features and NVRTC ----------------===//
//
// compile_cuda = emit_cuda (codegen/common/c_emitter.cpp) + NVRTC: PTX for the lowest listed
// architecture's virtual arch (compute_NN, which the driver JIT-compiles for GPUs newer than any
// listed) and a CUBIN per listed sm_NN. NVRTC gets --fmad=false (the IR forbids contracting a
// multiply and an add; fma ops are explicit), IEEE division and square root, no flush to zero,
// and the toolkit's include directory for cuda_fp16.h and cuda_bf16.h (NVRTC 13 has no built-in
// copies). Without NVRTC at build time, this file builds a stub that reports why.
//
// NVRTC is loaded with dlopen on first use (CUBECC_NVRTC names the file to use), not linked:
// libcubecc.so and the tools then load on a machine without the CUDA toolkit (an AMD or CPU-only
// one), where the cuda backend says why it cannot compile instead of the program failing to start.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/cuda.h"

#include "common/compiler_log.h"
#include "common/dynamic_library.h"
#include "cubecc/ir/ir.h"
#include "cuda/nvrtc_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#if CUBECC_HAVE_NVRTC
#include <nvrtc.h>
#endif

namespace cubecc::codegen {

namespace cuda_detail {

std::optional<CudaArch> parse_cuda_arch(const std::string &arch) {
  if (!arch.starts_with("sm_") || arch.size() < 5 || arch[3] == '0')
    return std::nullopt;
  CudaArch out;
  size_t i = 3;
  for (; i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i])); ++i) {
    out.number = out.number * 10 + static_cast<unsigned>(arch[i] - '0');
    if (out.number > 10000)
      return std::nullopt;
  }
  if (i - 3 < 2)
    return std::nullopt;
  out.suffix = arch.substr(i);
  // Arch-specific ('a') targets exist from sm_90 on, family ('f') targets from sm_100 on: NVRTC
  // refuses sm_80a, and the PTX would silently say sm_80.
  if (!out.suffix.empty() && !(out.suffix == "a" && out.number >= 90) &&
      !(out.suffix == "f" && out.number >= 100))
    return std::nullopt;
  return out;
}

std::optional<std::string> cuda_arch_problem(const std::string &arch) {
  auto parsed = parse_cuda_arch(arch);
  if (!parsed)
    return fmt::format("target 'cuda:{}': '{}' is not a CUDA architecture (sm_NN, e.g. sm_80, "
                       "sm_90; arch-specific sm_NNa from sm_90a; family sm_NNf from sm_100f)",
                       arch, arch);
  if (parsed->number < 80)
    return fmt::format("target 'cuda:{}': cubecc compiles for sm_80 and newer", arch);
  return std::nullopt;
}

std::string ptx_arch(const std::vector<std::string> &archs) {
  unsigned lowest = 0;
  for (const std::string &a : archs)
    if (auto parsed = parse_cuda_arch(a); parsed && (lowest == 0 || parsed->number < lowest))
      lowest = parsed->number;
  return fmt::format("compute_{}", lowest);
}

} // namespace cuda_detail

TargetFeatures cuda_features(const std::string &arch) {
  TargetFeatures f;
  f.target = "cuda:" + arch;
  f.int8 = f.int16 = f.int64 = true;
  f.float16 = f.bfloat16 = f.float64 = true;
  f.int64_atomics = true;
  f.float32_atomic_add = true;     // atomicAdd(float *)
  f.float32_atomics = true;        // atomicExch(float *)
  f.float32_atomic_min_max = true; // a compare-and-swap loop
  f.float64_atomic_add = true;     // atomicAdd(double *), sm_60 and newer
  f.narrow_atomics = true;         // a compare-and-swap loop on the 32-bit word (c_prelude.h)
  f.fused_fma = true;              // fmaf/fma/__hfma round once
  f.signed_zero_inf_nan_preserve = true;
  f.subgroup_arithmetic = f.subgroup_extended_types = true;
  f.subgroup_shuffle = f.subgroup_ballot = true;
  f.subgroup_size = 32;
  f.linear_subgroups = true; // warps are consecutive linear thread indices
  // mma.sync: f16 and bf16 shapes from sm_80, fp8 (e4m3, e5m2; m16n8k32) from sm_89.
  const unsigned sm = cuda_detail::parse_cuda_arch(arch).value_or(cuda_detail::CudaArch{}).number;
  f.matrix_shapes = ir::matrix_shape_mask(
      [&](const ir::MatrixShape &s) { return sm >= (ir::is_storage_float(s.a) ? 89u : 80u); });
  f.matrix_note = "mma.sync needs sm_80 or newer (fp8 shapes sm_89)";
  f.async_copy = sm >= 80; // cp.async
  // Shared memory per block with the opt-in (CUDA Programming Guide, "Technical Specifications
  // per Compute Capability"); above 48 KiB the emitter declares it dynamically.
  f.max_shared_bytes = sm >= 120              ? 101376 // 99 KiB
                       : sm >= 90             ? 232448 // 227 KiB (Hopper, Blackwell)
                       : sm == 86 || sm == 89 ? 101376 // 99 KiB
                       : sm >= 80             ? 166912 // 163 KiB (A100, Orin)
                       : sm == 75             ? 65536  // 64 KiB
                       : sm >= 70             ? 98304  // 96 KiB
                                              : 49152;
  f.max_param_block_bytes = 4096; // kernel parameters: 4 KiB (32 KiB needs a 12.1+ driver, sm_70+)
  f.max_workgroup_invocations = 1024;
  f.max_workgroup_size[0] = 1024;
  f.max_workgroup_size[1] = 1024;
  f.max_workgroup_size[2] = 64;
  return f;
}

#if CUBECC_HAVE_NVRTC

namespace {

/// The NVRTC entry points cubecc uses, from the library loaded at first use.
struct Nvrtc {
  decltype(&nvrtcVersion) Version = nullptr;
  decltype(&nvrtcGetErrorString) GetErrorString = nullptr;
  decltype(&nvrtcGetNumSupportedArchs) GetNumSupportedArchs = nullptr;
  decltype(&nvrtcGetSupportedArchs) GetSupportedArchs = nullptr;
  decltype(&nvrtcCreateProgram) CreateProgram = nullptr;
  decltype(&nvrtcCompileProgram) CompileProgram = nullptr;
  decltype(&nvrtcDestroyProgram) DestroyProgram = nullptr;
  decltype(&nvrtcGetProgramLogSize) GetProgramLogSize = nullptr;
  decltype(&nvrtcGetProgramLog) GetProgramLog = nullptr;
  decltype(&nvrtcGetPTXSize) GetPTXSize = nullptr;
  decltype(&nvrtcGetPTX) GetPTX = nullptr;
  decltype(&nvrtcGetCUBINSize) GetCUBINSize = nullptr;
  decltype(&nvrtcGetCUBIN) GetCUBIN = nullptr;
  std::string error; ///< why NVRTC could not be loaded; empty when it was
};

/// NVRTC, loaded once: the file CUBECC_NVRTC names if set, else by soname (the loader's search
/// path), then from the file found when cubecc was built. The library stays loaded until exit.
const Nvrtc &nvrtc() {
  static const Nvrtc *api = [] {
    auto *n = new Nvrtc;
    const char *chosen = std::getenv("CUBECC_NVRTC");
    void *lib = nullptr;
    if (chosen && *chosen) { // only the file the user named
      if (!(lib = open_library(chosen, nullptr, n->error)))
        n->error = "CUBECC_NVRTC: " + n->error;
    } else if (!(lib = open_library(CUBECC_NVRTC_SONAME, CUBECC_NVRTC_LIBRARY, n->error))) {
      n->error += ": install the CUDA toolkit's NVRTC, add its lib64 directory to "
                  "LD_LIBRARY_PATH, or set CUBECC_NVRTC to the file";
    }
    if (!lib)
      return n;
    // Named as loaded: the file CUBECC_NVRTC chose is the one whose symbols are missing.
    const std::string loaded =
        chosen && *chosen ? fmt::format("CUBECC_NVRTC={}", chosen) : CUBECC_NVRTC_SONAME;
    SymbolTable symbols(lib, loaded.c_str());
    symbols.get(n->Version, "nvrtcVersion");
    symbols.get(n->GetErrorString, "nvrtcGetErrorString");
    symbols.get(n->GetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
    symbols.get(n->GetSupportedArchs, "nvrtcGetSupportedArchs");
    symbols.get(n->CreateProgram, "nvrtcCreateProgram");
    symbols.get(n->CompileProgram, "nvrtcCompileProgram");
    symbols.get(n->DestroyProgram, "nvrtcDestroyProgram");
    symbols.get(n->GetProgramLogSize, "nvrtcGetProgramLogSize");
    symbols.get(n->GetProgramLog, "nvrtcGetProgramLog");
    symbols.get(n->GetPTXSize, "nvrtcGetPTXSize");
    symbols.get(n->GetPTX, "nvrtcGetPTX");
    symbols.get(n->GetCUBINSize, "nvrtcGetCUBINSize");
    symbols.get(n->GetCUBIN, "nvrtcGetCUBIN");
    n->error = symbols.error();
    return n;
  }();
  return *api;
}

/// Adds "backend cuda: <why NVRTC is missing>" and returns false when it could not be loaded.
bool nvrtc_loaded(std::vector<ir::Diagnostic> &errors) {
  if (nvrtc().error.empty())
    return true;
  errors.push_back({"", 0, 0, "backend cuda: " + nvrtc().error, {}});
  return false;
}

/// The architectures the NVRTC found compiles for (e.g. 75, 80, ..., 121).
const std::vector<int> &supported_archs() {
  static const std::vector<int> archs = [] {
    int n = 0;
    std::vector<int> out;
    if (nvrtc().error.empty() && nvrtc().GetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
      out.resize(static_cast<size_t>(n));
      if (nvrtc().GetSupportedArchs(out.data()) != NVRTC_SUCCESS)
        out.clear();
    }
    return out;
  }();
  return archs;
}

bool nvrtc_supports(unsigned number) {
  const auto &archs = supported_archs();
  return std::find(archs.begin(), archs.end(), static_cast<int>(number)) != archs.end();
}

std::string supported_list() {
  std::string out;
  for (int a : supported_archs())
    out += (out.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return out;
}

/// The folder holding cuda_fp16.h: $CUDA_PATH/include, $CUDA_HOME/include, or the toolkit's that
/// cubecc was built against. Empty when none has it.
const std::string &cuda_include_dir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    std::vector<std::string> candidates;
    for (const char *var : {"CUDA_PATH", "CUDA_HOME"})
      if (const char *root = std::getenv(var); root && *root)
        candidates.push_back(std::string(root) + "/include");
    candidates.push_back(CUBECC_CUDA_INCLUDE_DIR);
    for (const std::string &c : candidates) {
      std::error_code ec;
      if (fs::exists(fs::path(c) / "cuda_fp16.h", ec))
        return c;
    }
    return std::string();
  }();
  return dir;
}

/// Destroys an NVRTC program when it goes out of scope.
struct Program {
  nvrtcProgram handle = nullptr;
  ~Program() {
    if (handle)
      nvrtc().DestroyProgram(&handle);
  }
};

std::string program_log(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtc().GetProgramLogSize(program, &size) != NVRTC_SUCCESS || size == 0)
    return {};
  std::string log(size, '\0');
  if (nvrtc().GetProgramLog(program, log.data()) != NVRTC_SUCCESS)
    return {};
  while (!log.empty() && log.back() == '\0')
    log.pop_back();
  return log;
}

} // namespace

namespace cuda_detail {

bool check_cuda_archs(const std::vector<std::string> &archs, std::vector<ir::Diagnostic> &errors) {
  if (!nvrtc_loaded(errors))
    return false;
  if (archs.empty()) {
    errors.push_back({"", 0, 0, "no CUDA architecture given (e.g. sm_80, sm_90)", {}});
    return false;
  }
  for (const std::string &arch : archs) {
    if (std::optional<std::string> problem = cuda_arch_problem(arch)) {
      errors.push_back({"", 0, 0, *problem, {}});
      return false;
    }
    auto parsed = parse_cuda_arch(arch);
    if (!nvrtc_supports(parsed->number)) {
      errors.push_back({"",
                        0,
                        0,
                        fmt::format("target 'cuda:{}': NVRTC {} does not know {} (it knows: {})",
                                    arch, nvrtc_version(), arch, supported_list()),
                        {}});
      return false;
    }
  }
  return true;
}

std::vector<std::string> nvrtc_options() {
  std::vector<std::string> options = {"-std=c++17",      "--fmad=false",     "--ftz=false",
                                      "--prec-div=true", "--prec-sqrt=true", "-default-device"};
  if (!cuda_include_dir().empty())
    options.push_back("--include-path=" + cuda_include_dir());
  return options;
}

std::optional<std::string> nvrtc_compile(const CSource &source, const std::string &arch,
                                         std::vector<ir::Diagnostic> &errors) {
  const std::string kernel = source.abi.name.empty() ? source.entry : source.abi.name;
  const std::string target = "cuda:" + arch;
  const std::string program_name = kernel + ".cu";
  auto fail = [&](nvrtcResult result, const char *step) {
    errors.push_back({"",
                      0,
                      0,
                      fmt::format("kernel '{}': NVRTC {} failed for target '{}': {}", kernel, step,
                                  target, nvrtc().GetErrorString(result)),
                      {}});
    return std::nullopt;
  };
  if (!nvrtc_loaded(errors))
    return std::nullopt;
  Program program;
  nvrtcResult result = nvrtc().CreateProgram(&program.handle, source.text.c_str(),
                                             program_name.c_str(), 0, nullptr, nullptr);
  if (result != NVRTC_SUCCESS)
    return fail(result, "nvrtcCreateProgram");
  std::vector<std::string> options = nvrtc_options();
  options.push_back("--gpu-architecture=" + arch);
  std::vector<const char *> argv;
  for (const std::string &o : options)
    argv.push_back(o.c_str());
  result = nvrtc().CompileProgram(program.handle, static_cast<int>(argv.size()), argv.data());
  if (result != NVRTC_SUCCESS) {
    std::string log = program_log(program.handle);
    if (result != NVRTC_ERROR_COMPILATION && log.empty())
      return fail(result, "nvrtcCompileProgram");
    errors.push_back(compiler_error("NVRTC", target, kernel, program_name, source.text, log));
    if (cuda_include_dir().empty() && log.find("cuda_fp16.h") != std::string::npos)
      errors.back().notes.push_back("cuda_fp16.h was not found: set CUDA_PATH to the CUDA "
                                    "toolkit");
    return std::nullopt;
  }
  std::string code;
  size_t size = 0;
  if (arch.starts_with("compute_")) {
    if ((result = nvrtc().GetPTXSize(program.handle, &size)) != NVRTC_SUCCESS)
      return fail(result, "nvrtcGetPTXSize");
    code.resize(size);
    if (size && (result = nvrtc().GetPTX(program.handle, code.data())) != NVRTC_SUCCESS)
      return fail(result, "nvrtcGetPTX");
    while (!code.empty() && code.back() == '\0')
      code.pop_back();
  } else {
    if ((result = nvrtc().GetCUBINSize(program.handle, &size)) != NVRTC_SUCCESS)
      return fail(result, "nvrtcGetCUBINSize");
    code.resize(size);
    if (size && (result = nvrtc().GetCUBIN(program.handle, code.data())) != NVRTC_SUCCESS)
      return fail(result, "nvrtcGetCUBIN");
  }
  if (code.empty()) {
    errors.push_back(
        {"",
         0,
         0,
         fmt::format("kernel '{}': NVRTC wrote no code for target '{}'", kernel, target),
         {}});
    return std::nullopt;
  }
  return code;
}

std::optional<CudaBinary> compile_cuda_source(CSource source, const std::vector<std::string> &archs,
                                              std::vector<ir::Diagnostic> &errors,
                                              CudaOutputs outputs) {
  if (!check_cuda_archs(archs, errors))
    return std::nullopt;
  CudaBinary binary;
  binary.ptx_arch = ptx_arch(archs);
  if (outputs != CudaOutputs::Cubins) {
    auto ptx = nvrtc_compile(source, binary.ptx_arch, errors);
    if (!ptx)
      return std::nullopt;
    binary.ptx = std::move(*ptx);
  }
  for (const std::string &arch : archs) {
    if (outputs == CudaOutputs::Ptx)
      break;
    if (std::any_of(binary.cubins.begin(), binary.cubins.end(),
                    [&](const CudaBinary::Cubin &c) { return c.arch == arch; }))
      continue; // listed twice
    auto cubin = nvrtc_compile(source, arch, errors);
    if (!cubin)
      return std::nullopt;
    binary.cubins.push_back({arch, std::move(*cubin)});
  }
  binary.source = std::move(source);
  return binary;
}

} // namespace cuda_detail

std::vector<std::string> default_cuda_archs() {
  std::vector<std::string> out;
  for (const char *arch : {"sm_80", "sm_90", "sm_90a", "sm_100", "sm_120"})
    if (nvrtc_supports(cuda_detail::parse_cuda_arch(arch)->number))
      out.push_back(arch);
  return out;
}

std::optional<CudaBinary> compile_cuda(const ir::Kernel &kernel,
                                       const std::vector<std::string> &archs,
                                       std::vector<ir::Diagnostic> &errors, CudaOutputs outputs) {
  if (!cuda_detail::check_cuda_archs(archs, errors))
    return std::nullopt;
  // The source is written for the lowest architecture: every listed GPU runs it.
  std::string lowest = archs.front();
  for (const std::string &a : archs) {
    auto pa = cuda_detail::parse_cuda_arch(a), pl = cuda_detail::parse_cuda_arch(lowest);
    if (pa->number < pl->number || (pa->number == pl->number && pa->suffix.empty()))
      lowest = a;
  }
  auto source = emit_cuda(kernel, cuda_features(lowest), errors);
  if (!source)
    return std::nullopt;
  return cuda_detail::compile_cuda_source(std::move(*source), archs, errors, outputs);
}

std::string nvrtc_version(std::string *why) {
  if (!nvrtc().error.empty()) {
    if (why)
      *why = nvrtc().error;
    return {};
  }
  int major = 0, minor = 0;
  if (nvrtcResult r = nvrtc().Version(&major, &minor); r != NVRTC_SUCCESS) {
    if (why)
      *why = std::string("nvrtcVersion failed: ") + nvrtc().GetErrorString(r);
    return {};
  }
  return fmt::format("{}.{}", major, minor);
}

#else // !CUBECC_HAVE_NVRTC: the stub

namespace cuda_detail {

bool check_cuda_archs(const std::vector<std::string> &, std::vector<ir::Diagnostic> &errors) {
  errors.push_back({"", 0, 0, "backend cuda not built: " CUBECC_NVRTC_MISSING, {}});
  return false;
}

std::vector<std::string> nvrtc_options() {
  return {};
}

std::optional<std::string> nvrtc_compile(const CSource &, const std::string &,
                                         std::vector<ir::Diagnostic> &errors) {
  errors.push_back({"", 0, 0, "backend cuda not built: " CUBECC_NVRTC_MISSING, {}});
  return std::nullopt;
}

std::optional<CudaBinary> compile_cuda_source(CSource, const std::vector<std::string> &archs,
                                              std::vector<ir::Diagnostic> &errors, CudaOutputs) {
  check_cuda_archs(archs, errors);
  return std::nullopt;
}

} // namespace cuda_detail

std::vector<std::string> default_cuda_archs() {
  return {};
}

std::optional<CudaBinary> compile_cuda(const ir::Kernel &, const std::vector<std::string> &archs,
                                       std::vector<ir::Diagnostic> &errors, CudaOutputs) {
  cuda_detail::check_cuda_archs(archs, errors);
  return std::nullopt;
}

std::string nvrtc_version(std::string *why) {
  if (why)
    *why = "backend cuda not built: " CUBECC_NVRTC_MISSING;
  return {};
}

#endif

} // namespace cubecc::codegen
