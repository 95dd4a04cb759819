//===- vulkan_kind.cpp - The vulkan device's registration (built with or without volk) --------===//
#include "cubecc/runtime/device.h"
#ifdef CUBECC_HAVE_VULKAN
#include "cubecc/runtime/vulkan_device.h"
#endif

namespace cubecc::runtime {

const DeviceKind &vulkan_device_kind() {
#ifdef CUBECC_HAVE_VULKAN
  static const DeviceKind kind{
      "vulkan", DeviceClass::Gpu, [] { return std::unique_ptr<Device>(VulkanDevice::open()); }, {}};
#else
  static const DeviceKind kind{"vulkan", DeviceClass::Gpu, nullptr,
                               "built without volk (install libvulkan-volk-dev and reconfigure)"};
#endif
  return kind;
}

} // namespace cubecc::runtime
