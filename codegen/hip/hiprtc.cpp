//===- hiprtc.cpp - The HIP backend's compiler half: target features, comgr and hipRTC --------===//
//
// compile_hip = emit_hip (codegen/common/c_emitter.cpp) + hipRTC, one code object per listed gfx
// architecture. hipRTC (inside libamdhip64) crashes inside comgr on an ISA the installed comgr
// does not know (ROCm 5.2: gfx940, gfx942, gfx1100), so every arch is checked against comgr's
// ISA list first and refused with the list when unknown.
//
// libamdhip64 and libamd_comgr are loaded with dlopen on first use rather than linked: linking
// them puts the HIP runtime, HSA and LLVM (about 65 MB of mappings, 35 ms) into every process that
// links codegen, although only a HIP compile needs them; and a binary built with them still runs
// where they are missing, reporting why. The headers are needed at build time; without them this
// file builds a stub that reports "backend hip not built: <reason>".
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/hip.h"

#include "common/compiler_log.h"
#include "common/dynamic_library.h"
#include "cubecc/ir/ir.h"
#include "hip/hiprtc_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <regex>

#if CUBECC_HAVE_HIPRTC
#include <amd_comgr.h>
#include <dlfcn.h>
#include <hip/hip_version.h>
#include <hip/hiprtc.h>

#include <climits>
#include <cstdlib>
#endif

namespace cubecc::codegen {

namespace {

/// RDNA (gfx10, gfx11, gfx12) runs wavefronts of 32 by default; GCN and CDNA of 64.
uint32_t wavefront_size(const std::string &arch) {
  return arch.starts_with("gfx10") || arch.starts_with("gfx11") || arch.starts_with("gfx12") ? 32
                                                                                             : 64;
}

/// "gfx90a:xnack-" -> "gfx90a".
std::string base_arch(const std::string &arch) {
  return arch.substr(0, arch.find(':'));
}

} // namespace

TargetFeatures hip_features(const std::string &arch) {
  TargetFeatures f;
  f.target = "hip:" + arch;
  f.int8 = f.int16 = f.int64 = true;
  f.float16 = f.bfloat16 = f.float64 = true;
  f.int64_atomics = true;
  // HIP's atomicAdd(float *) and atomicAdd(double *) exist on every arch: gfx90a and gfx942 add
  // in hardware on coarse-grained memory (with -munsafe-fp-atomics; cubecc does not pass it, so
  // the compiler emits a compare-and-swap loop, which is correct on fine-grained memory too);
  // older GPUs always use the loop. atomicExch(float *) is a 32-bit exchange.
  f.float32_atomic_add = true;
  f.float32_atomics = true;
  f.float32_atomic_min_max = true; // a compare-and-swap loop
  f.float64_atomic_add = true;
  f.narrow_atomics = true; // a compare-and-swap loop on the 32-bit word (c_prelude.h)
  f.fused_fma = true; // fma/fmaf/__hfma are v_fma_* (one rounding); -ffp-contract=off elsewhere
  f.signed_zero_inf_nan_preserve = true;
  f.subgroup_arithmetic = f.subgroup_extended_types = true;
  f.subgroup_shuffle = f.subgroup_ballot = true;
  f.subgroup_size = wavefront_size(base_arch(arch));
  f.linear_subgroups = true; // wavefronts are consecutive linear thread indices
  // MFMA 16x16x16 f16 and bf16 -> f32 on CDNA2 and CDNA3 (gfx90a, gfx94x), wave64.
  const std::string base = base_arch(arch);
  if (f.subgroup_size == 64 && (base == "gfx90a" || base.rfind("gfx94", 0) == 0))
    f.matrix_shapes = ir::matrix_shape_mask([](const ir::MatrixShape &s) {
      return s.m == 16 && s.n == 16 && s.k == 16 && s.accumulator == ir::Scalar::F32;
    });
  f.matrix_note = "cubecc emits MFMA (16x16x16, f16 and bf16 -> f32) for gfx90a and gfx94x only";
  f.max_shared_bytes = 65536;     // LDS per workgroup
  f.max_param_block_bytes = 4096; // kernel arguments
  f.max_workgroup_invocations = 1024;
  f.max_workgroup_size[0] = f.max_workgroup_size[1] = f.max_workgroup_size[2] = 1024;
  return f;
}

#if CUBECC_HAVE_HIPRTC

namespace {

/// libamdhip64 (hipRTC) and libamd_comgr, loaded once and never unloaded.
struct HipLibraries {
  decltype(&hiprtcGetErrorString) GetErrorString = nullptr;
  decltype(&hiprtcCreateProgram) CreateProgram = nullptr;
  decltype(&hiprtcCompileProgram) CompileProgram = nullptr;
  decltype(&hiprtcDestroyProgram) DestroyProgram = nullptr;
  decltype(&hiprtcGetProgramLogSize) GetProgramLogSize = nullptr;
  decltype(&hiprtcGetProgramLog) GetProgramLog = nullptr;
  decltype(&hiprtcGetCodeSize) GetCodeSize = nullptr;
  decltype(&hiprtcGetCode) GetCode = nullptr;
  decltype(&amd_comgr_get_isa_count) get_isa_count = nullptr;
  decltype(&amd_comgr_get_isa_name) get_isa_name = nullptr;
  decltype(&amd_comgr_get_version) get_version = nullptr;
  std::string hip_file; ///< the file libamdhip64 was loaded from
  std::string error;    ///< why they could not be loaded, when they could not
  std::mutex compile;   ///< hipRTC and comgr 2.4 are not known to be thread-safe
};

HipLibraries &libraries() {
  static HipLibraries *libs = [] {
    auto *l = new HipLibraries; // never destroyed: the libraries stay loaded until exit
    void *hip = open_library(CUBECC_HIP_SONAME, CUBECC_HIP_LIBRARY, l->error);
    void *comgr = hip ? open_library(CUBECC_COMGR_SONAME, CUBECC_COMGR_LIBRARY, l->error) : nullptr;
    if (!hip || !comgr)
      return l;
    SymbolTable h(hip, CUBECC_HIP_SONAME), c(comgr, CUBECC_COMGR_SONAME);
    h.get(l->GetErrorString, "hiprtcGetErrorString");
    h.get(l->CreateProgram, "hiprtcCreateProgram");
    h.get(l->CompileProgram, "hiprtcCompileProgram");
    h.get(l->DestroyProgram, "hiprtcDestroyProgram");
    h.get(l->GetProgramLogSize, "hiprtcGetProgramLogSize");
    h.get(l->GetProgramLog, "hiprtcGetProgramLog");
    h.get(l->GetCodeSize, "hiprtcGetCodeSize");
    h.get(l->GetCode, "hiprtcGetCode");
    c.get(l->get_isa_count, "amd_comgr_get_isa_count");
    c.get(l->get_isa_name, "amd_comgr_get_isa_name");
    c.get(l->get_version, "amd_comgr_get_version");
    if (!h.error().empty() || !c.error().empty()) {
      l->error = !h.error().empty() ? h.error() : c.error();
      l->GetErrorString = nullptr; // marks the set as unusable
      return l;
    }
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(l->CreateProgram), &info) && info.dli_fname) {
      char resolved[PATH_MAX];
      l->hip_file = realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
    }
    return l;
  }();
  return *libs;
}

bool loaded(std::string *why) {
  HipLibraries &l = libraries();
  if (l.GetErrorString)
    return true;
  if (why)
    *why = l.error;
  return false;
}

/// "5.2.21153" from the file name of the loaded libamdhip64 (libamdhip64.so.5.2.21153), else the
/// version of the headers cubecc was built with.
std::string hip_runtime_version() {
  const std::string &file = libraries().hip_file;
  size_t so = file.rfind(".so.");
  if (so != std::string::npos && file.find('.', so + 4) != std::string::npos)
    return file.substr(so + 4);
  return fmt::format("{}.{}.{}", HIP_VERSION_MAJOR, HIP_VERSION_MINOR, HIP_VERSION_PATCH);
}

/// "ROCm 5.2" for messages.
std::string rocm_name() {
  std::string v = hip_runtime_version();
  size_t second_dot = v.find('.', v.find('.') + 1);
  return "ROCm " + v.substr(0, second_dot);
}

struct Program {
  hiprtcProgram handle = nullptr;
  ~Program() {
    if (handle)
      libraries().DestroyProgram(&handle);
  }
};

} // namespace

namespace hip_detail {

std::vector<std::string> comgr_isas(std::string *why) {
  if (!loaded(why))
    return {};
  HipLibraries &l = libraries();
  size_t count = 0;
  if (l.get_isa_count(&count) != AMD_COMGR_STATUS_SUCCESS) {
    if (why)
      *why = "amd_comgr_get_isa_count failed";
    return {};
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    const char *name = nullptr;
    if (l.get_isa_name(i, &name) != AMD_COMGR_STATUS_SUCCESS || !name)
      continue;
    // "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-" -> "gfx90a"
    std::string isa = name;
    size_t dashes = isa.rfind("--");
    isa = base_arch(dashes == std::string::npos ? isa : isa.substr(dashes + 2));
    if (std::find(out.begin(), out.end(), isa) == out.end())
      out.push_back(isa);
  }
  return out;
}

bool check_hip_archs(const std::vector<std::string> &archs, std::vector<ir::Diagnostic> &errors) {
  auto error = [&](std::string message) {
    errors.push_back({"", 0, 0, std::move(message), {}});
    return false;
  };
  if (archs.empty())
    return error("no HIP architecture given (e.g. gfx90a)");
  static const std::regex form(R"(gfx[0-9a-f]{3,4}(:[a-z]+[+-])*)");
  for (const std::string &arch : archs) {
    if (!std::regex_match(arch, form))
      return error(fmt::format("target 'hip:{}': '{}' is not an AMD GPU architecture (gfxNNN, "
                               "e.g. gfx90a, gfx942)",
                               arch, arch));
    std::string why;
    if (!hip_arch_known(arch, &why))
      return error(fmt::format("hip:{}: {}", arch, why));
    if (wavefront_size(base_arch(arch)) != wavefront_size(base_arch(archs.front())))
      return error(fmt::format("targets 'hip:{}' and 'hip:{}' run wavefronts of different sizes "
                               "({} and {}), for which cubecc writes different code: compile "
                               "for them separately",
                               archs.front(), arch, wavefront_size(base_arch(archs.front())),
                               wavefront_size(base_arch(arch))));
  }
  return true;
}

std::vector<std::string> hiprtc_options() {
  return {"-std=c++17", "-ffp-contract=off"};
}

std::optional<std::string> hiprtc_compile(const CSource &source, const std::string &arch,
                                          std::vector<ir::Diagnostic> &errors) {
  const std::string kernel = source.abi.name.empty() ? source.entry : source.abi.name;
  const std::string target = "hip:" + arch;
  std::string why;
  if (!loaded(&why)) {
    errors.push_back(
        {"", 0, 0, fmt::format("target '{}': hipRTC is not available: {}", target, why), {}});
    return std::nullopt;
  }
  HipLibraries &l = libraries();
  std::lock_guard<std::mutex> lock(l.compile);
  const std::string program_name = kernel + ".hip";
  auto fail = [&](hiprtcResult result, const char *step) {
    errors.push_back({"",
                      0,
                      0,
                      fmt::format("kernel '{}': hipRTC {} failed for target '{}': {}", kernel, step,
                                  target, l.GetErrorString(result)),
                      {}});
    return std::nullopt;
  };
  Program program;
  hiprtcResult result = l.CreateProgram(&program.handle, source.text.c_str(), program_name.c_str(),
                                        0, nullptr, nullptr);
  if (result != HIPRTC_SUCCESS)
    return fail(result, "hiprtcCreateProgram");
  std::vector<std::string> options = hiprtc_options();
  options.push_back("--gpu-architecture=" + arch);
  std::vector<const char *> argv;
  for (const std::string &o : options)
    argv.push_back(o.c_str());
  result = l.CompileProgram(program.handle, static_cast<int>(argv.size()), argv.data());
  if (result != HIPRTC_SUCCESS) {
    std::string log;
    size_t size = 0;
    if (l.GetProgramLogSize(program.handle, &size) == HIPRTC_SUCCESS && size) {
      log.resize(size);
      if (l.GetProgramLog(program.handle, log.data()) != HIPRTC_SUCCESS)
        log.clear();
      while (!log.empty() && log.back() == '\0')
        log.pop_back();
    }
    if (result != HIPRTC_ERROR_COMPILATION && log.empty())
      return fail(result, "hiprtcCompileProgram");
    errors.push_back(compiler_error("hipRTC", target, kernel, program_name, source.text, log));
    return std::nullopt;
  }
  size_t size = 0;
  if ((result = l.GetCodeSize(program.handle, &size)) != HIPRTC_SUCCESS)
    return fail(result, "hiprtcGetCodeSize");
  std::string code(size, '\0');
  if (size && (result = l.GetCode(program.handle, code.data())) != HIPRTC_SUCCESS)
    return fail(result, "hiprtcGetCode");
  if (code.size() < 4 || code.compare(0, 4,
                                      "\x7f"
                                      "ELF") != 0) {
    errors.push_back({"",
                      0,
                      0,
                      fmt::format("kernel '{}': hipRTC wrote no code object (ELF) for target "
                                  "'{}' ({} bytes)",
                                  kernel, target, code.size()),
                      {}});
    return std::nullopt;
  }
  return code;
}

} // namespace hip_detail

bool hip_arch_known(const std::string &arch, std::string *why) {
  std::string load_error;
  std::vector<std::string> isas = hip_detail::comgr_isas(&load_error);
  if (isas.empty()) {
    if (why)
      *why = load_error.empty() ? "comgr lists no ISA" : load_error;
    return false;
  }
  if (std::find(isas.begin(), isas.end(), base_arch(arch)) != isas.end()) {
    // Each feature (":sramecc±", ":xnack±") once, alphabetically as target IDs name them, and
    // only on an architecture that has it (LLVM's AMDGPU processor table): comgr crashes on
    // others. comgr's ISA list names the architectures without their features.
    static const std::vector<std::string> sramecc = {"gfx906", "gfx908", "gfx90a",
                                                     "gfx940", "gfx941", "gfx942"};
    static const std::vector<std::string> xnack = {
        "gfx801", "gfx810", "gfx900", "gfx902", "gfx904",  "gfx906",  "gfx908",  "gfx909", "gfx90a",
        "gfx90c", "gfx940", "gfx941", "gfx942", "gfx1010", "gfx1011", "gfx1012", "gfx1013"};
    const std::string base = base_arch(arch);
    std::string previous;
    for (size_t at = arch.find(':'); at != std::string::npos;) {
      size_t next = arch.find(':', at + 1);
      size_t end = next == std::string::npos ? arch.size() : next;
      std::string feature = arch.substr(at + 1, end - at - 2); // without the + or -
      const std::vector<std::string> *has = feature == "sramecc" ? &sramecc
                                            : feature == "xnack" ? &xnack
                                                                 : nullptr;
      if (!has || std::find(has->begin(), has->end(), base) == has->end() || feature <= previous) {
        if (why)
          *why = fmt::format("{} has no feature '{}', or it is repeated or out of order (a "
                             "target ID names each feature once, sramecc before xnack: "
                             "gfx90a:sramecc+:xnack-)",
                             base, feature);
        return false;
      }
      previous = feature;
      at = next;
    }
    return true;
  }
  if (why) {
    std::string known;
    for (const std::string &isa : isas)
      known += (known.empty() ? "" : ", ") + isa;
    *why = fmt::format("the installed comgr ({}) does not know {}; known: {}", rocm_name(),
                       base_arch(arch), known);
  }
  return false;
}

std::optional<HipBinary> compile_hip(const ir::Kernel &kernel,
                                     const std::vector<std::string> &archs,
                                     std::vector<ir::Diagnostic> &errors) {
  if (!hip_detail::check_hip_archs(archs, errors))
    return std::nullopt;
  auto source = emit_hip(kernel, hip_features(archs.front()), errors);
  if (!source)
    return std::nullopt;
  HipBinary binary;
  for (const std::string &arch : archs) {
    if (std::any_of(binary.code_objects.begin(), binary.code_objects.end(),
                    [&](const HipBinary::CodeObject &c) { return c.arch == arch; }))
      continue;
    auto code = hip_detail::hiprtc_compile(*source, arch, errors);
    if (!code)
      return std::nullopt;
    binary.code_objects.push_back({arch, std::move(*code)});
  }
  binary.source = std::move(*source);
  return binary;
}

std::string hiprtc_version(std::string *why) {
  if (!loaded(why))
    return {};
  size_t major = 0, minor = 0;
  libraries().get_version(&major, &minor);
  // hiprtcVersion reports a fixed 9.0 in ROCm 5.2; the HIP release says more.
  return fmt::format("HIP {} (comgr {}.{})", hip_runtime_version(), major, minor);
}

#else // !CUBECC_HAVE_HIPRTC: the stub

namespace hip_detail {

std::vector<std::string> comgr_isas(std::string *why) {
  if (why)
    *why = "backend hip not built: " CUBECC_HIPRTC_MISSING;
  return {};
}

bool check_hip_archs(const std::vector<std::string> &, std::vector<ir::Diagnostic> &errors) {
  errors.push_back({"", 0, 0, "backend hip not built: " CUBECC_HIPRTC_MISSING, {}});
  return false;
}

std::vector<std::string> hiprtc_options() {
  return {};
}

std::optional<std::string> hiprtc_compile(const CSource &, const std::string &,
                                          std::vector<ir::Diagnostic> &errors) {
  errors.push_back({"", 0, 0, "backend hip not built: " CUBECC_HIPRTC_MISSING, {}});
  return std::nullopt;
}

} // namespace hip_detail

bool hip_arch_known(const std::string &, std::string *why) {
  if (why)
    *why = "backend hip not built: " CUBECC_HIPRTC_MISSING;
  return false;
}

std::optional<HipBinary> compile_hip(const ir::Kernel &, const std::vector<std::string> &archs,
                                     std::vector<ir::Diagnostic> &errors) {
  hip_detail::check_hip_archs(archs, errors);
  return std::nullopt;
}

std::string hiprtc_version(std::string *why) {
  if (why)
    *why = "backend hip not built: " CUBECC_HIPRTC_MISSING;
  return {};
}

#endif

} // namespace cubecc::codegen
