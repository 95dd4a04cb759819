//===- interp_backend.cpp - The target interp: the optimized IR, run by the interpreter -------===//
#include "cubecc/codegen/backend.h"

#include "cubecc/ir/ir.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"

#include <fmt/format.h>

namespace cubecc::codegen {
namespace {

class InterpBackend final : public Backend {
public:
  std::string_view name() const override { return "interp"; }
  std::string_view grammar() const override { return "interp"; }
  std::vector<std::string> example_targets() const override { return {"interp"}; }

  std::optional<std::string> parse_target(std::string_view target,
                                          std::string &error) const override {
    if (target != "interp") {
      error = unknown_target_message(target);
      return std::nullopt;
    }
    return std::string(target);
  }

  /// The interpreter runs every op of every type.
  TargetFeatures features(std::string_view) const override {
    TargetFeatures f;
    f.target = "interp";
    f.float32_atomic_add = f.float32_atomics = f.float64_atomic_add = f.narrow_atomics = true;
    f.float32_atomic_min_max = true;
    f.fused_fma = true;
    f.linear_subgroups = true;
    f.subgroup_size = 0; // any: each launch chooses (and the interpreter checks a required one)
    f.matrix_shapes = ir::matrix_shape_mask([](const ir::MatrixShape &) { return true; });
    f.async_copy = true;
    return f;
  }

  /// `--emit ir` is every target's (the tools' own); the interpreter needs nothing else.
  const std::vector<EmitKind> &emit_kinds() const override {
    static const std::vector<EmitKind> kinds;
    return kinds;
  }

  std::vector<Artifact> compile(const ir::Kernel &kernel, std::span<const std::string>,
                                std::vector<ir::Diagnostic> &) const override {
    // The kernel's own module: the text form is a module's.
    return {{"interp", "ir", "", "", "", KernelAbi::of(kernel), ir::to_string(*kernel.module())}};
  }

  std::optional<Emitted> emit(const ir::Kernel &kernel, std::string_view, std::string_view kind,
                              std::vector<ir::Diagnostic> &errors) const override {
    errors.push_back(
        {"",
         0,
         0,
         fmt::format("kernel '{}': target interp has no --emit {}", kernel.name(), kind),
         {}});
    return std::nullopt;
  }

  std::vector<Toolkit> toolkits() const override { return {}; }

  std::string check_artifact(std::string_view, std::string_view format,
                             std::string_view bytes) const override {
    if (format != "ir")
      return fmt::format("unknown format '{}'", format);
    ir::ParseResult parsed = ir::parse_module(bytes, "entry.cir");
    if (!parsed.module)
      return "IR does not parse: " + ir::to_string(parsed.errors);
    if (auto problems = ir::verify(*parsed.module, &parsed.source_map); !problems.empty())
      return "IR does not verify: " + ir::to_string(problems);
    return "";
  }
};

} // namespace

const Backend &interp_backend() {
  static const InterpBackend backend;
  return backend;
}

} // namespace cubecc::codegen
