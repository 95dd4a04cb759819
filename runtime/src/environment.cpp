//===- environment.cpp - Loading kernels from an environment, CUBECC_LOG
//-----------------------===//
#include "cubecc/runtime/environment_source.h"

#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/runtime/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <strings.h>

namespace cubecc::runtime {

//===- Logging -------------------------------------------------------------------------------===//

LogLevel log_level() {
  static const LogLevel level = [] {
    const char *text = std::getenv("CUBECC_LOG");
    if (!text || !*text)
      return LogLevel::Warning;
    // Case does not matter (CUBECC_LOG=DEBUG); anything else is said once, here, with the
    // accepted values, and the default is used.
    for (auto [name, value] : {std::pair{"debug", LogLevel::Debug},
                               {"info", LogLevel::Info},
                               {"warning", LogLevel::Warning},
                               {"error", LogLevel::Error},
                               {"off", LogLevel::Off}})
      if (strcasecmp(text, name) == 0)
        return value;
    std::string shown(text);
    if (shown.size() > 200)
      shown = shown.substr(0, 200) + "...";
    std::fprintf(stderr,
                 "cubecc: warning: CUBECC_LOG=%s is not one of debug, info, warning, "
                 "error, off; using warning\n",
                 shown.c_str());
    return LogLevel::Warning;
  }();
  return level;
}

void log_message(LogLevel level, std::string_view message) {
  static constexpr const char *kNames[] = {"debug", "info", "warning", "error", "off"};
  std::string line = fmt::format("cubecc: {}: {}\n", kNames[static_cast<int>(level)], message);
  std::fwrite(line.data(), 1, line.size(), stderr); // one write: lines of threads do not mix
}

//===- Environments --------------------------------------------------------------------------===//

namespace {

std::atomic<EnvironmentOpener> registered_opener{nullptr};

/// Whether `key` is new to this process.
bool first_time(const std::string &key) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard lock(mutex);
  return seen.insert(key).second;
}

} // namespace

void register_environment_opener(EnvironmentOpener opener) {
  registered_opener.store(opener);
}

bool requires_signature(const EnvironmentOptions &options) {
  const char *keys = std::getenv("CUBECC_TRUSTED_KEYS");
  return options.require_signature || !options.trusted_keys.empty() || (keys && *keys);
}

std::shared_ptr<const EnvironmentSource> open_environment(const std::string &path,
                                                          const EnvironmentOptions &options) {
  EnvironmentOpener opener = registered_opener.load();
  if (!opener)
    throw Error(ErrorKind::Unsupported,
                fmt::format("cannot open environment '{}': this program was built without "
                            "environment support (link it with cubecc::environments)",
                            path));
  return opener(path, options);
}

std::unique_ptr<CompiledKernel> load_from_environment(const EnvironmentSource &environment,
                                                      Device &device, const ir::Kernel &kernel,
                                                      const ir::Hash128 &hash,
                                                      std::string_view compile_options,
                                                      const EnvironmentOptions &options,
                                                      EnvironmentStatistics &statistics) {
  std::vector<BinaryTarget> targets = device.binary_targets();
  EnvironmentLookup found = environment.find_kernel(hash, compile_options, targets);
  if (found.outcome == EnvironmentLookup::Hit) {
    // Launches are sized and bound by the kernel's own signature: launch metadata that says
    // otherwise is a rejected entry, and so is a binary that does not load (the device validates
    // it and checks it against the metadata and its limits).
    codegen::KernelAbi expected = codegen::KernelAbi::of(kernel);
    std::string why =
        codegen::launch_shape_difference(found.binary.abi, "the binary", expected, "the kernel");
    std::unique_ptr<CompiledKernel> compiled;
    if (why.empty()) {
      try {
        compiled = device.load_binary(found.binary);
        why =
            codegen::launch_shape_difference(compiled->abi(), "the binary", expected, "the kernel");
      } catch (const Error &e) {
        why = fmt::format("its {} {} does not load: {}", found.binary.target.target,
                          found.binary.target.format, e.what());
      }
    }
    if (why.empty()) {
      ++statistics.hits;
      log_debug("environment {}: hit: kernel '{}' ({} {}, {})", environment.name(), kernel.name(),
                found.binary.target.target, found.binary.target.format, hash.hex());
      return compiled;
    }
    found.outcome = EnvironmentLookup::Rejected;
    found.why = std::move(why);
  }
  std::string message = fmt::format(
      "environment {}: kernel '{}' ({}, {}) {}: {}", environment.name(), kernel.name(), hash.hex(),
      compile_options, found.outcome == EnvironmentLookup::Miss ? "is not there" : "is unusable",
      found.why);
  if (found.outcome == EnvironmentLookup::Miss)
    ++statistics.misses;
  else
    ++statistics.rejected;
  if (!options.fallback_to_jit)
    throw Error(ErrorKind::Environment, message + " (and compiling instead is off)");
  if (found.outcome == EnvironmentLookup::Miss) {
    log_debug("{}; compiling it", message);
  } else if (first_time(environment.name() + '\n' + found.why)) {
    // A reason that holds for the whole bundle (another cubecc) is said once, not per kernel.
    log_warning("{}; compiling it (further kernels rejected for this reason are logged at debug "
                "level)",
                message);
  } else {
    log_debug("{}; compiling it", message);
  }
  return nullptr;
}

} // namespace cubecc::runtime
