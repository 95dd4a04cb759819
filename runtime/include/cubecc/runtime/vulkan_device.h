//===- vulkan_device.h - Vulkan compute through volk, with no Vulkan headers here -------------===//
//
// The Vulkan device loads the Vulkan loader at run time (volk), so a machine without it gets
// "no device: vulkan: ..." rather than a link or load failure. Environment:
//   CUBECC_VULKAN_DEVICE=<index>   use this physical device (vkEnumeratePhysicalDevices order)
//                                  instead of the best one (discrete > integrated > virtual > cpu)
//   CUBECC_VULKAN_VALIDATION=1     enable VK_LAYER_KHRONOS_validation; any warning or error it
//                                  reports makes the current operation throw Error
//   CUBECC_VULKAN_FORCE_STAGING=1  copy through staging buffers even when device memory can be
//                                  mapped (tests the path discrete GPUs take)
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/spirv.h"
#include "cubecc/runtime/device.h"

#include <memory>
#include <string>
#include <vector>

namespace cubecc::runtime {

class VulkanDevice final : public Device {
public:
  /// Throws Error "no device: vulkan: <reason>" when there is no loader, driver or usable device.
  static std::unique_ptr<VulkanDevice> open();
  ~VulkanDevice() override;

  const DeviceInfo &info() const override;
  DeviceMemory allocate(uint64_t bytes) override;
  /// Thread-safe; never flushes or waits (the memory pool frees only what no stream still uses).
  void free(DeviceMemory memory) override;
  std::optional<ExternalMemory::Kind> memory_kind() const override {
    return ExternalMemory::Kind::Vulkan;
  }
  /// A range of a VkBuffer the caller made on this device's VkDevice (handles()), with
  /// VK_BUFFER_USAGE_STORAGE_BUFFER_BIT (and TRANSFER_SRC/DST for host copies, which go through
  /// a staging buffer) and memory bound. The offset must be a multiple of the device's
  /// minStorageBufferOffsetAlignment. The VkBuffer must outlive the adoption.
  DeviceMemory adopt_memory(const ExternalMemory &memory) override;
  void release_adopted(DeviceMemory memory) override;
  ExternalMemory native_memory(const DeviceMemory &memory) const override;

  /// The device's Vulkan handles, for a framework that makes its own buffers on the same device
  /// (VkInstance, VkPhysicalDevice, VkDevice as pointers; no Vulkan header needed here). They
  /// stay valid while the device lives; the instance lives until the process exits.
  struct Handles {
    void *instance = nullptr;
    void *physical_device = nullptr;
    void *device = nullptr;
    uint32_t queue_family_index = 0;        ///< of the compute queue the device submits to
    void *get_instance_proc_addr = nullptr; ///< the loader's vkGetInstanceProcAddr
  };
  Handles handles() const;
  /// emit_spirv for this device's features, then compile_spirv.
  std::unique_ptr<CompiledKernel> compile(const ir::Kernel &kernel) override;
  /// Makes a pipeline from a SPIR-V module that follows the kernel ABI (set 0 storage buffers in
  /// parameter order, push constants for the values, entry point "main"). Refuses a module that
  /// declares a capability the device lacks, or exceeds its push-constant, shared-memory or
  /// workgroup limits, with an Error naming the kernel.
  std::unique_ptr<CompiledKernel> compile_spirv(const codegen::SpirvKernel &kernel);
  /// SPIR-V generated for this device's feature fingerprint.
  std::vector<BinaryTarget> binary_targets() const override;
  std::unique_ptr<CompiledKernel> load_binary(const KernelBinary &binary) override;
  /// A stream with its own command buffers (three batches in rotation), descriptor, query and
  /// parameter pools and a timeline semaphore, submitting to the device's one VkQueue (under a
  /// queue mutex held only for vkQueueSubmit). Events and wait() are timeline semaphores: a
  /// stream waiting for another's event never blocks the host. mark() counts the work queued
  /// (launches, copies through staging, graph replays); reached() reads the timeline. Copies to
  /// or from host-mapped memory wait for the stream's queued work, then memcpy; other copies go
  /// through a staging buffer in order with the launches (an upload does not wait). A batch
  /// holds a share of the pipeline of each kernel it launches until it has completed, so a
  /// kernel may be destroyed while launches of it are queued. Graphs (create_graph) are one
  /// reusable command buffer, replayed on any stream of this device; a replay waits for it, and
  /// adds one time (the whole graph) to the launch times.
  std::unique_ptr<DeviceStream> create_stream() override;

  /// Whether validation layers are on (CUBECC_VULKAN_VALIDATION=1).
  bool validation_enabled() const;
  /// Validation messages reported while devices were destroyed in this process (destructors
  /// cannot throw; a leak report lands here and on stderr).
  static std::vector<std::string> teardown_messages();

  struct Impl;

private:
  explicit VulkanDevice(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

} // namespace cubecc::runtime
