//===- device_graph.cpp - Device's out-of-line defaults; the portable graph -------------------===//
//
// Device's default members (its vtable is emitted here: a device defined anywhere, such as the
// memory pool tests' fake, links with this file alone), the streams of devices whose work is
// done at once (ImmediateDevice), then RecordedGraph: recorded launches launched again.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/runtime/device.h"

#include <fmt/format.h>

#include <chrono>
#include <mutex>

namespace cubecc::runtime {

const char *error_kind_name(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::NoDevice:
    return "no device";
  case ErrorKind::OutOfMemory:
    return "out of memory";
  case ErrorKind::InvalidArgument:
    return "invalid argument";
  case ErrorKind::NotFound:
    return "not found";
  case ErrorKind::Compile:
    return "compile";
  case ErrorKind::Unsupported:
    return "unsupported";
  case ErrorKind::Environment:
    return "environment";
  case ErrorKind::DeviceFailure:
    return "device failure";
  case ErrorKind::Internal:
    return "internal";
  }
  return "unknown";
}

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
  throw Error(ErrorKind::Unsupported, fmt::format("{}: this device cannot adopt {}", info().backend,
                                                  external_memory_kind_name(memory.kind)));
}

void Device::release_adopted(DeviceMemory) {}

ExternalMemory Device::native_memory(const DeviceMemory &) const {
  throw Error(ErrorKind::Unsupported,
              fmt::format("{}: this device has no native memory handles to share", info().backend));
}

std::unique_ptr<DeviceGraph> DeviceStream::create_graph() {
  return std::make_unique<RecordedGraph>();
}

//===- Devices whose work is done at once ----------------------------------------------------===//

namespace {

class DoneEvent final : public DeviceEvent {
public:
  bool done() override { return true; }
  void wait() override {}
};

class ImmediateStream final : public DeviceStream {
public:
  explicit ImmediateStream(ImmediateDevice &device) : device_(device) {}
  void upload(const DeviceMemory &dst, uint64_t offset, const void *src, uint64_t bytes) override {
    device_.copy_in(dst, offset, src, bytes);
  }
  void download(const DeviceMemory &src, uint64_t offset, void *dst, uint64_t bytes) override {
    device_.copy_out(src, offset, dst, bytes);
  }
  void launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
              std::span<const LaunchArg> args) override {
    auto start = std::chrono::steady_clock::now();
    try {
      device_.run_launch(kernel, num_workgroups, args);
    } catch (...) {
      times_.push_back(ns_since(start));
      throw;
    }
    times_.push_back(ns_since(start));
  }
  void synchronize() override {
    last_times_ = std::move(times_);
    times_.clear();
  }
  std::vector<double> last_launch_times_ns() const override { return last_times_; }
  std::shared_ptr<DeviceEvent> record() override {
    static const auto done = std::make_shared<DoneEvent>();
    return done;
  }
  void wait(DeviceEvent &) override {}
  uint64_t mark() override { return 0; }
  bool reached(uint64_t) override { return true; }

private:
  static double ns_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
        .count();
  }
  ImmediateDevice &device_;
  std::vector<double> times_, last_times_;
};

} // namespace

std::unique_ptr<DeviceStream> ImmediateDevice::create_stream() {
  return std::make_unique<ImmediateStream>(*this);
}

void RecordedGraph::add_launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                               std::span<const LaunchArg> args) {
  if (finished_)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("graph: cannot add a launch of kernel '{}' to a finished graph",
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
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("graph: no launch {} (the graph has {})", launch, launches_.size()));
  Launch &l = launches_[launch];
  const std::string &name = l.kernel->abi().name;
  if (param >= l.args.size())
    throw Error(
        ErrorKind::InvalidArgument,
        fmt::format("graph: launch {} (kernel '{}') has no parameter {}", launch, name, param));
  LaunchArg &a = l.args[param];
  if (a.memory)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("graph: launch {} (kernel '{}'): parameter {} is a buffer, not a value",
                            launch, name, param));
  if (a.bits.size() != lanes)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("graph: launch {} (kernel '{}'): parameter {} has {} lane(s), not {}",
                            launch, name, param, a.bits.size(), lanes));
  return a;
}

void RecordedGraph::set_value(size_t launch, size_t param, std::span<const uint64_t> bits) {
  LaunchArg &a = value_argument(launch, param, bits.size());
  a.bits.assign(bits.begin(), bits.end());
}

void RecordedGraph::replay(DeviceStream &stream) {
  for (const Launch &l : launches_)
    stream.launch(*l.kernel, l.num_workgroups, l.args);
}

} // namespace cubecc::runtime
