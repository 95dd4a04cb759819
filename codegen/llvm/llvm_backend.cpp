//===- llvm_backend.cpp - The CPU backend's registration: targets cpu:<x86-64 level> ----------===//
#include "cubecc/codegen/backend.h"
#include "cubecc/codegen/cpu.h"
#include "cubecc/codegen/cpu_abi.h"
#include "cubecc/codegen/cpu_elf.h"

#include <fmt/format.h>

#include <algorithm>

namespace cubecc::codegen {
namespace {

class CpuBackend final : public Backend {
public:
  std::string_view name() const override { return "cpu"; }
  std::string_view grammar() const override {
    return "cpu:LEVEL (x86-64-v2, x86-64-v3, x86-64-v4, native)";
  }
  std::vector<std::string> example_targets() const override {
    return {"cpu:x86-64-v3", "cpu:x86-64-v4"};
  }

  std::optional<std::string> parse_target(std::string_view target,
                                          std::string &error) const override {
    std::string_view level = level_of(target);
    const std::vector<std::string> &levels = cpu_levels();
    if (target.find(':') == std::string_view::npos) {
      error = fmt::format("target '{}' needs a CPU level: cpu:native (this host's) or one of "
                          "cpu:{}",
                          target, fmt::join(levels, ", cpu:"));
      return std::nullopt;
    }
    if (level != "native" && std::find(levels.begin(), levels.end(), level) == levels.end()) {
      error = fmt::format("target '{}': unknown CPU level '{}' (levels: {}, native)", target, level,
                          fmt::join(levels, ", "));
      return std::nullopt;
    }
    return std::string(target);
  }

  TargetFeatures features(std::string_view target) const override {
    return cpu_features(level_of(target));
  }

  const std::vector<EmitKind> &emit_kinds() const override {
    static const std::vector<EmitKind> kinds = {{"llvm", ".ll", false, false, "; "},
                                                {"asm", ".s", false, false, "# "},
                                                {"elf", ".so", true, true}};
    return kinds;
  }

  std::vector<Artifact> compile(const ir::Kernel &kernel, std::span<const std::string> targets,
                                std::vector<ir::Diagnostic> &errors) const override {
    std::vector<Artifact> out;
    std::string toolkit = toolkit_label();
    for (const std::string &target : targets) {
      CpuCompileOptions options;
      options.level = level_of(target);
      std::optional<CpuBinary> binary = compile_cpu(kernel, options, errors);
      if (!binary)
        return {};
      std::string name = "cpu:" + binary->level; // cpu:native is stored as the level it was
      if (std::any_of(out.begin(), out.end(), [&](const Artifact &a) { return a.target == name; }))
        continue;
      // The level in the target name says all the code assumes: no feature fingerprint.
      out.push_back({name, "elf", "", toolkit, CUBECC_CPU_KERNEL_SYMBOL, binary->abi,
                     std::move(binary->object)});
    }
    return out;
  }

  std::optional<Emitted> emit(const ir::Kernel &kernel, std::string_view target,
                              std::string_view kind,
                              std::vector<ir::Diagnostic> &errors) const override {
    CpuCompileOptions options;
    options.level = level_of(target);
    Emitted out;
    if (kind == "elf") {
      std::optional<CpuBinary> binary = compile_cpu(kernel, options, errors);
      if (!binary)
        return std::nullopt;
      out.output = std::move(binary->object);
      return out;
    }
    std::optional<std::string> text = emit_cpu_text(
        kernel, options, kind == "llvm" ? CpuText::LlvmIr : CpuText::Assembly, errors);
    if (!text)
      return std::nullopt;
    out.output = std::move(*text);
    return out;
  }

  std::vector<Toolkit> toolkits() const override {
    Toolkit llvm{"LLVM", {}, {}};
    llvm.version = llvm_version(&llvm.why_not);
    const std::string prefix = "LLVM ";
    if (llvm.version.starts_with(prefix))
      llvm.version.erase(0, prefix.size());
    return {llvm};
  }
  std::string toolkit_label() const override { return llvm_version(); }

  std::string check_artifact(std::string_view, std::string_view format,
                             std::string_view bytes) const override {
    if (format != "elf")
      return fmt::format("unknown format '{}'", format);
    return elf_shared_object_problem(bytes); // the checks the cpu device makes before dlopen
  }

private:
  static std::string_view level_of(std::string_view target) {
    return target.substr(target.find(':') + 1);
  }
};

} // namespace

const Backend &cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

} // namespace cubecc::codegen
