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
};

/// Reads every input into `module`: .cir files are parsed and verified, kernel libraries (.so)
/// traced, DSL sources (.cpp) compiled with the host C++ compiler into a temporary kernel library
/// and traced.
/// `configurations`, when given, receives each registered kernel's comptime configuration by name.
bool load_inputs(const std::vector<std::string> &inputs, ir::Module &module,
                 std::vector<ir::Diagnostic> &errors,
                 std::map<std::string, std::string> *configurations = nullptr);

/// Opens a kernel library (.so), or builds a DSL source (.cpp) into one first.
std::unique_ptr<dsl::KernelLibrary> open_kernel_library(const std::string &input,
                                                        std::vector<ir::Diagnostic> &errors);

/// Runs `cubecc compile`; returns the process exit code.
int compile_command(const CompileOptions &options);

} // namespace cubecc::tools
