//===- device.h - The one device interface every backend implements ---------------------------===//
//
// A Device runs compiled kernels on one piece of hardware (or the reference interpreter). The
// Runtime (runtime.h) owns one and adds memory pools, the kernel cache and typed helpers; backends
// implement only this interface. Errors are reported as cubecc::runtime::Error exceptions with a
// message that names what failed and what to do; no backend crashes on a missing driver.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/codegen/target.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::ir {
class Kernel;
}

namespace cubecc::runtime {

/// A runtime failure: no device, a refused kernel, a failed launch. `what()` is the full message.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// What a device can do, as reported by its driver.
struct DeviceInfo {
  std::string backend; ///< "vulkan", "interp", "cuda", "hip"
  std::string name;    ///< the driver's device name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string driver;  ///< driver name and version
  std::string vendor;  ///< "NVIDIA", "AMD", "Intel", "Mesa", "cubecc", ...
  std::string arch;    ///< "sm_90", "gfx90a"; Vulkan: "vendorid:deviceid" in hex; "" if none
  uint32_t subgroup_size = 0;
  codegen::TargetFeatures features; ///< what codegen may emit for it (f16, int64, atomics, ...)
  uint64_t max_buffer_bytes = 0;
  double timestamp_period_ns = 0; ///< nanoseconds per timestamp tick (0: no device timestamps)
};

/// Device memory. Owned by the device that made it; freed through Device::free.
struct DeviceMemory {
  void *handle = nullptr; ///< backend-specific
  uint64_t bytes = 0;
};

/// One argument of a launch: a buffer (with the byte range the kernel sees) or a value's lanes.
struct LaunchArg {
  const DeviceMemory *memory = nullptr;
  uint64_t offset = 0; ///< bytes
  uint64_t bytes = 0;  ///< the range bound to the kernel; buffer.size is bytes / element size
  std::vector<uint64_t> bits; ///< values: one entry per lane, zero-extended
};

/// A kind of compiled kernel a device loads without compiling (environments/ store them).
struct BinaryTarget {
  std::string target;   ///< "vulkan", "interp", "cuda:sm_90", "cuda:compute_80", "hip:gfx90a"
  std::string format;   ///< "spirv", "ir", "cubin", "ptx", "hsaco"
  std::string features; ///< TargetFeatures::fingerprint() the code was generated for
  std::string toolkit;  ///< the backend compiler that made it ("NVRTC 12.0"); "" for none
};

/// A compiled kernel as stored outside the process (an environment bundle's entry).
struct KernelBinary {
  BinaryTarget target;
  std::string_view bytes; ///< the module: SPIR-V words, CUBIN, PTX, code object, IR text
  std::string entry;      ///< the entry point's symbol (C-family targets), else ""
  codegen::KernelAbi abi; ///< launch metadata: workgroup size, shared memory, parameter layout
};

/// A kernel compiled for one device: backend-specific, made by Device::compile.
class CompiledKernel {
public:
  virtual ~CompiledKernel() = default;
  const codegen::KernelAbi &abi() const { return abi_; }

protected:
  codegen::KernelAbi abi_;
};

class Device {
public:
  virtual ~Device() = default;
  virtual const DeviceInfo &info() const = 0;

  virtual DeviceMemory allocate(uint64_t bytes) = 0;
  virtual void free(DeviceMemory memory) = 0;
  /// Copies are ordered with launches: an upload or download waits for the launches before it.
  virtual void upload(const DeviceMemory &dst, uint64_t offset, const void *src,
                      uint64_t bytes) = 0;
  virtual void download(const DeviceMemory &src, uint64_t offset, void *dst, uint64_t bytes) = 0;

  /// Lowers and compiles an optimized, verified kernel; throws Error when the device cannot run it.
  virtual std::unique_ptr<CompiledKernel> compile(const ir::Kernel &kernel) = 0;
  /// What load_binary accepts, best first (a CUBIN for the device's arch before PTX). `toolkit`
  /// names the compiler compile() would use, "" when it has none (a binary from any is loadable).
  virtual std::vector<BinaryTarget> binary_targets() const = 0;
  /// Loads a kernel compiled elsewhere for one of binary_targets(): no tracing, no passes, no
  /// code generation. Throws Error naming the kernel when the binary does not load.
  virtual std::unique_ptr<CompiledKernel> load_binary(const KernelBinary &binary) = 0;
  /// Queues a launch of `num_workgroups` workgroups. Launches run in order.
  virtual void launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                      std::span<const LaunchArg> args) = 0;
  /// Waits for every queued launch and copy.
  virtual void synchronize() = 0;
  /// Device time of the launches completed by the last synchronize(), in nanoseconds, one entry
  /// per launch in order (empty if the device has no timestamps).
  virtual std::vector<double> last_launch_times_ns() const = 0;
};

/// Names of the backends built into this cubecc, and whether each has a device now.
struct DeviceEntry {
  std::string backend;
  bool built = true; ///< false: this cubecc was built without the backend
  bool available = false;
  std::string detail;             ///< the device name, or why there is none
  std::optional<DeviceInfo> info; ///< what the device offers, when available
};
std::vector<DeviceEntry> list_devices();

/// Opens a device: `name` is "vulkan", "interp", "cuda", "hip", or empty for CUBECC_DEVICE or,
/// if unset, the best available (cuda, hip, vulkan, then interp). Throws Error naming why none
/// opened.
std::unique_ptr<Device> open_device(const std::string &name = {});

} // namespace cubecc::runtime
