//===- compile.cpp - `cubecc compile`: inputs to IR, IR to each target's code -----------------===//
//
// Inputs: .cir (IR text), .so (kernel libraries built with the DSL) and .cpp (DSL sources, built
// here with the host C++ compiler into a temporary kernel library, then traced like a .so).
// Every kernel is optimized at the chosen level, then emitted for the target; every SPIR-V module
// is validated in process before it is written, so a writer bug is an internal error, never a
// file that fails later on a device.
//
//===-----------------------------------------------------------------------------------------===//
#include "compile.h"

#include "cubecc/codegen/hip.h"
#include "cubecc/codegen/spirv.h"
#include "cubecc/dsl/kernel_library_loader.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"
#include "tool_support.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace cubecc::tools {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// A temporary directory removed with everything in it when this goes out of scope.
class TempDir {
public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "cubecc-XXXXXX").string();
    if (mkdtemp(pattern.data()))
      path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty())
      fs::remove_all(path_, ec);
  }
  const fs::path &path() const { return path_; }

private:
  fs::path path_;
};

/// What a kernel library is built with: the DSL and IR headers and static libraries, and the
/// version script that leaves only the library's C table exported.
struct KernelLibraryKit {
  std::vector<std::string> include_dirs;
  std::vector<std::string> libraries;
  std::string version_script;
};

/// The kit of an installed cubecc (<prefix>/bin/cubecc finds <prefix>/lib/cubecc/ and
/// <prefix>/share/cubecc/), else that of the build tree this cubecc was built in.
KernelLibraryKit kernel_library_kit() {
  std::error_code ec;
  fs::path prefix = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path();
  fs::path map = prefix / CUBECC_INSTALL_DATADIR / "cubecc" / "kernel_library.map";
  fs::path kit = prefix / CUBECC_INSTALL_LIBDIR / "cubecc";
  if (!ec && fs::exists(map, ec) && fs::exists(kit / "libcubecc_dsl.a", ec))
    return {{(prefix / CUBECC_INSTALL_INCLUDEDIR).string()},
            {(kit / "libcubecc_dsl.a").string(), (kit / "libcubecc_ir.a").string()},
            map.string()};
  return {{CUBECC_DSL_INCLUDE, CUBECC_IR_INCLUDE},
          {CUBECC_DSL_LIBRARY, CUBECC_IR_LIBRARY},
          CUBECC_KERNEL_LIBRARY_MAP};
}

/// Builds a DSL source into a kernel library with the host C++ compiler (the one cubecc was
/// built with, or $CXX), linking the DSL and IR libraries of this cubecc.
bool build_kernel_library(const std::string &source, const fs::path &library,
                          std::vector<ir::Diagnostic> &errors) {
  const char *cxx = std::getenv("CXX");
  std::vector<std::string> args = {cxx && *cxx ? cxx : CUBECC_HOST_CXX};
  std::istringstream flags(CUBECC_HOST_CXX_FLAGS);
  for (std::string flag; flags >> flag;)
    args.push_back(flag);
  KernelLibraryKit kit = kernel_library_kit();
  for (const char *arg : {"-std=c++20", "-O1", "-fPIC", "-shared"})
    args.push_back(arg);
  for (const std::string &dir : kit.include_dirs)
    args.push_back("-I" + dir);
  args.push_back(source);
  args.push_back("-o");
  args.push_back(library.string());
  for (const std::string &archive : kit.libraries)
    args.push_back(archive);
  for (const char *arg : {"-lfmt", "-lxxhash", "-ldl"})
    args.push_back(arg);
  args.push_back("-Wl,--version-script=" + kit.version_script);

  fs::path log = library.parent_path() / "compiler.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int spawn_error = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error) {
    errors.push_back({source,
                      0,
                      0,
                      fmt::format("cannot run the C++ compiler '{}': {} (set CXX to a C++20 "
                                  "compiler)",
                                  args[0], std::strerror(spawn_error)),
                      {}});
    return false;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return true;
  std::ifstream in(log);
  std::ostringstream text;
  text << in.rdbuf();
  errors.push_back({source,
                    0,
                    0,
                    fmt::format("the C++ compiler '{}' failed to build the kernel source:\n{}",
                                args[0], text.str()),
                    {}});
  return false;
}

bool trace_library(const std::string &path, ir::Module &module, std::vector<ir::Diagnostic> &errors,
                   std::map<std::string, std::string> *configurations) {
  std::string error;
  auto library = dsl::KernelLibrary::open(path, error);
  if (!library) {
    errors.push_back({"", 0, 0, error, {}});
    return false;
  }
  for (size_t i = 0; i < library->kernels().size(); ++i) {
    if (!library->trace(i, module, errors))
      return false;
    if (configurations)
      (*configurations)[library->kernels()[i].name] = library->kernels()[i].configuration;
  }
  return true;
}

} // namespace

std::unique_ptr<dsl::KernelLibrary> open_kernel_library(const std::string &input,
                                                        std::vector<ir::Diagnostic> &errors) {
  std::string error;
  if (ends_with(input, ".so")) {
    auto library = dsl::KernelLibrary::open(input, error);
    if (!library)
      errors.push_back({"", 0, 0, error, {}});
    return library;
  }
  if (ends_with(input, ".cpp") || ends_with(input, ".cc") || ends_with(input, ".cxx")) {
    if (!fs::exists(input)) {
      errors.push_back({input, 0, 0, "cannot open the file: no such file", {}});
      return nullptr;
    }
    TempDir dir; // removed on return: a loaded library stays mapped
    if (dir.path().empty()) {
      errors.push_back({input, 0, 0, "cannot create a temporary directory", {}});
      return nullptr;
    }
    fs::path path = dir.path() / "kernels.so";
    if (!build_kernel_library(input, path, errors))
      return nullptr;
    auto library = dsl::KernelLibrary::open(path.string(), error);
    if (!library)
      errors.push_back({input, 0, 0, error, {}});
    return library;
  }
  errors.push_back({input, 0, 0, "give a kernel library (.so) or a DSL source (.cpp)", {}});
  return nullptr;
}

bool load_inputs(const std::vector<std::string> &inputs, ir::Module &module,
                 std::vector<ir::Diagnostic> &errors,
                 std::map<std::string, std::string> *configurations) {
  for (const std::string &input : inputs) {
    if (ends_with(input, ".so")) {
      if (!trace_library(input, module, errors, configurations))
        return false;
    } else if (ends_with(input, ".cpp") || ends_with(input, ".cc") || ends_with(input, ".cxx")) {
      if (!fs::exists(input)) {
        errors.push_back({input, 0, 0, "cannot open the file: no such file", {}});
        return false;
      }
      TempDir dir;
      if (dir.path().empty()) {
        errors.push_back({input, 0, 0, "cannot create a temporary directory", {}});
        return false;
      }
      fs::path library = dir.path() / "kernels.so";
      if (!build_kernel_library(input, library, errors) ||
          !trace_library(library.string(), module, errors, configurations))
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
      ir::ParseResult parsed = ir::parse_module(text.str(), input);
      if (!parsed.module) {
        errors.insert(errors.end(), parsed.errors.begin(), parsed.errors.end());
        return false;
      }
      auto problems = ir::verify(*parsed.module, &parsed.source_map);
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
                        "unknown input kind: give a .cir file (IR text), a .so kernel library or a "
                        ".cpp DSL source",
                        {}});
      return false;
    }
  }
  return true;
}

namespace {

/// A file name for a kernel: its name with anything unusual replaced by '_'.
std::string file_stem(const std::string &kernel) {
  std::string out = kernel;
  for (char &c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      c = '_';
  return out;
}

/// What a target is and whether this cubecc can generate code for it.
struct Target {
  std::string name;
  std::vector<std::string> emits; ///< the --emit kinds it produces
  std::string unavailable;        ///< why it cannot be used, if it cannot
};

Target parse_target(const std::string &name) {
  if (name == "vulkan")
    return {name, {"ir", "spirv", "spirv-asm", "glsl", "msl"}, {}};
  if (name == "interp")
    return {name, {"ir"}, {}};
  // CUDA and HIP: the source needs no toolkit; PTX, CUBIN and code objects need NVRTC or
  // hipRTC, whose absence compile_cuda / compile_hip report.
  static const std::regex sm(R"(cuda:sm_(\d{2,4})[af]?)");
  static const std::regex gfx(R"(hip:gfx[0-9a-f]{3,4}(:[a-z]+[+-])*)");
  std::smatch m;
  if (std::regex_match(name, m, sm)) {
    if (std::stoi(m[1]) < 80)
      return {name, {}, fmt::format("target '{}': cubecc compiles for sm_80 and newer", name)};
    return {name, {"ir", "cuda", "ptx", "cubin"}, {}};
  }
  if (std::regex_match(name, gfx))
    return {name, {"ir", "hip", "hsaco"}, {}};
  return {name,
          {},
          fmt::format("unknown target '{}' (targets: vulkan, interp, cuda:sm_80, cuda:sm_90, "
                      "cuda:sm_90a, cuda:sm_100, hip:gfx90a, hip:gfx942)",
                      name)};
}

/// Writes one output per kernel: to standard output (sources and PTX, concatenated with a
/// comment naming each kernel; a binary only for one kernel), or, when there are several kernels
/// of a binary or PTX kind or -o names a directory, to <dir>/<kernel><extension>.
int write_per_kernel(const CompileOptions &options, const std::string &extension, bool binary,
                     const std::vector<std::pair<std::string, std::string>> &outputs) {
  bool to_directory =
      options.output != "-" && (options.output.ends_with('/') || fs::is_directory(options.output));
  if (to_directory || (binary && outputs.size() > 1)) {
    if (options.output == "-") {
      std::cerr << fmt::format("cubecc: error: --emit {} writes one file per kernel and there are "
                               "{}: give -o <directory> or --kernel <name>\n",
                               options.emit, outputs.size());
      return kUsageError;
    }
    std::error_code ec;
    fs::create_directories(options.output, ec);
    for (const auto &[name, bytes] : outputs)
      if (int rc = write_output(
              "cubecc", (fs::path(options.output) / (file_stem(name) + extension)).string(), bytes))
        return rc;
    return kSuccess;
  }
  std::string all;
  for (const auto &[name, text] : outputs) {
    if (outputs.size() > 1)
      all += "// kernel " + name + "\n";
    all += text;
  }
  return write_output("cubecc", options.output, all);
}

/// A compiler error on source cubecc wrote is cubecc's bug (exit 3); a refusal (a feature the
/// target lacks, an unknown architecture, a backend not built) is the user's (exit 1).
int report_c_family(const std::vector<ir::Diagnostic> &errors) {
  for (const ir::Diagnostic &e : errors)
    if (e.message.find("NVRTC failed") != std::string::npos ||
        e.message.find("hipRTC failed") != std::string::npos) {
      std::cerr << ir::to_string(errors)
                << "cubecc: internal error: the generated source does not compile. This is a bug "
                   "in cubecc; please report it with the input that caused it.\n";
      return kInternalError;
    }
  return report(errors);
}

/// --target cuda:sm_XX (--emit cuda, ptx, cubin) and hip:gfxNNN (--emit hip, hsaco).
template <class Dump>
int emit_c_family(const ir::Module &module, const std::string &target,
                  const CompileOptions &options, Dump &dump) {
  const bool cuda = target.starts_with("cuda:");
  const std::string arch = target.substr(target.find(':') + 1);
  std::vector<ir::Diagnostic> errors;
  std::vector<std::pair<std::string, std::string>> outputs; // (kernel, text or bytes)
  for (const auto &kernel : module.kernels()) {
    std::string out;
    if (options.emit == "cuda" || options.emit == "hip") {
      auto source = cuda ? codegen::emit_cuda(*kernel, codegen::cuda_features(arch), errors)
                         : codegen::emit_hip(*kernel, codegen::hip_features(arch), errors);
      if (!source)
        return report(errors);
      out = std::move(source->text);
    } else if (cuda) {
      // One NVRTC run: the output asked for (the dump directory gets PTX with --emit ptx).
      auto binary = codegen::compile_cuda(*kernel, {arch}, errors,
                                          options.emit == "ptx" ? codegen::CudaOutputs::Ptx
                                                                : codegen::CudaOutputs::Cubins);
      if (!binary)
        return report_c_family(errors);
      if (int rc = dump(kernel->name(), ".cu", binary->source.text))
        return rc;
      if (!binary->ptx.empty())
        if (int rc = dump(kernel->name(), ".ptx", binary->ptx))
          return rc;
      out = options.emit == "ptx" ? std::move(binary->ptx) : std::move(binary->cubins[0].bytes);
    } else {
      auto binary = codegen::compile_hip(*kernel, {arch}, errors);
      if (!binary)
        return report_c_family(errors);
      if (int rc = dump(kernel->name(), ".hip", binary->source.text))
        return rc;
      out = std::move(binary->code_objects[0].bytes);
    }
    outputs.emplace_back(kernel->name(), std::move(out));
  }
  static const std::map<std::string, std::pair<std::string, bool>> kFiles = {
      {"cuda", {".cu", false}},
      {"hip", {".hip", false}},
      {"ptx", {".ptx", true}}, // one module per kernel: several do not concatenate
      {"cubin", {".cubin", true}},
      {"hsaco", {".hsaco", true}}};
  const auto &[extension, binary] = kFiles.at(options.emit);
  return write_per_kernel(options, extension, binary, outputs);
}

} // namespace

/// Writes the optimized module's code for one target (--emit other than ir).
template <class Dump>
int emit_target(const ir::Module &module, const std::string &target, const CompileOptions &options,
                Dump &dump) {
  if (target.starts_with("cuda:") || target.starts_with("hip:"))
    return emit_c_family(module, target, options, dump);
  std::vector<ir::Diagnostic> errors;

  // SPIR-V and what is derived from it, one module per kernel.
  codegen::TargetFeatures features = options.emit == "msl"
                                         ? codegen::TargetFeatures::metal_baseline()
                                         : codegen::TargetFeatures::vulkan_baseline();
  std::vector<std::pair<std::string, std::string>> outputs; // (kernel, bytes or text)
  for (const auto &kernel : module.kernels()) {
    auto spirv = codegen::emit_spirv(*kernel, features, errors);
    if (!spirv)
      return report(errors);
    if (std::string problems = codegen::validate_spirv(spirv->words); !problems.empty()) {
      std::cerr << fmt::format("cubecc: internal error: the SPIR-V written for kernel '{}' does "
                               "not validate:\n{}This is a bug in cubecc; please report it with "
                               "the input that caused it.\n",
                               kernel->name(), problems);
      return kInternalError;
    }
    if (int rc = dump(kernel->name(), ".spvasm", codegen::disassemble_spirv(spirv->words)))
      return rc;
    std::string text;
    if (options.emit == "spirv") {
      text.assign(reinterpret_cast<const char *>(spirv->words.data()), spirv->words.size() * 4);
    } else if (options.emit == "spirv-asm") {
      text = codegen::disassemble_spirv(spirv->words);
    } else {
      std::string error;
      auto source = options.emit == "glsl" ? codegen::spirv_to_glsl(spirv->words, error)
                                           : codegen::spirv_to_msl(spirv->words, error);
      if (!source) {
        std::cerr << fmt::format("cubecc: error: kernel '{}': {}\n", kernel->name(), error);
        return kUserError;
      }
      text = std::move(*source);
    }
    outputs.emplace_back(kernel->name(), std::move(text));
  }

  bool to_directory =
      options.output != "-" && (options.output.ends_with('/') || fs::is_directory(options.output));
  if (options.emit == "spirv" && (outputs.size() > 1 || to_directory)) {
    // One binary per kernel: -o names a directory.
    if (options.output == "-") {
      std::cerr << fmt::format("cubecc: error: --emit spirv writes one binary per kernel and "
                               "there are {}: give -o <directory> or --kernel <name>\n",
                               outputs.size());
      return kUsageError;
    }
    std::error_code ec;
    fs::create_directories(options.output, ec);
    for (const auto &[name, bytes] : outputs)
      if (int rc = write_output(
              "cubecc", (fs::path(options.output) / (file_stem(name) + ".spv")).string(), bytes))
        return rc;
    return kSuccess;
  }
  std::string all;
  std::string comment = options.emit == "spirv-asm" ? "; " : "// ";
  for (const auto &[name, text] : outputs) {
    if (outputs.size() > 1)
      all += comment + "kernel " + name + "\n";
    all += text;
  }
  return write_output("cubecc", options.output, all);
}

int compile_command(const CompileOptions &options) {
  static const std::vector<std::string> kKinds = {"ir",    "cuda",  "ptx",       "cubin", "hip",
                                                  "hsaco", "spirv", "spirv-asm", "glsl",  "msl"};
  if (std::find(kKinds.begin(), kKinds.end(), options.emit) == kKinds.end()) {
    std::cerr << fmt::format("cubecc: error: unknown --emit kind '{}' (kinds: ir, cuda, ptx, "
                             "cubin, hip, hsaco, spirv, spirv-asm, glsl, msl)\n",
                             options.emit);
    return kUsageError;
  }
  std::vector<Target> targets;
  for (const std::string &name : options.targets) {
    Target target = parse_target(name);
    if (!target.unavailable.empty()) {
      std::cerr << "cubecc: error: " << target.unavailable << "\n";
      return kUserError;
    }
    if (std::find(target.emits.begin(), target.emits.end(), options.emit) == target.emits.end()) {
      std::string kinds;
      for (const std::string &k : target.emits)
        kinds += (kinds.empty() ? "" : ", ") + k;
      std::cerr << fmt::format("cubecc: error: target '{}' cannot emit '{}' (it emits: {})\n", name,
                               options.emit, kinds);
      return kUserError;
    }
    targets.push_back(std::move(target));
  }
  if (options.emit != "ir" && targets.size() > 1) {
    // Several targets: each one's output goes to its own subdirectory of the -o directory.
    std::error_code ec;
    if (options.output == "-" ||
        (!options.output.ends_with('/') && !fs::is_directory(options.output, ec))) {
      std::cerr << fmt::format("cubecc: error: --emit {} for {} targets writes one directory per "
                               "target: give -o a directory (ending in '/')\n",
                               options.emit, targets.size());
      return kUsageError;
    }
  }

  ir::Module module("kernels");
  std::vector<ir::Diagnostic> errors;
  if (!load_inputs(options.inputs, module, errors))
    return report(errors);
  if (!options.kernel.empty()) {
    const ir::Kernel *keep = module.find_kernel(options.kernel);
    if (!keep) {
      std::string known;
      for (const auto &k : module.kernels())
        known += (known.empty() ? "" : ", ") + k->name();
      std::cerr << fmt::format("cubecc: error: no kernel named '{}' (kernels: {})\n",
                               options.kernel, known);
      return kUserError;
    }
    while (module.kernels().size() > 1)
      for (const auto &k : module.kernels())
        if (k.get() != keep) {
          module.remove_kernel(k.get());
          break;
        }
  }

  // --dump-dir: each stage of each kernel in its own file (a target's in its subdirectory when
  // there are several).
  auto dump_to = [](std::string dir) {
    return [dir = std::move(dir)](const std::string &kernel, const std::string &suffix,
                                  const std::string &text) -> int {
      if (dir.empty())
        return kSuccess;
      std::error_code ec;
      fs::create_directories(dir, ec);
      return write_output("cubecc", (fs::path(dir) / (file_stem(kernel) + suffix)).string(), text);
    };
  };
  auto dump = dump_to(options.dump_dir);
  if (!options.dump_dir.empty())
    for (const auto &kernel : module.kernels())
      if (int rc = dump(kernel->name(), ".input.cir", ir::to_string(*kernel)))
        return rc;

  int level = options.opt_level >= 0 ? options.opt_level : options.emit == "ir" ? 0 : 2;
  passes::PassManagerOptions pass_options;
  pass_options.print_after_all = options.print_after_all;
  pass_options.print_after = options.print_after;
  if (options.verify_each)
    pass_options.verify_each = *options.verify_each;
  pass_options.time_passes = options.time_passes;
  for (const std::string &name : options.print_after)
    if (!passes::find_pass(name)) {
      std::cerr << fmt::format("cubecc: error: --print-after names unknown pass '{}'\n", name);
      return kUsageError;
    }
  passes::PassManager manager(pass_options);
  for (std::string_view name : passes::optimization_pipeline(level))
    manager.add(*passes::find_pass(name));
  if (auto errors_after = manager.run(module, std::cerr, std::cerr); !errors_after.empty())
    return report(errors_after);
  if (!options.dump_dir.empty())
    for (const auto &kernel : module.kernels())
      if (int rc = dump(kernel->name(), ".opt.cir", ir::to_string(*kernel)))
        return rc;
  if (options.emit == "ir")
    return write_output("cubecc", options.output, ir::to_string(module));
  if (targets.size() == 1)
    return emit_target(module, targets.front().name, options, dump);
  for (const Target &target : targets) {
    std::string subdirectory = target.name;
    std::replace(subdirectory.begin(), subdirectory.end(), ':', '_');
    CompileOptions one = options;
    one.output = (fs::path(options.output) / subdirectory).string() + "/";
    auto target_dump = dump_to(
        options.dump_dir.empty() ? "" : (fs::path(options.dump_dir) / subdirectory).string());
    if (int rc = emit_target(module, target.name, one, target_dump))
      return rc;
  }
  return kSuccess;
}

} // namespace cubecc::tools
