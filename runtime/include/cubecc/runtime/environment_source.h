//===- environment_source.h - Where a runtime finds kernels compiled ahead of time ------------===//
//
// Before a Runtime compiles a kernel it asks its environment, if it has one, for a binary of the
// same kernel (structural hash), compiled with the same options, for one of the device's binary
// targets (Device::binary_targets) — and before an autotuner tunes, for a tuning record. The
// environment bundles of environments/ implement this interface; the runtime only sees it, so
// that the layers point one way (runtime <- autotune <- environments).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/structural_hash.h"
#include "cubecc/runtime/device.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::runtime {

/// The answer to one lookup.
struct EnvironmentLookup {
  enum Outcome : uint8_t {
    Hit,      ///< `binary` is the kernel
    Miss,     ///< not in the environment for these targets and options (`why` says what is)
    Rejected, ///< present but unusable: a bad checksum, another toolkit (`why` says which)
  } outcome = Miss;
  KernelBinary binary; ///< Hit: its bytes stay valid while the source lives
  std::string why;
};

/// The answer to a lookup by name (EnvironmentSource::find_named_kernel): the lookup as for a
/// hash, and what a runtime needs to launch the kernel without its IR.
struct NamedKernelLookup {
  EnvironmentLookup lookup;
  /// Whether the environment holds the kernel at all: a Miss with an entry found is an entry
  /// without a binary for the targets asked for.
  bool entry_found = false;
  ir::Hash128 hash;                         ///< the kernel's structural hash, as traced
  std::vector<std::string> parameter_names; ///< in order; empty when the bundle lacks them
  /// The parameters the kernel never reads, ascending (empty when the bundle does not say).
  std::vector<uint32_t> unread_parameters;
  std::string library_build; ///< which build of the library made the entry
};

struct EnvironmentOptions;

class EnvironmentSource {
public:
  virtual ~EnvironmentSource() = default;
  /// The kernel whose structural hash (as given, before optimization) is `hash`, compiled with
  /// `options` (e.g. "-O2"), for the first of `targets` the environment holds.
  virtual EnvironmentLookup find_kernel(const ir::Hash128 &hash, std::string_view options,
                                        std::span<const BinaryTarget> targets) const = 0;
  /// The kernel `kernel` of kernel library `library`, registered with `configuration` and
  /// compiled with `options`, for the first of `targets` the environment holds — without its IR
  /// (Runtime::kernel_from_environment). A Miss's `why` names what was looked for and what the
  /// environment holds; the default answers that this environment keeps no names.
  virtual NamedKernelLookup find_named_kernel(std::string_view library, std::string_view kernel,
                                              std::string_view configuration,
                                              std::string_view options,
                                              std::span<const BinaryTarget> targets) const {
    (void)configuration, (void)options, (void)targets;
    NamedKernelLookup result; // inline: the bundle format library links without the runtime
    result.lookup.why = "kernel '" + std::string(kernel) + "' of library '" + std::string(library) +
                        "': environment " + name() +
                        " keeps no kernel names (it looks kernels up by their traced hash only)";
    return result;
  }
  /// The tuning record stored under `key` (autotune's serialized form), if any.
  virtual std::optional<std::string> find_tuning(std::string_view key) const = 0;
  /// What to call it in messages: the bundle's path.
  virtual const std::string &name() const = 0;
  /// Why this environment may not be used where `options` require signed bundles
  /// (requires_signature); empty when it may. The default refuses: only a bundle can be signed.
  virtual std::string refusal(const EnvironmentOptions &options) const {
    (void)options; // inline, as above
    return "environment " + name() + " is not a bundle file, so it cannot be signed, and only " +
           "signed bundles are used";
  }
};

/// What to do when the environment cannot answer, and which environments to trust.
struct EnvironmentOptions {
  /// true: a miss or a rejected entry is logged (CUBECC_LOG=debug) and the kernel is compiled;
  /// false: it is an Error naming the kernel and why (for applications that must never JIT).
  bool fallback_to_jit = true;
  /// Signed bundles only (docs/environments.md, "Signed bundles"): a bundle that is not signed
  /// by one of the trusted keys, or that changed in any byte since it was signed, is refused
  /// before any of its code runs — the runtime does not use it at all (a warning, and kernels
  /// are compiled; an Error when fallback_to_jit is false). On when this is set, when
  /// `trusted_keys` is not empty, or when $CUBECC_TRUSTED_KEYS is set.
  bool require_signature = false;
  /// The public keys trusted to sign bundles, each 64 hexadecimal digits or the path of a public
  /// key file (`cubecc env keygen` writes both forms); $CUBECC_TRUSTED_KEYS (':'-separated) adds
  /// to them.
  std::vector<std::string> trusted_keys{};
};

/// Whether `options`, or $CUBECC_TRUSTED_KEYS, ask for signed bundles only.
bool requires_signature(const EnvironmentOptions &options);

/// What the environment did for a runtime.
struct EnvironmentStatistics {
  uint64_t hits = 0;     ///< kernels loaded from the environment
  uint64_t misses = 0;   ///< kernels it did not hold (compiled instead)
  uint64_t rejected = 0; ///< entries it held but could not use (compiled instead)
};

/// Opens an environment file, for use under `options` (a runtime requiring signatures reads the
/// whole file into memory, so that what it verifies is what runs). Provided by environments/
/// (linking cubecc::environments registers it); without it, throws Error saying so. Does not
/// check signatures: EnvironmentSource::refusal does.
std::shared_ptr<const EnvironmentSource> open_environment(const std::string &path,
                                                          const EnvironmentOptions &options = {});
using EnvironmentOpener = std::shared_ptr<const EnvironmentSource> (*)(
    const std::string &path, const EnvironmentOptions &options);
void register_environment_opener(EnvironmentOpener opener);

/// The kernel `kernel` (hashed as given) from `environment`, loaded on `device`; null when the
/// environment does not hold it, or holds an entry it cannot use, and `options` allow compiling
/// instead. An entry is unusable when the bundle rejects it (damage, another cubecc or toolkit),
/// when its launch metadata is not the kernel's (workgroup size, parameters), or when the device
/// does not load its binary (Device::load_binary validates it). Counts into `statistics`. Throws
/// Error on a miss or an unusable entry when fallback is off, naming the kernel and why.
std::unique_ptr<CompiledKernel> load_from_environment(const EnvironmentSource &environment,
                                                      Device &device, const ir::Kernel &kernel,
                                                      const ir::Hash128 &hash,
                                                      std::string_view compile_options,
                                                      const EnvironmentOptions &options,
                                                      EnvironmentStatistics &statistics);

} // namespace cubecc::runtime
