//===- device_launcher.cpp --------------------------------------------------------------------===//
#include "device_launcher.h"

#include "cubecc/ir/structural_hash.h"

#include <map>
#include <memory>

namespace cubecc::test {

runtime::Device &shared_device(const std::string &name) {
  static std::map<std::string, std::unique_ptr<runtime::Device>> devices;
  static std::map<std::string, std::string> failures; // a device that did not open is not retried
  if (auto failed = failures.find(name); failed != failures.end())
    throw runtime::Error(failed->second);
  auto &slot = devices[name];
  if (!slot) {
    try {
      slot = runtime::open_device(name);
    } catch (const runtime::Error &e) {
      failures[name] = e.what();
      throw;
    }
  }
  return *slot;
}

std::string why_device_absent(const std::string &name) {
  try {
    shared_device(name);
    return {};
  } catch (const runtime::Error &e) {
    return e.what();
  }
}

bool device_is_optional(const std::string &name) {
  return name == "cuda" || name == "hip";
}

std::vector<ir::Diagnostic> run_on_device(runtime::Device &device, const ir::Kernel &kernel,
                                          std::span<const ir::Argument> args,
                                          const ir::LaunchConfig &config) {
  // Compiled kernels by (device, structural hash): a case launches one kernel several times.
  static std::map<std::pair<runtime::Device *, std::string>,
                  std::unique_ptr<runtime::CompiledKernel>>
      compiled;
  std::vector<ir::Diagnostic> problems;
  std::vector<runtime::DeviceMemory> memories;
  try {
    auto &slot = compiled[{&device, ir::structural_hash(kernel).hex()}];
    if (!slot)
      slot = device.compile(kernel);
    std::vector<runtime::LaunchArg> launch_args;
    memories.reserve(args.size()); // the launch arguments point into it
    for (const ir::Argument &a : args) {
      runtime::LaunchArg arg;
      if (a.buffer) {
        uint64_t bytes = a.buffer->bytes.size();
        memories.push_back(device.allocate(bytes ? bytes : 1));
        device.upload(memories.back(), 0, a.buffer->bytes.data(), bytes);
        arg.memory = &memories.back();
        arg.bytes = bytes;
      } else {
        arg.bits = a.bits;
      }
      launch_args.push_back(std::move(arg));
    }
    device.launch(*slot, config.num_workgroups, launch_args);
    device.synchronize();
    size_t m = 0;
    for (const ir::Argument &a : args)
      if (a.buffer) {
        device.download(memories[m++], 0, a.buffer->bytes.data(), a.buffer->bytes.size());
      }
  } catch (const std::exception &e) {
    problems.push_back({"", 0, 0, e.what(), {}});
  }
  for (runtime::DeviceMemory &memory : memories)
    device.free(memory);
  return problems;
}

} // namespace cubecc::test
