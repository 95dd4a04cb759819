//===- compile.h - `cubecc compile`: inputs to IR, IR to each target's code -------------------===//
#pragma once

#include "cubecc/dsl/kernel_library_loader.h"
#include "cubecc/ir/diagnostic.h"
#include "cubecc/ir/ir.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cubecc::tools {

struct CompileOptions {
  std::vector<std::string> inputs;
  std::vector<std::string> targets = {"vulkan"};
  std::string emit = "ir";
  int opt_level = -1; ///< -1: the default (0 for --emit ir, 2 for code)
  std::string output = "-";
  std::string kernel;
  std::string dump_dir; ///< every stage per kernel, when set
  bool print_after_all = false;
  std::vector<std::string> print_after; ///< pass names
  std::optional<bool> verify_each;      ///< unset: the build's default
  bool time_passes = false;
  /// Leave out (saying which and why) a kernel a target cannot run, instead of failing.
  bool skip_unsupported = false;
};

/// How load_inputs treats the kernels of kernel libraries and DSL sources.
struct LoadOptions {
  /// Trace only the kernel of this name (when non-empty): the others are not traced, so one
  /// that fails to trace cannot stop it.
  std::string only;
  /// Receives each registered kernel's comptime configuration by name.
  std::map<std::string, std::string> *configurations = nullptr;
  /// Receives the name of every kernel the inputs hold, traced or not.
  std::vector<std::string> *names = nullptr;
};

/// Reads every input into `module`: .cir files are parsed and verified, kernel libraries (.so)
/// traced, DSL sources (.cpp) compiled with the host C++ compiler into a temporary kernel library
/// and traced. A kernel that fails to trace is reported in `errors` and the others are still
/// traced: the result is false when anything failed, and `module` holds what succeeded. Errors
/// name the user's file (the DSL source, not the temporary library built from it).
bool load_inputs(const std::vector<std::string> &inputs, ir::Module &module,
                 std::vector<ir::Diagnostic> &errors, const LoadOptions &options = {});

/// Opens a kernel library (.so), or builds a DSL source (.cpp) into one first.
std::unique_ptr<dsl::KernelLibrary> open_kernel_library(const std::string &input,
                                                        std::vector<ir::Diagnostic> &errors);

/// Runs `cubecc compile`; returns the process exit code.
int compile_command(const CompileOptions &options);

} // namespace cubecc::tools
