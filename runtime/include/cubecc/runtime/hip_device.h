//===- hip_device.h - AMD GPUs through the HIP runtime, loaded at run time --------------------===//
//
// The HIP device opens the HIP runtime (libamdhip64.so.6, .so.5 or .so) with dlopen and looks up
// each entry point it uses, so cubecc neither links against ROCm nor needs HIP headers: a machine
// without an AMD GPU gets "no device: hip: ..." instead of a load failure. Kernels are compiled
// with codegen::compile_hip (hipRTC) for the device's gfx architecture and loaded as code
// objects. Environment:
//   CUBECC_HIP_DEVICE=<index>      use this device (HIP device order; default 0)
//   CUBECC_HIP_LIBRARY=<path>      load the HIP runtime from this file
// One implementation with the CUDA device (runtime/gpu_common/gpu_device.h): streams, events,
// graphs, error kinds, and the lost context after a faulting kernel (every later call throws
// Error (DeviceFailure); a newly opened device resets the context with hipDevicePrimaryCtxReset).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/hip.h"
#include "cubecc/runtime/device.h"

#include <memory>
#include <string>

namespace cubecc::runtime {

class HipDevice final : public Device {
public:
  /// Throws Error (NoDevice) "no device: hip: <reason>" when there is no HIP runtime, no AMD GPU,
  /// or the device cannot be set up.
  static std::unique_ptr<HipDevice> open();
  ~HipDevice() override;

  const DeviceInfo &info() const override;
  /// A stream over a non-blocking driver stream (gpu_common/gpu_device.h): copies are waited
  /// for before they return, launches are timed (one time per launch or graph replay), graphs
  /// are driver graphs (a RecordedGraph where the driver lacks the graph entry points).
  std::unique_ptr<DeviceStream> create_stream() override;
  /// The device's architecture without target features, e.g. "gfx90a".
  const std::string &arch() const;
  DeviceMemory allocate(uint64_t bytes) override;
  void free(DeviceMemory memory) override;
  /// A device pointer the caller allocated in the same context (device); never freed here.
  std::optional<ExternalMemory::Kind> memory_kind() const override {
    return ExternalMemory::Kind::Hip;
  }
  DeviceMemory adopt_memory(const ExternalMemory &memory) override;
  /// Forgets it: no queued work uses it any more (the Runtime's deletion queue); no stream is
  /// waited for.
  void release_adopted(DeviceMemory memory) override;
  ExternalMemory native_memory(const DeviceMemory &memory) const override;
  /// compile_hip for this device's arch, then compile_binary.
  std::unique_ptr<CompiledKernel> compile(const ir::Kernel &kernel) override;
  /// Loads the code object for this device's arch from a binary compiled elsewhere. Refuses a
  /// kernel whose workgroup or shared memory exceed the device's limits, naming the kernel.
  std::unique_ptr<CompiledKernel> compile_binary(const codegen::HipBinary &binary);
  /// The code object for the device's arch.
  std::vector<BinaryTarget> binary_targets() const override;
  std::unique_ptr<CompiledKernel> load_binary(const KernelBinary &binary) override;

  struct Impl;

private:
  /// compile_binary, with a refused binary reported as `refused` (Compile when compile() made it,
  /// Environment when it came from outside).
  std::unique_ptr<CompiledKernel> load(const codegen::HipBinary &binary, ErrorKind refused);
  explicit HipDevice(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

} // namespace cubecc::runtime
