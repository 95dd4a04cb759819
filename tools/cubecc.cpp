//===- cubecc.cpp - The cubecc command-line compiler ------------------------------------------===//
//
// The command-line contract of docs/cli.md:
//   cubecc compile <input>... --target <t> --emit <kind> [-O<n>] [--kernel <name>] [-o <out>]
//   cubecc kernels <library.so> [--hash] [--json]
//   cubecc env build|inspect|verify|merge ...
//   cubecc tune <input>... [--device <d>] -o <bundle>
//   cubecc devices [--json]
//   cubecc --version [--json]
// Inputs are .cir files, kernel libraries (.so) or DSL sources (.cpp); targets vulkan, interp,
// cuda:sm_XX (NVRTC) and hip:gfxNNN (hipRTC). A backend that is not built is a clear error, never
// a silent fallback. Every subcommand's --help ends with examples; exit codes: tool_support.h.
//
//===-----------------------------------------------------------------------------------------===//
#include "compile.h"
#include "devices.h"
#include "env.h"
#include "info.h"
#include "tool_support.h"
#include "tune.h"

#include "cubecc/codegen/backend.h"
#include "cubecc/runtime/log.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

namespace {

/// The first option or argument given an empty value (`--device ""`, `-o ''`), searched through
/// `app` and its subcommands; null if none. Every option of cubecc that takes a value means
/// something only with a non-empty one: an empty value would silently act as the option left
/// out (tune every tunable, the default device), so it is refused.
const CLI::Option *option_with_empty_value(const CLI::App &app) {
  for (const CLI::Option *o : app.get_options())
    if (o->count() > 0 && o->get_expected_min() > 0)
      for (const std::string &value : o->results())
        if (value.empty())
          return o;
  for (const CLI::App *sub : app.get_subcommands({}))
    if (const CLI::Option *o = option_with_empty_value(*sub))
      return o;
  return nullptr;
}

/// "vulkan | interp | cuda:sm_XX (sm_80 and newer, ...) | ...": every registered backend's grammar.
std::string targets_help() {
  std::string out;
  for (const cubecc::codegen::Backend *backend : cubecc::codegen::backends())
    out += (out.empty() ? "" : " | ") + std::string(backend->grammar());
  return out;
}

/// "ir; spirv | spirv-asm | glsl | msl (vulkan); ... (default: ir)".
std::string emit_help() {
  std::string out = "ir";
  for (const cubecc::codegen::Backend *backend : cubecc::codegen::backends()) {
    if (backend->emit_kinds().empty())
      continue;
    std::string kinds;
    for (const cubecc::codegen::EmitKind &kind : backend->emit_kinds())
      kinds += (kinds.empty() ? "" : " | ") + kind.name;
    out += fmt::format("; {} ({})", kinds, backend->name());
  }
  return out + " (default: ir)";
}

using namespace cubecc::tools;

int run(int argc, char **argv) {
  // CUBECC_LOG is read now, whatever the subcommand: a value it does not know is said at once
  // (once), not only if something happens to be logged.
  cubecc::runtime::log_level();
  CLI::App app{"cubecc: compile kernels written with the cubecc DSL or in cubecc IR for CUDA, "
               "HIP and Vulkan; build, inspect and merge environment bundles"};
  app.require_subcommand(0, 1);
  bool version = false, version_json = false;
  app.add_flag("--version", version,
               "print the versions of cubecc, its IR and bundle formats, and the toolkits found "
               "(NVRTC, hipRTC, SPIRV-Tools, SPIRV-Cross)");
  app.add_flag("--json", version_json, "with --version: machine-readable output");
  app.footer("Examples:\n"
             "  cubecc compile examples/kernels/axpy.cpp --target vulkan --emit spirv-asm\n"
             "  cubecc env build build/examples/libcubecc_examples.so --target vulkan,interp "
             "-o app.cubeenv\n"
             "  cubecc devices --json\n"
             "  cubecc --version\n\n"
             "Exit codes: 0 success; 1 user error (bad input, compile error, unsupported "
             "feature or target, a file that cannot be read or written); 2 usage error; 3 "
             "internal error (a bug in cubecc).\n"
             "Environment: CUBECC_DEVICE, CUBECC_ENV, CUBECC_CACHE_DIR, CUBECC_LOG, CXX (for "
             ".cpp inputs). See docs/cli.md.");

  CLI::App *compile = app.add_subcommand("compile", "compile kernels for a target");
  CompileOptions compile_options;
  compile
      ->add_option("inputs", compile_options.inputs,
                   ".cir files, kernel libraries (.so) or DSL sources (.cpp)")
      ->required();
  compile
      ->add_option("--target", compile_options.targets,
                   targets_help() + ", comma-separated (default: vulkan); for several, -o names a "
                                    "directory with one subdirectory per target")
      ->delimiter(',');
  compile->add_option("--emit", compile_options.emit, emit_help());
  compile
      ->add_option("-O", compile_options.opt_level,
                   "optimization level 0..3 (default: 0 for ir, 2 for code)")
      ->check(CLI::Range(0, 3));
  compile->add_option("--kernel", compile_options.kernel, "keep only this kernel");
  compile->add_option(
      "--dump-dir", compile_options.dump_dir,
      "write every stage per kernel here: <kernel>.input.cir, <kernel>.opt.cir and the "
      "target's intermediate code (<kernel>.spvasm, .cu, .ptx, .hip, .ll, ...)");
  compile->add_flag("--print-after-all", compile_options.print_after_all,
                    "print the IR after every pass (to standard error)");
  compile
      ->add_option("--print-after", compile_options.print_after,
                   "print the IR after the named passes (comma-separated; to standard error)")
      ->delimiter(',');
  bool verify_each = false;
  CLI::Option *verify_each_flag =
      compile->add_flag("--verify-each,!--no-verify-each", verify_each,
                        "verify the module after every pass (default: on in debug builds)");
  compile->add_flag("--time-passes", compile_options.time_passes,
                    "report the time each pass takes (to standard error)");
  compile->add_flag("--skip-unsupported", compile_options.skip_unsupported,
                    "leave out a kernel a target cannot run (a type, atomic, matrix shape or "
                    "subgroup size it lacks, shared memory or a workgroup over its limits), "
                    "saying which, instead of failing");
  compile->add_option("-o", compile_options.output,
                      "output file (default: standard output); for --emit spirv with several "
                      "kernels, or a path ending in '/' or naming a directory: a directory of "
                      "<kernel>.spv files (likewise .ptx, .cubin, .hsaco; .cu and .hip for a "
                      "directory)");
  compile->footer(
      "Examples:\n  cubecc compile build/examples/libcubecc_examples.so --emit ir\n"
      "  cubecc compile examples/ir/axpy.cir --emit ir -O2 -o axpy.opt.cir\n"
      "  cubecc compile examples/kernels/axpy.cpp --target vulkan --emit spirv -o out/\n"
      "  cubecc compile examples/ir/axpy.cir --target cuda:sm_90 --emit ptx\n"
      "  cubecc compile build/examples/libcubecc_examples.so --target hip:gfx90a --emit hsaco "
      "-o out/\n"
      "  cubecc compile examples/ir/reduce_sum.cir --target vulkan --emit glsl\n"
      "  cubecc compile examples/ir/axpy.cir --emit ir -O2 --verify-each --print-after licm\n"
      "  cubecc compile examples/ir/axpy.cir --target cuda:sm_80,cuda:sm_90 --emit cubin -o "
      "cubins/");

  CLI::App *kernels = app.add_subcommand("kernels", "list the kernels a kernel library registers");
  std::string library_path;
  bool hashes = false;
  bool kernels_json = false;
  kernels->add_option("library", library_path, "a kernel library (.so)")->required();
  kernels->add_flag("--hash", hashes, "trace each kernel and print its structural hash");
  kernels->add_flag("--json", kernels_json, "machine-readable output");
  kernels->footer("Examples:\n  cubecc kernels build/examples/libcubecc_examples.so\n"
                  "  cubecc kernels build/examples/libcubecc_examples.so --hash --json");

  // What a written bundle records about its making (reproducible unless asked otherwise).
  auto add_provenance = [](CLI::App *command, ProvenanceOptions &options) {
    command->add_option("--created-at", options.created_at,
                        "record this creation time: seconds since 1970, or 'now' (default: "
                        "$SOURCE_DATE_EPOCH, else none, so that rebuilds are byte-identical)");
    command->add_flag("--record-host", options.record_host, "record this machine's host name");
    command->add_flag("--record-command", options.record_command,
                      "record the whole command line (its paths included)");
  };
  CLI::App *env = app.add_subcommand(
      "env", "build, inspect, verify, sign, merge, diff and prune environment bundles");
  env->require_subcommand(1);
  env->footer("Examples:\n"
              "  cubecc env build build/examples/libcubecc_examples.so --target "
              "cuda:sm_90,vulkan -o app.cubeenv\n"
              "  cubecc env inspect app.cubeenv\n  cubecc env verify app.cubeenv\n"
              "  cubecc env merge app.cubeenv tuning.cubeenv -o merged.cubeenv\n"
              "  cubecc env diff app.cubeenv merged.cubeenv\n"
              "  cubecc env prune app.cubeenv --drop-target vulkan -o small.cubeenv\n"
              "  cubecc env keygen -o release\n"
              "  cubecc env sign app.cubeenv --key release.key -o signed.cubeenv\n"
              "  cubecc env verify signed.cubeenv --key release.pub\n"
              "Run 'cubecc env <subcommand> --help' for each one's options.");
  CLI::App *env_build = env->add_subcommand(
      "build", "compile every kernel of the inputs for every target into a bundle (no GPU needed)");
  EnvBuildOptions build_options;
  env_build
      ->add_option("inputs", build_options.inputs,
                   ".cir files, kernel libraries (.so) or DSL sources (.cpp)")
      ->required();
  env_build->add_option("--target", build_options.targets, targets_help() + ", comma-separated")
      ->required();
  env_build->add_option("-o", build_options.output, "the bundle to write (.cubeenv)")->required();
  env_build
      ->add_option("-O", build_options.opt_level,
                   "optimization level 0..3 (default 2: what the runtime loads)")
      ->check(CLI::Range(0, 3));
  env_build->add_option("-j,--jobs", build_options.jobs,
                        "compile jobs at once (default: all cores)");
  env_build->add_option("--shard", build_options.shard,
                        "I/N: build share I (1..N) of the (kernel, target) work, for a build "
                        "spread over N machines; `env merge` of the N bundles is the whole build");
  env_build->add_flag("--skip-unsupported", build_options.skip_unsupported,
                      "leave a kernel out of a target that cannot run it (a type, atomic, "
                      "matrix shape or subgroup size it lacks, shared memory or a workgroup over "
                      "its limits), saying which, instead of failing");
  add_provenance(env_build, build_options.provenance);
  env_build->footer("Examples:\n  cubecc env build build/examples/libcubecc_examples.so "
                    "--target cuda:sm_80,cuda:sm_90,hip:gfx90a,vulkan -o app.cubeenv\n"
                    "  cubecc env build build/examples/libcubecc_gemm.so "
                    "--target hip:gfx90a,interp --skip-unsupported -o gemm.cubeenv");
  CLI::App *env_inspect =
      env->add_subcommand("inspect", "list a bundle's kernels, targets, sizes and tuning records");
  std::string bundle_path;
  bool inspect_json = false;
  env_inspect->add_option("bundle", bundle_path, "an environment bundle")->required();
  env_inspect->add_flag("--json", inspect_json, "machine-readable output");
  env_inspect->footer("Examples:\n  cubecc env inspect app.cubeenv\n"
                      "  cubecc env inspect app.cubeenv --json");
  CLI::App *env_verify = env->add_subcommand(
      "verify", "check every entry's checksum and structure, and every binary's contents "
                "(SPIR-V validated, IR verified, CUBIN/code objects checked as ELF, tuning "
                "records parsed); exit 1 on any problem");
  bool verify_json = false;
  std::vector<std::string> verify_keys;
  env_verify->add_option("bundle", bundle_path, "an environment bundle")->required();
  env_verify->add_flag("--json", verify_json, "machine-readable output");
  env_verify->add_option("--key", verify_keys,
                         "require a signature by this public key (a .pub file or 64 hexadecimal "
                         "digits; repeat for several, any one will do)");
  env_verify->footer("Examples:\n  cubecc env verify app.cubeenv\n"
                     "  cubecc env verify app.cubeenv --json\n"
                     "  cubecc env verify signed.cubeenv --key ci.pub");
  CLI::App *env_keygen = env->add_subcommand(
      "keygen", "make an Ed25519 key pair for signing bundles: NAME.key (secret) and NAME.pub");
  std::string keygen_name;
  env_keygen->add_option("-o", keygen_name, "the key pair's name: writes NAME.key and NAME.pub")
      ->required();
  env_keygen->footer("Example:\n  cubecc env keygen -o ci");
  CLI::App *env_sign = env->add_subcommand(
      "sign", "sign a bundle (every byte) with a secret key; runtimes trusting its public key "
              "then use it, and refuse it if any byte changes");
  std::string sign_key, sign_output;
  env_sign->add_option("bundle", bundle_path, "the bundle to sign")->required();
  env_sign->add_option("--key", sign_key, "the secret key file (`cubecc env keygen`)")->required();
  env_sign->add_option("-o", sign_output, "write the signed bundle here (default: in place)");
  env_sign->footer("Example:\n  cubecc env sign app.cubeenv --key ci.key -o signed.cubeenv");
  CLI::App *env_merge = env->add_subcommand(
      "merge", "combine bundles (e.g. compiled kernels from CI with tuning records from GPU "
               "machines); a later input's binary or record replaces an earlier one's");
  std::vector<std::string> merge_inputs;
  std::string merge_output;
  env_merge->add_option("bundles", merge_inputs, "the bundles to merge")->required();
  env_merge->add_option("-o", merge_output, "the bundle to write")->required();
  ProvenanceOptions merge_provenance;
  add_provenance(env_merge, merge_provenance);
  env_merge->footer("Example:\n  cubecc env merge app.cubeenv tuning.cubeenv -o merged.cubeenv");

  CLI::App *env_diff = env->add_subcommand(
      "diff", "which kernels, binaries and tuning records differ between two bundles");
  std::string diff_a, diff_b;
  bool diff_json = false;
  env_diff->add_option("a", diff_a, "a bundle")->required();
  env_diff->add_option("b", diff_b, "another bundle")->required();
  env_diff->add_flag("--json", diff_json, "machine-readable output");
  env_diff->footer("Examples:\n  cubecc env diff app.cubeenv merged.cubeenv\n"
                   "  cubecc env diff app.cubeenv merged.cubeenv --json");
  CLI::App *env_prune =
      env->add_subcommand("prune", "write a bundle without some targets' binaries or some kernels");
  EnvPruneOptions prune_options;
  env_prune->add_option("bundle", prune_options.input, "the bundle to prune")->required();
  env_prune->add_option("-o", prune_options.output, "the bundle to write")->required();
  env_prune
      ->add_option("--drop-target", prune_options.drop_targets,
                   "drop the binaries of these targets (comma-separated or repeated)")
      ->delimiter(',');
  env_prune
      ->add_option("--drop-kernel", prune_options.drop_kernels,
                   "drop the kernels of these names (comma-separated or repeated)")
      ->delimiter(',');
  env_prune->footer("Example:\n  cubecc env prune app.cubeenv --drop-target vulkan -o "
                    "small.cubeenv");

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
  add_provenance(tune, tune_options.provenance);
  tune->footer("Examples:\n  cubecc tune build/examples/libcubecc_examples.so --device vulkan "
               "--samples 3 -o tuning.cubeenv\n"
               "  cubecc env merge app.cubeenv tuning.cubeenv -o merged.cubeenv");

  CLI::App *devices =
      app.add_subcommand("devices", "list the backends built in and the devices present");
  bool devices_json = false;
  devices->add_flag("--json", devices_json, "machine-readable output");
  devices->footer("Examples:\n  cubecc devices\n  cubecc devices --json\n"
                  "  CUBECC_DEVICE=interp cubecc devices");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? kSuccess : kUsageError;
  }
  if (const CLI::Option *empty = option_with_empty_value(app)) {
    std::cerr << fmt::format("cubecc: error: {} is empty: give it a value or leave it out\n",
                             empty->nonpositional() ? empty->get_name() : empty->get_name(true));
    return kUsageError;
  }

  if (version_json && !version) {
    std::cerr << "cubecc: error: --json without a subcommand needs --version\n";
    return kUsageError;
  }
  if (version)
    return version_command(version_json);
  if (compile->parsed()) {
    if (verify_each_flag->count())
      compile_options.verify_each = verify_each;
    return compile_command(compile_options);
  }
  if (devices->parsed())
    return devices_command(devices_json);
  std::string command_line;
  for (int i = 0; i < argc; ++i)
    command_line += (i ? " " : "") + std::string(argv[i]);
  if (tune->parsed()) {
    tune_options.provenance.tool = "cubecc tune";
    tune_options.provenance.command_line = command_line;
    return tune_command(tune_options);
  }
  if (env_build->parsed()) {
    build_options.provenance.tool = "cubecc env build";
    build_options.provenance.command_line = command_line;
    return env_build_command(build_options);
  }
  if (env_inspect->parsed())
    return env_inspect_command(bundle_path, inspect_json);
  if (env_verify->parsed())
    return env_verify_command(bundle_path, verify_json, verify_keys);
  if (env_keygen->parsed())
    return env_keygen_command(keygen_name);
  if (env_sign->parsed())
    return env_sign_command(bundle_path, sign_key, sign_output);
  if (env_diff->parsed())
    return env_diff_command(diff_a, diff_b, diff_json);
  if (env_prune->parsed()) {
    if (prune_options.drop_targets.empty() && prune_options.drop_kernels.empty()) {
      std::cerr << "cubecc: error: env prune needs --drop-target or --drop-kernel\n";
      return kUsageError;
    }
    return env_prune_command(prune_options);
  }
  if (env_merge->parsed()) {
    merge_provenance.tool = "cubecc env merge";
    merge_provenance.command_line = command_line;
    return env_merge_command(merge_inputs, merge_output, merge_provenance);
  }
  if (kernels->parsed())
    return kernels_command(library_path, hashes, kernels_json);
  std::cout << app.help();
  return kUsageError;
}

} // namespace

int main(int argc, char **argv) {
  return run_tool("cubecc", [&] { return run(argc, argv); });
}
