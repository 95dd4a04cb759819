//===- cuda_device.h - NVIDIA GPUs through the CUDA driver API, loaded at run time ------------===//
//
// The CUDA device opens the driver (libcuda.so.1) with dlopen and looks up each entry point it
// uses, so cubecc neither links against the driver nor needs CUDA headers: a machine without an
// NVIDIA driver gets "no device: cuda: ..." instead of a load failure. Kernels are compiled with
// codegen::compile_cuda (NVRTC) for the device's sm_XY; the driver loads the CUBIN, or JIT-compiles
// the PTX when there is no CUBIN for the device. Environment:
//   CUBECC_CUDA_DEVICE=<index>     use this device (cuDeviceGet order; default 0)
//   CUBECC_CUDA_LIBRARY=<path>     load the driver from this file instead of libcuda.so.1
// One implementation with the HIP device (runtime/gpu_common/gpu_device.h) on the device's
// primary context: streams, events, graphs, error kinds, and the lost context after a faulting
// kernel (every later call on the device throws Error (DeviceFailure); a newly opened device resets
// the primary context with cuDevicePrimaryCtxReset and works).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/cuda.h"
#include "cubecc/runtime/device.h"

#include <memory>
#include <string>

namespace cubecc::runtime {

class CudaDevice final : public Device {
public:
  /// Throws Error (NoDevice) "no device: cuda: <reason>" when there is no driver, a stub driver,
  /// no device, or the device cannot be set up.
  static std::unique_ptr<CudaDevice> open();
  ~CudaDevice() override;

  const DeviceInfo &info() const override;
  /// A stream over a non-blocking driver stream (gpu_common/gpu_device.h): copies are waited
  /// for before they return, launches are timed (one time per launch or graph replay), graphs
  /// are driver graphs (a RecordedGraph where the driver lacks the graph entry points).
  std::unique_ptr<DeviceStream> create_stream() override;
  /// The device's architecture, e.g. "sm_90".
  const std::string &arch() const;
  DeviceMemory allocate(uint64_t bytes) override;
  void free(DeviceMemory memory) override;
  /// A device pointer the caller allocated in the same context (device); never freed here.
  std::optional<ExternalMemory::Kind> memory_kind() const override {
    return ExternalMemory::Kind::Cuda;
  }
  DeviceMemory adopt_memory(const ExternalMemory &memory) override;
  /// Forgets it: no queued work uses it any more (the Runtime's deletion queue); no stream is
  /// waited for.
  void release_adopted(DeviceMemory memory) override;
  ExternalMemory native_memory(const DeviceMemory &memory) const override;
  /// compile_cuda for this device's arch, then compile_binary.
  std::unique_ptr<CompiledKernel> compile(const ir::Kernel &kernel) override;
  /// Loads a binary compiled elsewhere (e.g. from an environment bundle): the CUBIN for this
  /// device's arch if there is one, else its PTX (compiled by the driver). Refuses a kernel whose
  /// workgroup or shared memory exceed the device's limits, naming the kernel.
  std::unique_ptr<CompiledKernel> compile_binary(const codegen::CudaBinary &binary);
  /// The CUBIN for the device's arch, then PTX of any virtual arch up to it.
  std::vector<BinaryTarget> binary_targets() const override;
  std::unique_ptr<CompiledKernel> load_binary(const KernelBinary &binary) override;

  struct Impl;

private:
  /// compile_binary, with a refused binary reported as `refused` (Compile when compile() made it,
  /// Environment when it came from outside).
  std::unique_ptr<CompiledKernel> load(const codegen::CudaBinary &binary, ErrorKind refused);
  explicit CudaDevice(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

} // namespace cubecc::runtime
