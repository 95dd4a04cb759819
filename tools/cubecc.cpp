//===- cubecc.cpp - The cubecc command-line compiler ------------------------------------------===//
//
// Subcommands follow the command-line contract of docs/cli.md. What exists today:
//   cubecc compile <input>... --target <t> --emit <kind> [-O<n>] [--kernel <name>] [-o <out>]
//   cubecc kernels <library.so>           (list a kernel library's registered kernels)
//   cubecc devices [--json]               (backends built in, devices present, their features)
//   cubecc --version
// Inputs are .cir files, kernel libraries (.so) or DSL sources (.cpp); targets vulkan, interp,
// cuda:sm_XX (NVRTC) and hip:gfxNNN (hipRTC). A backend that is not built is a clear error, never
// a silent fallback.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/hip.h"
#include "cubecc/dsl/kernel_library_loader.h"
#include "cubecc/environments/bundle.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/ir/version.h"
#include "cubecc/passes/pass_manager.h"

#include "compile.h"
#include "devices.h"
#include "env.h"
#include "tool_support.h"
#include "tune.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

using namespace cubecc::tools;

int run(int argc, char **argv) {
  CLI::App app{"cubecc: compile kernels written with the cubecc DSL or in cubecc IR"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version,
               "print the versions of cubecc, its IR format, and the NVRTC and hipRTC found");

  CLI::App *compile = app.add_subcommand("compile", "compile kernels for a target");
  CompileOptions compile_options;
  compile
      ->add_option("inputs", compile_options.inputs,
                   ".cir files, kernel libraries (.so) or DSL sources (.cpp)")
      ->required();
  compile
      ->add_option("--target", compile_options.targets,
                   "vulkan | interp | cuda:sm_XX | hip:gfxNNN (default: vulkan)")
      ->delimiter(',');
  compile->add_option("--emit", compile_options.emit,
                      "ir | spirv | spirv-asm | glsl | msl (vulkan); cuda | ptx | cubin (cuda); "
                      "hip | hsaco (hip) (default: ir)");
  compile
      ->add_option("-O", compile_options.opt_level,
                   "optimization level 0..3 (default: 0 for ir, 2 for code)")
      ->check(CLI::Range(0, 3));
  compile->add_option("--kernel", compile_options.kernel, "keep only this kernel");
  compile->add_option(
      "--dump-dir", compile_options.dump_dir,
      "write every stage per kernel here: <kernel>.input.cir, <kernel>.opt.cir, "
      "<kernel>.spvasm (vulkan), .cu (and .ptx with --emit ptx) (cuda), .hip (hip)");
  compile->add_flag("--print-after-all", compile_options.print_after_all,
                    "print the IR after every pass (to standard error)");
  compile->add_flag("--time-passes", compile_options.time_passes,
                    "report the time each pass takes (to standard error)");
  compile->add_option("-o", compile_options.output,
                      "output file (default: standard output); for --emit spirv with several "
                      "kernels, or a path ending in '/' or naming a directory: a directory of "
                      "<kernel>.spv files (likewise .ptx, .cubin, .hsaco; .cu and .hip for a "
                      "directory)");
  compile->footer(
      "Examples:\n  cubecc compile build/examples/libcubecc_examples.so --emit ir\n"
      "  cubecc compile axpy.cir --emit ir -O2 -o axpy.opt.cir\n"
      "  cubecc compile examples/kernels/axpy.cpp --target vulkan --emit spirv -o out/\n"
      "  cubecc compile axpy.cir --target cuda:sm_90 --emit ptx\n"
      "  cubecc compile build/examples/libcubecc_examples.so --target hip:gfx90a --emit hsaco "
      "-o out/\n"
      "  cubecc compile k.cir --target vulkan --emit glsl");

  CLI::App *kernels = app.add_subcommand("kernels", "list the kernels a kernel library registers");
  std::string library_path;
  bool hashes = false;
  kernels->add_option("library", library_path, "a kernel library (.so)")->required();
  kernels->add_flag("--hash", hashes, "trace each kernel and print its structural hash");

  CLI::App *env = app.add_subcommand("env", "build, inspect, verify and merge environment bundles");
  env->require_subcommand(1);
  CLI::App *env_build = env->add_subcommand(
      "build", "compile every kernel of the inputs for every target into a bundle (no GPU needed)");
  EnvBuildOptions build_options;
  env_build
      ->add_option("inputs", build_options.inputs,
                   ".cir files, kernel libraries (.so) or DSL sources (.cpp)")
      ->required();
  env_build
      ->add_option("--target", build_options.targets,
                   "cuda:sm_XX | hip:gfxNNN | vulkan | interp, comma-separated")
      ->required();
  env_build->add_option("-o", build_options.output, "the bundle to write (.cubeenv)")->required();
  env_build
      ->add_option("-O", build_options.opt_level,
                   "optimization level 0..3 (default 2: what the runtime loads)")
      ->check(CLI::Range(0, 3));
  env_build->add_option("-j,--jobs", build_options.jobs,
                        "compile jobs at once (default: all cores)");
  env_build->footer("Example:\n  cubecc env build build/examples/libcubecc_examples.so "
                    "--target cuda:sm_80,cuda:sm_90,hip:gfx90a,vulkan -o app.cubeenv");
  CLI::App *env_inspect =
      env->add_subcommand("inspect", "list a bundle's kernels, targets, sizes and tuning records");
  std::string bundle_path;
  bool inspect_json = false;
  env_inspect->add_option("bundle", bundle_path, "an environment bundle")->required();
  env_inspect->add_flag("--json", inspect_json, "machine-readable output");
  CLI::App *env_verify = env->add_subcommand(
      "verify", "check every entry's checksum and structure, and every binary's contents");
  env_verify->add_option("bundle", bundle_path, "an environment bundle")->required();
  CLI::App *env_merge = env->add_subcommand(
      "merge", "combine bundles (e.g. compiled kernels from CI with tuning records from GPU "
               "machines); a later input's binary or record replaces an earlier one's");
  std::vector<std::string> merge_inputs;
  std::string merge_output;
  env_merge->add_option("bundles", merge_inputs, "the bundles to merge")->required();
  env_merge->add_option("-o", merge_output, "the bundle to write")->required();

  CLI::App *tune = app.add_subcommand(
      "tune", "tune every tunable of kernel libraries on a device; write the records to a bundle");
  TuneCommandOptions tune_options;
  tune->add_option("inputs", tune_options.inputs, "kernel libraries (.so) or DSL sources (.cpp)")
      ->required();
  tune->add_option("--device", tune_options.device,
                   "vulkan | cuda | hip | interp (default: CUBECC_DEVICE or the best present)");
  tune->add_option("-o", tune_options.output, "the bundle of tuning records to write")->required();
  tune->add_option("--tunable", tune_options.tunable, "tune only this tunable");
  tune->add_option("--samples", tune_options.samples, "timed runs per variant (default 10)")
      ->check(CLI::Range(1, 1000));
  tune->add_option("--warmup", tune_options.warmup, "untimed runs per variant (default 2)")
      ->check(CLI::Range(0, 100));
  tune->footer("Example:\n  cubecc tune build/examples/libcubecc_examples.so --device vulkan -o "
               "tuning.cubeenv\n  cubecc env merge kernels.cubeenv tuning.cubeenv -o app.cubeenv");

  CLI::App *devices =
      app.add_subcommand("devices", "list the backends built in and the devices present");
  bool devices_json = false;
  devices->add_flag("--json", devices_json, "machine-readable output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? kSuccess : kUsageError;
  }

  if (version) {
    fmt::print("cubecc {}\nIR text format 1, structural hash version {}, environment bundle "
               "format {}\n",
               cubecc::version(), cubecc::ir::kStructuralHashVersion,
               cubecc::environments::kFormatVersion);
    // The compilers the CUDA and HIP backends drive, as found at run time.
    std::string why;
    std::string nvrtc = cubecc::codegen::nvrtc_version(&why);
    fmt::print("NVRTC {}\n", nvrtc.empty() ? "not available: " + why : nvrtc);
    why.clear();
    std::string hiprtc = cubecc::codegen::hiprtc_version(&why);
    fmt::print("hipRTC {}\n", hiprtc.empty() ? "not available: " + why : hiprtc);
    return kSuccess;
  }
  if (compile->parsed())
    return compile_command(compile_options);
  if (devices->parsed())
    return devices_command(devices_json);
  std::string command_line;
  for (int i = 0; i < argc; ++i)
    command_line += (i ? " " : "") + std::string(argv[i]);
  if (tune->parsed()) {
    tune_options.command_line = command_line;
    return tune_command(tune_options);
  }
  if (env_build->parsed()) {
    build_options.command_line = command_line;
    return env_build_command(build_options);
  }
  if (env_inspect->parsed())
    return env_inspect_command(bundle_path, inspect_json);
  if (env_verify->parsed())
    return env_verify_command(bundle_path);
  if (env_merge->parsed())
    return env_merge_command(merge_inputs, merge_output, command_line);
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
