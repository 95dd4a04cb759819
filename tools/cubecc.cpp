//===- cubecc.cpp - The cubecc command-line compiler ------------------------------------------===//
//
// Subcommands follow the command-line contract of docs/cli.md. What exists today:
//   cubecc compile <input>... --emit ir [-O<n>] [--kernel <name>] [-o <out>]
//   cubecc kernels <library.so>           (list a kernel library's registered kernels)
//   cubecc --version
// Inputs are .cir files or kernel libraries (.so). Code generation for targets arrives with the
// backends; asking for it now is a clear error, never a silent fallback.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/dsl/kernel_library_loader.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"

#include "tool_support.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

using namespace cubecc::tools;

bool ends_with(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Reads every input into one module: .cir files are parsed, kernel libraries traced.
bool load_inputs(const std::vector<std::string> &inputs, cubecc::ir::Module &module,
                 std::vector<cubecc::ir::Diagnostic> &errors) {
  for (const std::string &input : inputs) {
    if (ends_with(input, ".so")) {
      std::string error;
      auto library = cubecc::dsl::KernelLibrary::open(input, error);
      if (!library) {
        errors.push_back({"", 0, 0, error, {}});
        return false;
      }
      for (size_t i = 0; i < library->kernels().size(); ++i)
        if (!library->trace(i, module, errors))
          return false;
    } else if (ends_with(input, ".cir")) {
      std::ifstream file(input, std::ios::binary);
      if (!file) {
        errors.push_back(
            {input, 0, 0, fmt::format("cannot open the file: {}", std::strerror(errno)), {}});
        return false;
      }
      std::ostringstream text;
      text << file.rdbuf();
      cubecc::ir::ParseResult parsed = cubecc::ir::parse_module(text.str(), input);
      if (!parsed.module) {
        errors.insert(errors.end(), parsed.errors.begin(), parsed.errors.end());
        return false;
      }
      auto problems = cubecc::ir::verify(*parsed.module, &parsed.source_map);
      if (!problems.empty()) {
        errors.insert(errors.end(), problems.begin(), problems.end());
        return false;
      }
      for (const auto &k : parsed.module->kernels())
        if (module.find_kernel(k->name())) {
          errors.push_back(
              {input,
               0,
               0,
               fmt::format("kernel '{}' is defined by two inputs; kernel names must be "
                           "unique",
                           k->name()),
               {}});
          return false;
        }
      module.adopt_kernels(std::move(*parsed.module));
    } else {
      errors.push_back({input,
                        0,
                        0,
                        "unknown input kind: give a .cir file (IR text) or a .so kernel library",
                        {}});
      return false;
    }
  }
  return true;
}

int run(int argc, char **argv) {
  CLI::App app{"cubecc: compile kernels written with the cubecc DSL or in cubecc IR"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the versions of cubecc and its IR format");

  CLI::App *compile = app.add_subcommand("compile", "compile kernels (today: to IR)");
  std::vector<std::string> inputs;
  std::string emit = "ir", output = "-", kernel;
  int opt_level = 0;
  compile->add_option("inputs", inputs, ".cir files or kernel libraries (.so)")->required();
  compile->add_option("--emit", emit, "what to produce: ir (targets come with the backends)");
  compile->add_option("--target", "target list (accepted for scripts; backends are not built yet)");
  compile->add_option("-O", opt_level, "optimization level 0..3")->check(CLI::Range(0, 3));
  compile->add_option("--kernel", kernel, "keep only this kernel");
  compile->add_option("-o", output, "output file (default: standard output)");
  compile->footer("Examples:\n  cubecc compile build/examples/libcubecc_examples.so --emit ir\n"
                  "  cubecc compile axpy.cir --emit ir -O2 -o axpy.opt.cir");

  CLI::App *kernels = app.add_subcommand("kernels", "list the kernels a kernel library registers");
  std::string library_path;
  bool hashes = false;
  kernels->add_option("library", library_path, "a kernel library (.so)")->required();
  kernels->add_flag("--hash", hashes, "trace each kernel and print its structural hash");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? kSuccess : kUsageError;
  }

  if (version) {
    fmt::print("cubecc {}\nIR text format 1, structural hash version {}\n", CUBECC_VERSION,
               cubecc::ir::kStructuralHashVersion);
    return kSuccess;
  }
  if (compile->parsed()) {
    if (emit != "ir") {
      std::cerr << fmt::format("cubecc: error: --emit {} is not available: this cubecc has no "
                               "code generator yet (only --emit ir)\n",
                               emit);
      return kUserError;
    }
    cubecc::ir::Module module("kernels");
    std::vector<cubecc::ir::Diagnostic> errors;
    if (!load_inputs(inputs, module, errors))
      return report(errors);
    if (!kernel.empty()) {
      const cubecc::ir::Kernel *keep = module.find_kernel(kernel);
      if (!keep) {
        std::string known;
        for (const auto &k : module.kernels())
          known += (known.empty() ? "" : ", ") + k->name();
        std::cerr << fmt::format("cubecc: error: no kernel named '{}' (kernels: {})\n", kernel,
                                 known);
        return kUserError;
      }
      while (module.kernels().size() > 1)
        for (const auto &k : module.kernels())
          if (k.get() != keep) {
            module.remove_kernel(k.get());
            break;
          }
    }
    cubecc::passes::PassManager manager;
    for (std::string_view name : cubecc::passes::optimization_pipeline(opt_level))
      manager.add(*cubecc::passes::find_pass(name));
    std::ostringstream pass_output;
    if (auto errors_after = manager.run(module, pass_output, std::cerr); !errors_after.empty())
      return report(errors_after);
    return write_output("cubecc", output, cubecc::ir::to_string(module));
  }
  if (kernels->parsed()) {
    std::string error;
    auto library = cubecc::dsl::KernelLibrary::open(library_path, error);
    if (!library) {
      std::cerr << error << "\n";
      return kUserError;
    }
    for (size_t i = 0; i < library->kernels().size(); ++i) {
      const auto &entry = library->kernels()[i];
      std::string hash;
      if (hashes) {
        cubecc::ir::Module module;
        std::vector<cubecc::ir::Diagnostic> errors;
        if (!library->trace(i, module, errors))
          return report(errors);
        hash = "  " + cubecc::ir::structural_hash(*module.kernels()[0]).hex();
      }
      fmt::print("{:<24} {}{}\n", entry.name, entry.configuration, hash);
    }
    return kSuccess;
  }
  std::cout << app.help();
  return kUsageError;
}

} // namespace

int main(int argc, char **argv) {
  return run_tool("cubecc", [&] { return run(argc, argv); });
}
