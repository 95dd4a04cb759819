//===- spirv_backend.cpp - The SPIR-V backend's registration: the target vulkan ---------------===//
#include "cubecc/codegen/backend.h"
#include "cubecc/codegen/spirv.h"

#include "cubecc/ir/ir.h"

#include <fmt/format.h>

#include <cstring>

namespace cubecc::codegen {
namespace {

std::string_view bytes_of(const std::vector<uint32_t> &words) {
  return {reinterpret_cast<const char *>(words.data()), words.size() * 4};
}

class SpirvBackend final : public Backend {
public:
  std::string_view name() const override { return "vulkan"; }
  std::string_view grammar() const override { return "vulkan[:nvidia]"; }
  std::vector<std::string> example_targets() const override { return {"vulkan"}; }

  std::optional<std::string> parse_target(std::string_view target,
                                          std::string &error) const override {
    if (target != "vulkan" && target != "vulkan:nvidia") {
      error = unknown_target_message(target);
      return std::nullopt;
    }
    return std::string(target);
  }

  /// `vulkan`: the baseline (lavapipe); `vulkan:nvidia`: an NVIDIA GPU with cooperative matrices.
  TargetFeatures features(std::string_view target) const override {
    return target == "vulkan:nvidia" ? TargetFeatures::vulkan_nvidia()
                                     : TargetFeatures::vulkan_baseline();
  }
  bool check_support(const ir::Kernel &kernel, std::string_view target,
                     std::vector<ir::Diagnostic> &why) const override {
    return check_spirv(kernel, features(target), why);
  }

  const std::vector<EmitKind> &emit_kinds() const override {
    static const std::vector<EmitKind> kinds = {{"spirv", ".spv", true, true},
                                                {"spirv-asm", ".spvasm", false, false, "; "},
                                                {"glsl", ".comp", false, false},
                                                {"msl", ".metal", false, false}};
    return kinds;
  }

  std::vector<Artifact> compile(const ir::Kernel &kernel, std::span<const std::string> targets,
                                std::vector<ir::Diagnostic> &errors) const override {
    std::vector<Artifact> out;
    for (const std::string &target : targets) {
      TargetFeatures f = features(target);
      std::optional<SpirvKernel> spirv = checked_spirv(kernel, f, errors);
      if (!spirv)
        return {};
      out.push_back({target, "spirv", spirv->relies_on.fingerprint(), "", "", spirv->abi,
                     std::string(bytes_of(spirv->words))});
    }
    return out;
  }

  std::optional<Emitted> emit(const ir::Kernel &kernel, std::string_view target,
                              std::string_view kind,
                              std::vector<ir::Diagnostic> &errors) const override {
    TargetFeatures features =
        kind == "msl" ? TargetFeatures::metal_baseline() : this->features(target);
    std::optional<SpirvKernel> spirv = checked_spirv(kernel, features, errors);
    if (!spirv)
      return std::nullopt;
    Emitted out;
    std::string assembly = disassemble_spirv(spirv->words);
    if (kind == "spirv") {
      out.output = bytes_of(spirv->words);
    } else if (kind == "spirv-asm") {
      out.output = assembly;
    } else {
      std::string error;
      auto source =
          kind == "glsl" ? spirv_to_glsl(spirv->words, error) : spirv_to_msl(spirv->words, error);
      if (!source) {
        errors.push_back({"", 0, 0, fmt::format("kernel '{}': {}", kernel.name(), error), {}});
        return std::nullopt;
      }
      out.output = std::move(*source);
    }
    out.stages.emplace_back(".spvasm", std::move(assembly));
    return out;
  }

  std::vector<Toolkit> toolkits() const override {
    std::string tools = spirv_tools_version(); // "SPIRV-Tools v2022.4 ..."
    const std::string prefix = "SPIRV-Tools ";
    if (tools.starts_with(prefix))
      tools.erase(0, prefix.size());
    return {{"SPIRV-Tools", tools, {}}, {"SPIRV-Cross", spirv_cross_version(), {}}};
  }

  std::string check_artifact(std::string_view, std::string_view format,
                             std::string_view bytes) const override {
    if (format != "spirv")
      return fmt::format("unknown format '{}'", format);
    if (bytes.size() % 4 != 0 || bytes.empty())
      return "SPIR-V is not a whole number of words";
    std::vector<uint32_t> words(bytes.size() / 4);
    std::memcpy(words.data(), bytes.data(), bytes.size());
    std::string problems = validate_spirv(words);
    return problems.empty() ? "" : "spirv-val: " + problems;
  }

private:
  /// emit_spirv, then the validator: SPIR-V that does not validate is cubecc's bug.
  static std::optional<SpirvKernel> checked_spirv(const ir::Kernel &kernel,
                                                  const TargetFeatures &features,
                                                  std::vector<ir::Diagnostic> &errors) {
    std::optional<SpirvKernel> spirv = emit_spirv(kernel, features, errors);
    if (!spirv)
      return std::nullopt;
    if (std::string problems = validate_spirv(spirv->words); !problems.empty()) {
      errors.push_back({"",
                        0,
                        0,
                        fmt::format("kernel '{}': the SPIR-V does not validate (a bug in "
                                    "cubecc):\n{}",
                                    kernel.name(), problems),
                        {},
                        /*internal=*/true});
      return std::nullopt;
    }
    return spirv;
  }
};

} // namespace

const Backend &vulkan_backend() {
  static const SpirvBackend backend;
  return backend;
}

} // namespace cubecc::codegen
