//===- named_kernels.cpp - Kernels loaded by name from an environment, without their library --===//
//
// Runtime::kernel_from_environment serves a kernel from the bundle by (library, kernel,
// configuration): the binary, the launch metadata (KernelAbi) and the parameters' names and
// types all come from the bundle's entry, so an application needs neither the kernel library
// nor the DSL, and nothing is traced or compiled. The traced path (kernel(), load(): trace, hash,
// look the hash up) stays for programs that have the library and want a stale bundle to be a
// miss; docs/environments.md, "Kernels by name", says when each is right.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/runtime/runtime.h"

#include "context.h"
#include "cubecc/runtime/log.h"

#include <fmt/format.h>

namespace cubecc::runtime {

namespace {

/// "kernel 'axpy' (configuration 'w4') of library 'examples'".
std::string describe_wanted(std::string_view library, std::string_view kernel,
                            std::string_view configuration) {
  return fmt::format("kernel '{}' ({}) of library '{}'", kernel,
                     configuration.empty() ? std::string("no configuration")
                                           : fmt::format("configuration '{}'", configuration),
                     library);
}

/// The environment's answer for the kernel, or an Error saying why there is none.
NamedKernelLookup find_named(const EnvironmentSource *environment, Device &device,
                             std::string_view library, std::string_view kernel,
                             std::string_view configuration) {
  if (!environment)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: this runtime uses no environment: call use_environment() with "
                            "the bundle first (or set CUBECC_ENV)",
                            describe_wanted(library, kernel, configuration)));
  std::vector<BinaryTarget> targets = device.binary_targets();
  NamedKernelLookup found = environment->find_named_kernel(library, kernel, configuration,
                                                           kRuntimeCompileOptions, targets);
  switch (found.lookup.outcome) {
  case EnvironmentLookup::Hit:
    return found;
  case EnvironmentLookup::Miss:
    // Either the bundle lacks the kernel altogether (NotFound, with what it has), or it holds
    // the kernel but for other devices: an environment that cannot serve this device.
    if (!found.entry_found)
      throw Error(ErrorKind::NotFound,
                  fmt::format("environment {}: {}", environment->name(), found.lookup.why));
    [[fallthrough]];
  case EnvironmentLookup::Rejected:
    if (!found.entry_found) // no sound entry: a damaged one may have been the kernel's
      throw Error(ErrorKind::Environment,
                  fmt::format("environment {}: {}", environment->name(), found.lookup.why));
    break;
  }
  throw Error(ErrorKind::Environment,
              fmt::format("environment {}: {} cannot run on this device ({}: {}): {}",
                          environment->name(), describe_wanted(library, kernel, configuration),
                          device.info().backend, device.info().name, found.lookup.why));
}

} // namespace

KernelHandle Runtime::kernel_from_environment(std::string_view library, std::string_view kernel,
                                              std::string_view configuration) {
  // The key cannot collide with kernel()'s keys, which applications choose: it starts with a
  // character no C++ identifier or path does.
  const std::string key =
      fmt::format("\x01environment\x01{}\x01{}\x01{}", library, kernel, configuration);
  Context &c = *context_;
  if (auto cached = c.find_keyed(key))
    return KernelHandle(std::move(cached));
  std::lock_guard compile(c.compile_mutex); // guards the environment and its statistics
  if (auto cached = c.find_keyed(key))      // loaded by another thread while this one waited
    return KernelHandle(std::move(cached));
  const EnvironmentSource *environment = c.environment.get();
  NamedKernelLookup found = find_named(environment, *c.device, library, kernel, configuration);
  const KernelBinary &binary = found.lookup.binary;
  const codegen::KernelAbi &abi = binary.abi;
  if (!found.parameter_names.empty() && found.parameter_names.size() != abi.params.size())
    throw Error(ErrorKind::Environment,
                fmt::format("environment {}: {}: the entry names {} parameters, its {} binary "
                            "has {}: rebuild the bundle",
                            environment->name(), describe_wanted(library, kernel, configuration),
                            found.parameter_names.size(), binary.target.target, abi.params.size()));
  std::unique_ptr<CompiledKernel> compiled;
  try {
    compiled = c.device->load_binary(binary);
  } catch (const Error &e) {
    throw Error(ErrorKind::Environment,
                fmt::format("environment {}: {}: its {} {} does not load: {}", environment->name(),
                            describe_wanted(library, kernel, configuration), binary.target.target,
                            binary.target.format, e.what()));
  }
  // Launches are bound by the bundle's metadata: a binary the device reads otherwise is refused,
  // as on the traced path.
  if (std::string why = codegen::launch_shape_difference(compiled->abi(), "the loaded binary", abi,
                                                         "the bundle's launch metadata");
      !why.empty())
    throw Error(ErrorKind::Environment,
                fmt::format("environment {}: {}: {}", environment->name(),
                            describe_wanted(library, kernel, configuration), why));
  auto loaded = std::make_shared<LoadedKernel>();
  loaded->name = std::string(kernel);
  loaded->hash = found.hash;
  for (size_t i = 0; i < abi.params.size(); ++i)
    loaded->params.push_back(
        {i < found.parameter_names.size() ? found.parameter_names[i] : std::string(),
         abi.params[i].type,
         !std::binary_search(found.unread_parameters.begin(), found.unread_parameters.end(),
                             static_cast<uint32_t>(i))});
  loaded->parameters = group_parameters(loaded->params);
  loaded->compiled = std::move(compiled);
  c.count_environment({.hits = 1});
  log_debug("environment {}: hit by name: {} ({} {}, build {})", environment->name(),
            describe_wanted(library, kernel, configuration), binary.target.target,
            binary.target.format, found.library_build);
  {
    std::lock_guard lock(c.cache_mutex);
    c.cache.insert_keyed(key, loaded);
  }
  return KernelHandle(std::move(loaded));
}

std::string Runtime::environment_library_build(std::string_view library, std::string_view kernel,
                                               std::string_view configuration) {
  std::lock_guard compile(context_->compile_mutex); // guards the environment
  return find_named(context_->environment.get(), *context_->device, library, kernel, configuration)
      .library_build;
}

} // namespace cubecc::runtime
