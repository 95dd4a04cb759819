//===- backend.h - One interface for every code generation backend ----------------------------===//
//
// A backend is one registration: its target grammar (parse and print: `cuda:sm_90`, `hip:gfx90a`,
// `vulkan`, `cpu:x86-64-v3`), the features a target assumes, the kinds of output `cubecc compile
// --emit` can ask of it, compile → artifacts (what environment bundles store), and the toolkit it
// drives. The command-line tools, the bundle builder, `--version` and `--help` iterate the
// registered backends: no target or backend name is spelled outside the backend's own folder.
//
// Registering: a backend folder under codegen/ calls `cubecc_add_backend(<name> SOURCES ...)` in
// its CMakeLists.txt and defines `const Backend &<name>_backend()`; codegen/CMakeLists.txt lists
// the folders (one `add_subdirectory` line each) and generates the table backends() returns.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/codegen/target.h"
#include "cubecc/ir/diagnostic.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::ir {
class Kernel;
}

namespace cubecc::codegen {

/// One compiled kernel for one target, as environment bundles store it and devices load it.
struct Artifact {
  std::string target;   ///< "cuda:sm_90", "cuda:compute_80", "vulkan", "cpu:x86-64-v3"
  std::string format;   ///< "cubin", "ptx", "hsaco", "spirv", "ir", "elf"
  std::string features; ///< TargetFeatures::fingerprint() the code assumes; "" when none
  std::string toolkit;  ///< the compiler that made it ("NVRTC 13.0"); "" when none
  std::string entry;    ///< the entry point's symbol (C-family targets), else ""
  KernelAbi abi;
  std::string bytes;
};

/// A kind of output `cubecc compile --emit <name>` asks for.
struct EmitKind {
  std::string name;      ///< "ptx"
  std::string extension; ///< of the file per kernel: ".ptx"
  /// One module per kernel that must not be concatenated (binaries, PTX): several kernels need
  /// `-o <directory>`.
  bool per_kernel = false;
  /// Raw bytes (never written to a terminal as text).
  bool binary = false;
  /// How a line comment starts in it: kernels of a text kind written to one stream are separated
  /// by "<comment>kernel <name>" lines.
  std::string comment = "// ";
};

/// What `emit` made for one kernel: the output, and the intermediate stages `--dump-dir` writes
/// (file suffix and contents: ".cu" and the CUDA source, ".spvasm" and the disassembly, ...).
struct Emitted {
  std::string output;
  std::vector<std::pair<std::string, std::string>> stages;
};

/// The compiler a backend drives, as found in this process.
struct Toolkit {
  std::string name;    ///< "NVRTC", "hipRTC", "LLVM", "SPIRV-Tools"
  std::string version; ///< "" when it is not available
  std::string why_not; ///< when it is not available: why
  /// "NVRTC 13.0" (what bundles record as an artifact's toolkit), or "" when not available.
  std::string label() const { return version.empty() ? std::string() : name + " " + version; }
};

class Backend {
public:
  virtual ~Backend() = default;
  /// The prefix of its targets: "cuda", "hip", "vulkan", "interp", "cpu".
  virtual std::string_view name() const = 0;
  /// The grammar of its targets, for help and errors: "cuda:sm_XX (sm_80 and newer)".
  virtual std::string_view grammar() const = 0;
  /// Targets a user might write, for examples in errors ("cuda:sm_80", "cuda:sm_90").
  virtual std::vector<std::string> example_targets() const = 0;
  /// Checks `target` (whose prefix is name()). Returns its canonical spelling, or nothing with
  /// `error` set ("target 'cuda:sm_70': cubecc compiles for sm_80 and newer").
  virtual std::optional<std::string> parse_target(std::string_view target,
                                                  std::string &error) const = 0;
  /// What codegen may emit for a target parse_target accepted.
  virtual TargetFeatures features(std::string_view target) const = 0;
  /// The --emit kinds it offers, source before binaries ("ir" is the tools' own, never listed).
  virtual const std::vector<EmitKind> &emit_kinds() const = 0;
  /// The artifacts of `kernel` (optimized and verified) for `targets` (all of this backend,
  /// parsed): one compiler run where the toolkit allows (NVRTC for every sm_XX at once).
  virtual std::vector<Artifact> compile(const ir::Kernel &kernel,
                                        std::span<const std::string> targets,
                                        std::vector<ir::Diagnostic> &errors) const = 0;
  /// Whether `target` can run `kernel` (optimized and verified, as compile() takes it) at all,
  /// checked without compiling: the target's features (types, atomics, matrix shapes, subgroups)
  /// and limits (shared memory, workgroup). What `--skip-unsupported` asks before it leaves a
  /// kernel out of a target; on false, `why` holds what compile() would refuse it with. The
  /// default checks check_target_support (target.h); backends that refuse more say so.
  virtual bool check_support(const ir::Kernel &kernel, std::string_view target,
                             std::vector<ir::Diagnostic> &why) const;
  /// The output of kind `kind` (one of emit_kinds()) of `kernel` for `target`.
  virtual std::optional<Emitted> emit(const ir::Kernel &kernel, std::string_view target,
                                      std::string_view kind,
                                      std::vector<ir::Diagnostic> &errors) const = 0;
  /// The toolkits it drives (for --version), each as found now.
  virtual std::vector<Toolkit> toolkits() const = 0;
  /// The toolkit whose label artifacts carry ("" when none): compile() fills Artifact::toolkit.
  virtual std::string toolkit_label() const { return {}; }
  /// Checks an artifact's bytes beyond their checksum (`cubecc env verify`): what can be checked
  /// without a device (SPIR-V validates, IR parses and verifies, ELF of the right machine, PTX
  /// names its target). Empty when sound, else what is wrong.
  virtual std::string check_artifact(std::string_view target, std::string_view format,
                                     std::string_view bytes) const = 0;
};

/// Every backend built into this cubecc, in registration order.
std::span<const Backend *const> backends();

/// The backend of a target ("cuda:sm_90" → cuda) or of a backend name ("vulkan"); null if none.
const Backend *find_backend(std::string_view target);

/// Splits comma-separated target lists ("cuda:sm_80,cuda:sm_90,vulkan"), checks each with its
/// backend and drops repeats. On failure returns nothing with `error` set, naming the target
/// and, for an unknown one, the grammar of every backend.
std::optional<std::vector<std::string>> parse_targets(std::span<const std::string> lists,
                                                      std::string &error);

/// "unknown target 'x' (targets: vulkan, interp, cuda:sm_XX (sm_80 and newer), ...)".
std::string unknown_target_message(std::string_view target);

/// For check_artifact: "" when `bytes` is a little-endian ELF64 file for `machine` (e_machine:
/// 62 x86-64, 190 CUDA, 224 AMDGPU), else what it is not.
std::string check_elf_machine(std::string_view bytes, uint16_t machine);

/// The longest target name any backend accepts is far shorter; longer names are refused before
/// any backend's parser sees them.
inline constexpr size_t kMaxTargetNameBytes = 64;

} // namespace cubecc::codegen
