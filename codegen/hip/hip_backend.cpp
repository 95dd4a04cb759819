//===- hip_backend.cpp - The HIP backend's registration: targets hip:gfxNNN[:feature±] --------===//
#include "cubecc/codegen/backend.h"
#include "cubecc/codegen/hip.h"

#include "common/c_emitter.h"

#include <fmt/format.h>

#include <regex>

namespace cubecc::codegen {
namespace {

class HipBackend final : public Backend {
public:
  std::string_view name() const override { return "hip"; }
  std::string_view grammar() const override { return "hip:gfxNNN[:xnack±] (gfx90a, gfx942, ...)"; }
  std::vector<std::string> example_targets() const override { return {"hip:gfx90a"}; }

  std::optional<std::string> parse_target(std::string_view target,
                                          std::string &error) const override {
    static const std::regex gfx(R"(hip:gfx[0-9a-f]{3,4}(:[a-z]+[+-])*)");
    std::string name(target);
    if (!std::regex_match(name, gfx)) {
      error = unknown_target_message(target);
      return std::nullopt;
    }
    // An arch the installed comgr does not know is refused here, before any compile (hipRTC
    // crashes on them). Without hipRTC only the source can be emitted, for any arch.
    std::string why;
    if (!hiprtc_version().empty() && !hip_arch_known(arch_of(name), &why)) {
      error = fmt::format("target '{}': {}", name, why);
      return std::nullopt;
    }
    return name;
  }

  TargetFeatures features(std::string_view target) const override {
    return hip_features(arch_of(target));
  }
  bool check_support(const ir::Kernel &kernel, std::string_view target,
                     std::vector<ir::Diagnostic> &why) const override {
    return check_c_family(kernel, features(target), CDialect::Hip, why);
  }

  const std::vector<EmitKind> &emit_kinds() const override {
    static const std::vector<EmitKind> kinds = {{"hip", ".hip", false, false},
                                                {"hsaco", ".hsaco", true, true}};
    return kinds;
  }

  std::vector<Artifact> compile(const ir::Kernel &kernel, std::span<const std::string> targets,
                                std::vector<ir::Diagnostic> &errors) const override {
    std::vector<std::string> archs;
    for (const std::string &t : targets)
      archs.push_back(arch_of(t));
    std::optional<HipBinary> binary = compile_hip(kernel, archs, errors);
    if (!binary)
      return {};
    std::vector<Artifact> out;
    std::string toolkit = hip_toolkit();
    for (HipBinary::CodeObject &object : binary->code_objects)
      out.push_back({"hip:" + object.arch, "hsaco", "", toolkit, binary->source.entry,
                     binary->source.abi, std::move(object.bytes)});
    return out;
  }

  std::optional<Emitted> emit(const ir::Kernel &kernel, std::string_view target,
                              std::string_view kind,
                              std::vector<ir::Diagnostic> &errors) const override {
    std::string arch = arch_of(target);
    Emitted out;
    if (kind == "hip") {
      auto source = emit_hip(kernel, hip_features(arch), errors);
      if (!source)
        return std::nullopt;
      out.output = std::move(source->text);
      return out;
    }
    auto binary = compile_hip(kernel, {arch}, errors);
    if (!binary)
      return std::nullopt;
    out.stages.emplace_back(".hip", binary->source.text);
    out.output = std::move(binary->code_objects[0].bytes);
    return out;
  }

  std::vector<Toolkit> toolkits() const override {
    Toolkit hiprtc{"hipRTC", {}, {}};
    hiprtc.version = hiprtc_version(&hiprtc.why_not);
    return {hiprtc};
  }
  std::string toolkit_label() const override { return hip_toolkit(); }

  std::string check_artifact(std::string_view, std::string_view format,
                             std::string_view bytes) const override {
    if (format == "hsaco")
      return check_elf_machine(bytes, 224); // EM_AMDGPU
    return fmt::format("unknown format '{}'", format);
  }

private:
  static std::string arch_of(std::string_view target) {
    return std::string(target.substr(target.find(':') + 1));
  }
};

} // namespace

std::optional<CSource> emit_hip(const ir::Kernel &kernel, const TargetFeatures &features,
                                std::vector<ir::Diagnostic> &errors) {
  return emit_c_family(kernel, features, CDialect::Hip, errors);
}

const Backend &hip_backend() {
  static const HipBackend backend;
  return backend;
}

} // namespace cubecc::codegen
