//===- device_graph.cpp - Device's out-of-line defaults; the portable graph -------------------===//
//
// Device's default members (its vtable is emitted here, with Device::create_graph: a device
// defined anywhere, such as the memory pool tests' fake, links with this file alone), then
// RecordedGraph: recorded launches launched again.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/runtime/device.h"

#include <fmt/format.h>

namespace cubecc::runtime {

const char *external_memory_kind_name(ExternalMemory::Kind kind) {
  switch (kind) {
  case ExternalMemory::Kind::Host:
    return "host memory";
  case ExternalMemory::Kind::Cuda:
    return "a CUDA device pointer";
  case ExternalMemory::Kind::Hip:
    return "a HIP device pointer";
  case ExternalMemory::Kind::Vulkan:
    return "a VkBuffer";
  }
  return "unknown memory";
}

const char *external_memory_backend(ExternalMemory::Kind kind) {
  switch (kind) {
  case ExternalMemory::Kind::Host:
    return "interp or cpu";
  case ExternalMemory::Kind::Cuda:
    return "cuda";
  case ExternalMemory::Kind::Hip:
    return "hip";
  case ExternalMemory::Kind::Vulkan:
    return "vulkan";
  }
  return "none";
}

DeviceMemory Device::adopt_memory(const ExternalMemory &memory) {
  throw Error(fmt::format("{}: this device cannot adopt {}", info().backend,
                          external_memory_kind_name(memory.kind)));
}

void Device::release_adopted(DeviceMemory) {}

ExternalMemory Device::native_memory(const DeviceMemory &) const {
  throw Error(fmt::format("{}: this device has no native memory handles to share", info().backend));
}

std::unique_ptr<DeviceGraph> Device::create_graph() {
  return std::make_unique<RecordedGraph>(*this);
}

void RecordedGraph::add_launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                               std::span<const LaunchArg> args) {
  if (finished_)
    throw Error(fmt::format("graph: cannot add a launch of kernel '{}' to a finished graph",
                            kernel.abi().name));
  Launch launch;
  launch.kernel = &kernel;
  launch.num_workgroups = num_workgroups;
  launch.args.assign(args.begin(), args.end());
  launch.memories.reserve(args.size());
  for (const LaunchArg &a : args)
    if (a.memory)
      launch.memories.push_back(*a.memory);
  size_t m = 0;
  for (LaunchArg &a : launch.args)
    if (a.memory)
      a.memory = &launch.memories[m++]; // reserved above: the addresses are stable
  launches_.push_back(std::move(launch));
}

LaunchArg &RecordedGraph::value_argument(size_t launch, size_t param, size_t lanes) {
  if (launch >= launches_.size())
    throw Error(fmt::format("graph: no launch {} (the graph has {})", launch, launches_.size()));
  Launch &l = launches_[launch];
  const std::string &name = l.kernel->abi().name;
  if (param >= l.args.size())
    throw Error(
        fmt::format("graph: launch {} (kernel '{}') has no parameter {}", launch, name, param));
  LaunchArg &a = l.args[param];
  if (a.memory)
    throw Error(fmt::format("graph: launch {} (kernel '{}'): parameter {} is a buffer, not a value",
                            launch, name, param));
  if (a.bits.size() != lanes)
    throw Error(fmt::format("graph: launch {} (kernel '{}'): parameter {} has {} lane(s), not {}",
                            launch, name, param, a.bits.size(), lanes));
  return a;
}

void RecordedGraph::set_value(size_t launch, size_t param, std::span<const uint64_t> bits) {
  LaunchArg &a = value_argument(launch, param, bits.size());
  a.bits.assign(bits.begin(), bits.end());
}

void RecordedGraph::replay() {
  for (const Launch &l : launches_)
    device_.launch(*l.kernel, l.num_workgroups, l.args);
}

} // namespace cubecc::runtime
