//===- cuda_backend.cpp - The CUDA backend's registration: targets cuda:sm_XX -----------------===//
#include "cubecc/codegen/backend.h"
#include "cubecc/codegen/cuda.h"

#include "common/c_emitter.h"
#include "cuda/nvrtc_internal.h"

#include <fmt/format.h>

namespace cubecc::codegen {
namespace {

class CudaBackend final : public Backend {
public:
  std::string_view name() const override { return "cuda"; }
  std::string_view grammar() const override { return "cuda:sm_XX (sm_80 and newer, sm_90a, ...)"; }
  std::vector<std::string> example_targets() const override { return {"cuda:sm_80", "cuda:sm_90"}; }

  std::optional<std::string> parse_target(std::string_view target,
                                          std::string &error) const override {
    std::string name(target);
    if (!name.starts_with("cuda:sm_")) {
      error = unknown_target_message(target);
      return std::nullopt;
    }
    if (std::optional<std::string> problem = cuda_detail::cuda_arch_problem(name.substr(5))) {
      error = *problem;
      return std::nullopt;
    }
    return name;
  }

  TargetFeatures features(std::string_view target) const override {
    return cuda_features(arch_of(target));
  }
  bool check_support(const ir::Kernel &kernel, std::string_view target,
                     std::vector<ir::Diagnostic> &why) const override {
    return check_c_family(kernel, features(target), CDialect::Cuda, why);
  }

  const std::vector<EmitKind> &emit_kinds() const override {
    static const std::vector<EmitKind> kinds = {{"cuda", ".cu", false, false},
                                                {"ptx", ".ptx", true, false},
                                                {"cubin", ".cubin", true, true}};
    return kinds;
  }

  std::vector<Artifact> compile(const ir::Kernel &kernel, std::span<const std::string> targets,
                                std::vector<ir::Diagnostic> &errors) const override {
    std::vector<std::string> archs;
    for (const std::string &t : targets)
      archs.push_back(arch_of(t));
    std::optional<CudaBinary> binary = compile_cuda(kernel, archs, errors);
    if (!binary)
      return {};
    std::vector<Artifact> out;
    std::string toolkit = cuda_toolkit();
    for (CudaBinary::Cubin &cubin : binary->cubins)
      out.push_back({"cuda:" + cubin.arch, "cubin", "", toolkit, binary->source.entry,
                     binary->source.abi, std::move(cubin.bytes)});
    // PTX of the oldest listed arch: the driver JIT-compiles it for GPUs newer than every CUBIN.
    out.push_back({"cuda:" + binary->ptx_arch, "ptx", "", toolkit, binary->source.entry,
                   binary->source.abi, std::move(binary->ptx)});
    return out;
  }

  std::optional<Emitted> emit(const ir::Kernel &kernel, std::string_view target,
                              std::string_view kind,
                              std::vector<ir::Diagnostic> &errors) const override {
    std::string arch = arch_of(target);
    Emitted out;
    if (kind == "cuda") {
      auto source = emit_cuda(kernel, cuda_features(arch), errors);
      if (!source)
        return std::nullopt;
      out.output = std::move(source->text);
      return out;
    }
    // One NVRTC run: the output asked for (the dump directory gets PTX with --emit ptx).
    auto binary = compile_cuda(kernel, {arch}, errors,
                               kind == "ptx" ? CudaOutputs::Ptx : CudaOutputs::Cubins);
    if (!binary)
      return std::nullopt;
    out.stages.emplace_back(".cu", binary->source.text);
    if (!binary->ptx.empty())
      out.stages.emplace_back(".ptx", binary->ptx);
    out.output = kind == "ptx" ? std::move(binary->ptx) : std::move(binary->cubins[0].bytes);
    return out;
  }

  std::vector<Toolkit> toolkits() const override {
    Toolkit nvrtc{"NVRTC", {}, {}};
    nvrtc.version = nvrtc_version(&nvrtc.why_not);
    return {nvrtc};
  }
  std::string toolkit_label() const override { return cuda_toolkit(); }

  std::string check_artifact(std::string_view target, std::string_view format,
                             std::string_view bytes) const override {
    if (format == "cubin")
      return check_elf_machine(bytes, 190); // EM_CUDA
    if (format == "ptx") {
      std::string arch = arch_of(target); // compute_80
      std::string directive = ".target sm_" + arch.substr(arch.find('_') + 1);
      return bytes.find(directive) != std::string_view::npos
                 ? ""
                 : "PTX without the directive " + directive;
    }
    return fmt::format("unknown format '{}'", format);
  }

private:
  static std::string arch_of(std::string_view target) {
    return std::string(target.substr(target.find(':') + 1));
  }
};

} // namespace

std::optional<CSource> emit_cuda(const ir::Kernel &kernel, const TargetFeatures &features,
                                 std::vector<ir::Diagnostic> &errors) {
  return emit_c_family(kernel, features, CDialect::Cuda, errors);
}

const Backend &cuda_backend() {
  static const CudaBackend backend;
  return backend;
}

} // namespace cubecc::codegen
