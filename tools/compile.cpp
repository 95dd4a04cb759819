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

#include "cubecc/codegen/backend.h"
#include "cubecc/codegen/target.h"
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
#include <set>
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

/// A temporary directory in $TMPDIR (else /tmp) removed with everything in it when this goes
/// out of scope. When it cannot be made, path() is empty and error() says why.
class TempDir {
public:
  TempDir() {
    const char *tmpdir = std::getenv("TMPDIR");
    const bool from_env = tmpdir && *tmpdir;
    const std::string base = from_env ? tmpdir : "/tmp";
    std::string pattern = base + "/cubecc-XXXXXX";
    if (mkdtemp(pattern.data()))
      path_ = pattern;
    else
      error_ = fmt::format("cannot create a temporary directory in {}{}: {}{}", shown(base),
                           from_env ? " (TMPDIR)" : "", std::strerror(errno),
                           from_env ? "; set TMPDIR to a writable folder" : "");
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty())
      fs::remove_all(path_, ec);
  }
  const fs::path &path() const { return path_; }
  const std::string &error() const { return error_; }

private:
  fs::path path_;
  std::string error_;
};

/// Refuses a kernel name too long for every backend (kMaxKernelNameBytes), as an error of
/// `input`.
bool check_kernel_name(const std::string &input, const std::string &name,
                       std::vector<ir::Diagnostic> &errors) {
  if (name.size() <= kMaxKernelNameBytes)
    return true;
  errors.push_back({input,
                    0,
                    0,
                    fmt::format("kernel '{}': the name is {} bytes; cubecc compiles kernels whose "
                                "names are at most {} bytes (64 KiB)",
                                shown(name), name.size(), kMaxKernelNameBytes),
                    {}});
  return false;
}

bool check_kernel_names(const std::string &input, const dsl::KernelLibrary &library,
                        std::vector<ir::Diagnostic> &errors) {
  for (const auto &entry : library.kernels())
    if (!check_kernel_name(input, entry.name, errors))
      return false;
  return true;
}

/// An input a tool cannot read (tool_support.h: input_problem) as a located error.
bool check_input(const std::string &input, std::vector<ir::Diagnostic> &errors,
                 bool missing_ok = false) {
  if (auto problem = input_problem(input, missing_ok)) {
    errors.push_back({input, 0, 0, *problem, {}});
    return false;
  }
  return true;
}

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

/// Traces the kernels of the library at `path` (built from `input`, or `input` itself): every
/// one, or only `options.only`. A kernel that fails is reported and the rest are still traced.
bool trace_library(const std::string &path, const std::string &input, ir::Module &module,
                   std::vector<ir::Diagnostic> &errors, const LoadOptions &options) {
  std::string error;
  auto library = dsl::KernelLibrary::open(path, error);
  if (!library) {
    // A DSL source's temporary library is gone by the time this is read: name the source, and
    // say what to write in it.
    const std::string prefix = path + ": error: ";
    if (path != input && error.starts_with(prefix)) {
      std::string why = error.substr(prefix.size());
      if (why.starts_with("not a cubecc kernel library"))
        why = "it registers no kernel: register each with dsl::register_kernel<kernel>(\"name\", "
              "{.workgroup = ...}) at namespace scope (docs/dsl.md)";
      else if (why.starts_with("two kernels of the kernel table are named"))
        why.replace(0, std::string_view("two kernels of the kernel table are named").size(),
                    "two kernels are registered under the name");
      errors.push_back({input, 0, 0, why, {}});
      return false;
    }
    errors.push_back({"", 0, 0, error, {}});
    return false;
  }
  library->set_source_name(input); // not the temporary library a DSL source was built into
  if (!check_kernel_names(input, *library, errors))
    return false;
  bool ok = true;
  for (size_t i = 0; i < library->kernels().size(); ++i) {
    const dsl::KernelLibrary::Entry &entry = library->kernels()[i];
    if (options.names)
      options.names->push_back(entry.name);
    if (!options.only.empty() && entry.name != options.only)
      continue;
    if (!library->trace(i, module, errors)) {
      ok = false;
      continue;
    }
    if (options.configurations)
      (*options.configurations)[entry.name] = entry.configuration;
  }
  return ok;
}

} // namespace

std::unique_ptr<dsl::KernelLibrary> open_kernel_library(const std::string &input,
                                                        std::vector<ir::Diagnostic> &errors) {
  std::string error;
  // Each kernel name checked as the library is opened (a tunable's variants are kernels).
  auto checked = [&](std::unique_ptr<dsl::KernelLibrary> library,
                     const std::string &file) -> std::unique_ptr<dsl::KernelLibrary> {
    if (!library) {
      errors.push_back({file, 0, 0, error, {}});
      return nullptr;
    }
    return check_kernel_names(input, *library, errors) ? std::move(library) : nullptr;
  };
  if (ends_with(input, ".so")) {
    // A missing file is the loader's to report; a FIFO or a device would block dlopen.
    if (!check_input(input, errors, /*missing_ok=*/true))
      return nullptr;
    return checked(dsl::KernelLibrary::open(input, error), "");
  }
  if (ends_with(input, ".cpp") || ends_with(input, ".cc") || ends_with(input, ".cxx")) {
    if (!check_input(input, errors))
      return nullptr;
    TempDir dir; // removed on return: a loaded library stays mapped
    if (dir.path().empty()) {
      errors.push_back({input, 0, 0, dir.error(), {}});
      return nullptr;
    }
    fs::path path = dir.path() / "kernels.so";
    if (!build_kernel_library(input, path, errors))
      return nullptr;
    auto library = checked(dsl::KernelLibrary::open(path.string(), error), input);
    if (library)
      library->set_source_name(input);
    return library;
  }
  errors.push_back({input, 0, 0, "give a kernel library (.so) or a DSL source (.cpp)", {}});
  return nullptr;
}

namespace {

/// Parses and verifies a .cir input into `module`.
bool load_ir_file(const std::string &input, ir::Module &module, std::vector<ir::Diagnostic> &errors,
                  const LoadOptions &options) {
  std::string text, error;
  if (!read_ir_text(input, text, error)) {
    errors.push_back({input, 0, 0, error, {}});
    return false;
  }
  ir::ParseResult parsed = ir::parse_module(text, input);
  if (!parsed.module) {
    errors.insert(errors.end(), parsed.errors.begin(), parsed.errors.end());
    return false;
  }
  for (const auto &k : parsed.module->kernels()) {
    if (!check_kernel_name(input, k->name(), errors))
      return false;
    if (options.names)
      options.names->push_back(k->name());
  }
  auto problems = ir::verify(*parsed.module, &parsed.source_map);
  if (!problems.empty()) {
    errors.insert(errors.end(), problems.begin(), problems.end());
    return false;
  }
  for (const auto &k : parsed.module->kernels())
    if (module.find_kernel(k->name())) {
      errors.push_back({input,
                        0,
                        0,
                        fmt::format("kernel '{}' is defined by two inputs; kernel names must be "
                                    "unique",
                                    shown(k->name())),
                        {}});
      return false;
    }
  module.adopt_kernels(std::move(*parsed.module));
  return true;
}

} // namespace

bool load_inputs(const std::vector<std::string> &inputs, ir::Module &module,
                 std::vector<ir::Diagnostic> &errors, const LoadOptions &options) {
  bool ok = true;
  for (const std::string &input : inputs) {
    if (ends_with(input, ".so")) {
      // A missing file is the loader's to report; a FIFO or a device would block dlopen.
      ok &= check_input(input, errors, /*missing_ok=*/true) &&
            trace_library(input, input, module, errors, options);
    } else if (ends_with(input, ".cpp") || ends_with(input, ".cc") || ends_with(input, ".cxx")) {
      if (!check_input(input, errors)) {
        ok = false;
        continue;
      }
      TempDir dir;
      if (dir.path().empty()) {
        errors.push_back({input, 0, 0, dir.error(), {}});
        ok = false;
        continue;
      }
      fs::path library = dir.path() / "kernels.so";
      ok &= build_kernel_library(input, library, errors) &&
            trace_library(library.string(), input, module, errors, options);
    } else if (ends_with(input, ".cir")) {
      ok &= load_ir_file(input, module, errors, options);
    } else {
      errors.push_back({input,
                        0,
                        0,
                        "unknown input kind: give a .cir file (IR text), a .so kernel library or a "
                        ".cpp DSL source",
                        {}});
      ok = false;
    }
  }
  return ok;
}

namespace {

/// A file name for a kernel: its name with anything unusual replaced by '_' ("_" for @""), and a
/// leading '.' too, so that no kernel (@"..", @".hidden") becomes a hidden file.
std::string file_stem(const std::string &kernel) {
  std::string out = kernel.empty() ? "_" : kernel;
  for (char &c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      c = '_';
  if (out.front() == '.')
    out.front() = '_';
  return out;
}

/// Whether -o names a directory: a path ending in '/', or an existing directory.
bool names_directory(const std::string &output) {
  std::error_code ec;
  return output != "-" && (output.ends_with('/') || fs::is_directory(output, ec));
}

/// Creates `dir` (and its parents) for per-kernel files; prints why not.
int make_directory(const std::string &dir) {
  std::error_code ec, again;
  if (fs::create_directories(dir, ec) || fs::is_directory(dir, again))
    return kSuccess;
  std::cerr << fmt::format("{}: error: cannot create the directory: {}\n", shown(dir),
                           ec ? ec.message() : "a file of that name is in the way");
  return kUserError;
}

/// Writes one file per kernel, <dir>/<kernel stem><extension>.
int write_kernel_files(const std::string &dir, const std::string &extension,
                       const std::vector<std::pair<std::string, std::string>> &outputs) {
  if (int rc = make_directory(dir))
    return rc;
  for (const auto &[name, bytes] : outputs)
    if (int rc =
            write_output("cubecc", (fs::path(dir) / (file_stem(name) + extension)).string(), bytes))
      return rc;
  return kSuccess;
}

/// Two kernels whose names map to one file name ("a/b" and "a_b" both to a_b.spv) are refused
/// before anything is written, naming both: neither file silently replaces the other.
int check_file_names(const ir::Module &module) {
  std::map<std::string, std::string> by_stem;
  for (const auto &k : module.kernels()) {
    auto [it, inserted] = by_stem.emplace(file_stem(k->name()), k->name());
    if (!inserted) {
      std::cerr << fmt::format("cubecc: error: kernels '{}' and '{}' would both be written to "
                               "files named '{}.*'; rename one of them, or keep one with "
                               "--kernel\n",
                               shown(it->second), shown(k->name()), shown(it->first));
      return kUserError;
    }
  }
  return kSuccess;
}

/// A target of the command line, checked by its backend.
struct Target {
  std::string name;
  const codegen::Backend *backend = nullptr;
};

/// Writes one output per kernel: to standard output (text kinds concatenated with a comment naming
/// each kernel; a per-kernel kind only for one kernel), or, when there are several kernels of a
/// per-kernel kind or -o names a directory, to <dir>/<kernel><extension>.
int write_per_kernel(const CompileOptions &options, const codegen::EmitKind &kind,
                     const std::vector<std::pair<std::string, std::string>> &outputs) {
  if (names_directory(options.output) || (kind.per_kernel && outputs.size() > 1)) {
    if (options.output == "-") {
      std::cerr << fmt::format("cubecc: error: --emit {} writes one file per kernel and there are "
                               "{}: give -o <directory> or --kernel <name>\n",
                               kind.name, outputs.size());
      return kUsageError;
    }
    return write_kernel_files(options.output, kind.extension, outputs);
  }
  std::string all;
  for (const auto &[name, text] : outputs) {
    if (outputs.size() > 1)
      all += kind.comment + "kernel " + name + "\n";
    all += text;
  }
  return write_output("cubecc", options.output, all);
}

/// The kind `name` of `backend`, or null.
const codegen::EmitKind *find_emit_kind(const codegen::Backend &backend, std::string_view name) {
  for (const codegen::EmitKind &kind : backend.emit_kinds())
    if (kind.name == name)
      return &kind;
  return nullptr;
}

} // namespace

/// Writes the optimized module's code for one target (--emit other than ir), one module per
/// kernel; the intermediate stages go to the dump directory.
template <class Dump>
int emit_target(const ir::Module &module, const Target &target, const CompileOptions &options,
                Dump &dump) {
  const codegen::EmitKind &kind = *find_emit_kind(*target.backend, options.emit);
  std::vector<ir::Diagnostic> errors;
  std::vector<std::pair<std::string, std::string>> outputs; // (kernel, text or bytes)
  for (const auto &kernel : module.kernels()) {
    if (options.skip_unsupported) {
      std::vector<ir::Diagnostic> why;
      if (!target.backend->check_support(*kernel, target.name, why)) {
        say_left_out(kernel->name(), target.name, why.empty() ? "" : why.front().message);
        continue;
      }
    }
    std::optional<codegen::Emitted> emitted =
        target.backend->emit(*kernel, target.name, options.emit, errors);
    if (!emitted)
      return report(errors);
    for (const auto &[suffix, text] : emitted->stages)
      if (int rc = dump(kernel->name(), suffix, text))
        return rc;
    outputs.emplace_back(kernel->name(), std::move(emitted->output));
  }
  return write_per_kernel(options, kind, outputs);
}

namespace {

/// Optimizes the loaded kernels and writes what --emit asks for, for each target.
int compile_module(const CompileOptions &options, const std::vector<Target> &targets,
                   ir::Module &module, const std::vector<std::string> &names) {
  if (!options.kernel.empty()) {
    const ir::Kernel *keep = module.find_kernel(options.kernel);
    if (!keep) {
      std::string known;
      for (const std::string &name : names)
        known += (known.empty() ? "" : ", ") + shown(name);
      std::cerr << fmt::format("cubecc: error: no kernel named '{}' (kernels: {})\n",
                               shown(options.kernel), runtime::shorten_for_message(known, 4000));
      return kUserError;
    }
    while (module.kernels().size() > 1)
      for (const auto &k : module.kernels())
        if (k.get() != keep) {
          module.remove_kernel(k.get());
          break;
        }
  }

  // One file per kernel (several targets, -o a directory, several binaries; --dump-dir): no two
  // kernels may map to one file name.
  const bool per_kernel_kind = std::any_of(targets.begin(), targets.end(), [&](const Target &t) {
    const codegen::EmitKind *kind = find_emit_kind(*t.backend, options.emit);
    return kind && kind->per_kernel;
  });
  const bool per_kernel_files = options.emit != "ir" && options.output != "-" &&
                                (targets.size() > 1 || names_directory(options.output) ||
                                 (per_kernel_kind && module.kernels().size() > 1));
  if (per_kernel_files || !options.dump_dir.empty())
    if (int rc = check_file_names(module))
      return rc;

  // --dump-dir: each stage of each kernel in its own file (a target's in its subdirectory when
  // there are several).
  auto dump_to = [](std::string dir) {
    return [dir = std::move(dir)](const std::string &kernel, const std::string &suffix,
                                  const std::string &text) -> int {
      if (dir.empty())
        return kSuccess;
      if (int rc = make_directory(dir))
        return rc;
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
      std::cerr << fmt::format("cubecc: error: --print-after names unknown pass '{}'\n",
                               shown(name));
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
    return emit_target(module, targets.front(), options, dump);
  for (const Target &target : targets) {
    std::string subdirectory = target.name;
    std::replace(subdirectory.begin(), subdirectory.end(), ':', '_');
    CompileOptions one = options;
    one.output = (fs::path(options.output) / subdirectory).string() + "/";
    auto target_dump = dump_to(
        options.dump_dir.empty() ? "" : (fs::path(options.dump_dir) / subdirectory).string());
    if (int rc = emit_target(module, target, one, target_dump))
      return rc;
  }
  return kSuccess;
}

} // namespace

int compile_command(const CompileOptions &options) {
  // Every kind some backend emits, and "ir", which is the tools' own.
  std::vector<std::string> kinds = {"ir"};
  for (const codegen::Backend *backend : codegen::backends())
    for (const codegen::EmitKind &kind : backend->emit_kinds())
      if (std::find(kinds.begin(), kinds.end(), kind.name) == kinds.end())
        kinds.push_back(kind.name);
  if (std::find(kinds.begin(), kinds.end(), options.emit) == kinds.end()) {
    std::cerr << fmt::format("cubecc: error: unknown --emit kind '{}' (kinds: {})\n",
                             shown(options.emit), fmt::join(kinds, ", "));
    return kUsageError;
  }
  std::vector<Target> targets;
  for (const std::string &name : options.targets) {
    std::string error;
    std::optional<std::vector<std::string>> parsed = codegen::parse_targets({&name, 1}, error);
    if (!parsed) {
      std::cerr << "cubecc: error: " << shown_message(error) << "\n";
      return kUserError;
    }
    for (const std::string &t : *parsed) {
      Target target{t, codegen::find_backend(t)};
      if (options.emit != "ir" && !find_emit_kind(*target.backend, options.emit)) {
        std::vector<std::string> emits = {"ir"};
        for (const codegen::EmitKind &kind : target.backend->emit_kinds())
          emits.push_back(kind.name);
        std::cerr << fmt::format("cubecc: error: target '{}' cannot emit '{}' (it emits: {})\n",
                                 shown(t), options.emit, fmt::join(emits, ", "));
        return kUserError;
      }
      targets.push_back(std::move(target));
    }
  }
  if (options.emit != "ir" && targets.size() > 1) {
    // Several targets: each one's output goes to its own subdirectory of the -o directory.
    if (!names_directory(options.output)) {
      std::cerr << fmt::format("cubecc: error: --emit {} for {} targets writes one directory per "
                               "target: give -o a directory (ending in '/')\n",
                               options.emit, targets.size());
      return kUsageError;
    }
  }

  ir::Module module("kernels");
  std::vector<ir::Diagnostic> errors;
  // With --kernel, only that kernel of a library is traced: another that fails cannot stop it.
  // Without, a kernel that fails is reported and the others are compiled; the exit code says it.
  LoadOptions load;
  load.only = options.kernel;
  std::vector<std::string> names;
  load.names = &names;
  int load_rc = kSuccess;
  if (!load_inputs(options.inputs, module, errors, load)) {
    if (module.kernels().empty() || !options.kernel.empty())
      return report(errors);
    load_rc = report(errors);
    size_t others = module.kernels().size();
    std::cerr << fmt::format("cubecc: compiling the other {}\n",
                             others == 1 ? "kernel" : fmt::format("{} kernels", others));
  }
  int rc = compile_module(options, targets, module, names);
  return rc != kSuccess ? rc : load_rc;
}

} // namespace cubecc::tools
