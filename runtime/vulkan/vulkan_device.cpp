//===- vulkan_device.cpp - Vulkan compute through volk ----------------------------------------===//
//
// One instance per process, made on first use and kept until exit: the loader unloads the driver
// when the last instance goes, so keeping it makes reopening a device cheap (no driver and LLVM
// reload) and keeps what the driver holds until exit attributable (LeakSanitizer can name it).
// Validation is decided when the instance is made (CUBECC_VULKAN_VALIDATION at the first open).
// Per device: one physical device, one compute queue (VkQueue is externally synchronized: the
// device's queue mutex is held for vkQueueSubmit only, never while waiting). Work is queued on
// streams (VulkanStream): each records launches (pipeline, a descriptor set for the buffer
// ranges, push constants for the values, a timestamp on each side of the dispatch, then a
// barrier) into batches of its own, submits a batch when it is full or its results are needed,
// and tracks completion with a timeline semaphore (mark/reached, events, waits between streams).
// Nothing device-wide is ever flushed: free, release_adopted and a kernel's destruction touch no
// stream (see PipelineState for what keeps a pipeline alive).
//
// Memory: one VkBuffer with its own VkDeviceMemory per allocation (the Runtime's pool keeps the
// count low). Where a device-local type is also host-visible and coherent (integrated GPUs,
// lavapipe) the memory stays mapped and copies are memcpy; otherwise copies go through a
// temporary host-visible staging buffer.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/runtime/vulkan_device.h"

#include "spirv_interface.h"

#include "cubecc/codegen/spirv.h"
#include "cubecc/ir/ir.h"

#include <fmt/format.h>
#include <spirv/unified1/spirv.hpp11>
#include <volk.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_set>

// Vulkan structs are meant to be written `VkFoo foo{VK_STRUCTURE_TYPE_FOO}`, the rest zeroed.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace cubecc::runtime {

namespace {

/// The vendor of a PCI vendor id (or a Khronos vendor id for software devices).
std::string vendor_name(uint32_t id) {
  switch (id) {
  case 0x10de:
    return "NVIDIA";
  case 0x1002:
    return "AMD";
  case 0x8086:
    return "Intel";
  case 0x13b5:
    return "ARM";
  case 0x5143:
    return "Qualcomm";
  case 0x106b:
    return "Apple";
  case 0x10005:
    return "Mesa";
  default:
    return fmt::format("vendor {:#x}", id);
  }
}

/// The ir::matrix_shapes() bits of the VK_NV_cooperative_matrix shapes the device lists in
/// subgroup scope: f16 operands, f16 or f32 accumulators (D of C's type).
uint32_t cooperative_matrix_shapes(VkPhysicalDevice physical) {
  uint32_t count = 0;
  if (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(physical, &count, nullptr) != VK_SUCCESS)
    return 0;
  std::vector<VkCooperativeMatrixPropertiesNV> listed(
      count, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
  if (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(physical, &count, listed.data()) !=
      VK_SUCCESS)
    return 0;
  auto scalar = [](VkComponentTypeNV t) -> std::optional<ir::Scalar> {
    if (t == VK_COMPONENT_TYPE_FLOAT16_NV)
      return ir::Scalar::F16;
    if (t == VK_COMPONENT_TYPE_FLOAT32_NV)
      return ir::Scalar::F32;
    return std::nullopt;
  };
  return ir::matrix_shape_mask([&](const ir::MatrixShape &shape) {
    return shape.a == ir::Scalar::F16 && shape.b == ir::Scalar::F16 &&
           std::any_of(listed.begin(), listed.begin() + count, [&](const auto &p) {
             return p.scope == VK_SCOPE_SUBGROUP_NV && p.MSize == shape.m && p.NSize == shape.n &&
                    p.KSize == shape.k && p.AType == p.BType && scalar(p.AType) == shape.a &&
                    p.CType == p.DType && scalar(p.CType) == shape.accumulator;
           });
  });
}

const char *result_name(VkResult r) {
  switch (r) {
#define CASE(x)                                                                                    \
  case x:                                                                                          \
    return #x;
    CASE(VK_SUCCESS)
    CASE(VK_NOT_READY)
    CASE(VK_TIMEOUT)
    CASE(VK_INCOMPLETE)
    CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    CASE(VK_ERROR_INITIALIZATION_FAILED)
    CASE(VK_ERROR_DEVICE_LOST)
    CASE(VK_ERROR_MEMORY_MAP_FAILED)
    CASE(VK_ERROR_LAYER_NOT_PRESENT)
    CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    CASE(VK_ERROR_TOO_MANY_OBJECTS)
    CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    CASE(VK_ERROR_FRAGMENTED_POOL)
    CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    CASE(VK_ERROR_INVALID_SHADER_NV)
    CASE(VK_ERROR_UNKNOWN)
#undef CASE
  default:
    return "VkResult error";
  }
}

bool env_flag(const char *name) {
  const char *v = std::getenv(name);
  return v && *v && std::string_view(v) != "0";
}

std::mutex teardown_mutex;
std::vector<std::string> teardown_log;

/// The process's Vulkan instance and the validation messages it reports. Messages arrive on the
/// thread of the call that caused them; they are kept here until an operation claims them.
struct SharedInstance {
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  bool validation = false;
  std::mutex mutex;
  std::vector<std::string> messages;

  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT,
                                                   const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                   void *user) {
    auto *self = static_cast<SharedInstance *>(user);
    const char *level =
        severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning";
    std::lock_guard lock(self->mutex);
    self->messages.push_back(fmt::format("{}: {}", level, data->pMessage ? data->pMessage : ""));
    return VK_FALSE;
  }

  std::vector<std::string> take_messages() {
    std::lock_guard lock(mutex);
    std::vector<std::string> taken;
    taken.swap(messages);
    return taken;
  }
};

SharedInstance *make_instance() {
  if (volkInitialize() != VK_SUCCESS)
    throw Error(ErrorKind::NoDevice,
                "no device: vulkan: the Vulkan loader (libvulkan.so.1) is not installed");
  auto shared = std::make_unique<SharedInstance>();
  shared->validation = env_flag("CUBECC_VULKAN_VALIDATION");

  std::vector<const char *> layers, extensions;
  VkDebugUtilsMessengerCreateInfoEXT messenger_info{
      VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger_info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                   VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = &SharedInstance::on_message;
  messenger_info.pUserData = shared.get();
  if (shared->validation) {
    uint32_t count = 0;
    vkEnumerateInstanceLayerProperties(&count, nullptr);
    std::vector<VkLayerProperties> available(count);
    vkEnumerateInstanceLayerProperties(&count, available.data());
    bool found = std::any_of(available.begin(), available.end(), [](const VkLayerProperties &l) {
      return std::string_view(l.layerName) == "VK_LAYER_KHRONOS_validation";
    });
    if (!found)
      throw Error(ErrorKind::NoDevice,
                  "no device: vulkan: CUBECC_VULKAN_VALIDATION=1 but VK_LAYER_KHRONOS_validation "
                  "is not installed (Debian: vulkan-validationlayers)");
    layers.push_back("VK_LAYER_KHRONOS_validation");
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "cubecc";
  app.pEngineName = "cubecc";
  app.apiVersion = VK_API_VERSION_1_3;
  VkInstanceCreateInfo create{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  create.pNext = shared->validation ? &messenger_info : nullptr; // covers instance creation too
  create.pApplicationInfo = &app;
  create.enabledLayerCount = static_cast<uint32_t>(layers.size());
  create.ppEnabledLayerNames = layers.data();
  create.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  create.ppEnabledExtensionNames = extensions.data();
  VkResult r = vkCreateInstance(&create, nullptr, &shared->instance);
  if (r != VK_SUCCESS)
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: vulkan: vkCreateInstance failed: {}", result_name(r)));
  volkLoadInstanceOnly(shared->instance);
  if (shared->validation) {
    r = vkCreateDebugUtilsMessengerEXT(shared->instance, &messenger_info, nullptr,
                                       &shared->messenger);
    if (r != VK_SUCCESS)
      throw Error(ErrorKind::NoDevice,
                  fmt::format("no device: vulkan: vkCreateDebugUtilsMessengerEXT failed: {}",
                              result_name(r)));
  }
  return shared.release();
}

/// The instance, made by the first call that succeeds. Never destroyed (see the banner); it
/// stays reachable from here, so it is no leak.
SharedInstance &shared_instance() {
  static std::mutex mutex;
  static SharedInstance *instance = nullptr;
  std::lock_guard lock(mutex);
  if (!instance)
    instance = make_instance();
  return *instance;
}

/// One allocation: a storage buffer over its own memory; or adopted memory (a range of the
/// caller's VkBuffer, starting at `base_offset`, with no memory or mapping of ours).
struct Allocation {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void *mapped = nullptr;
  uint64_t bytes = 0;
  uint64_t base_offset = 0;
  bool adopted = false;
};

struct Timeline;

} // namespace

struct VulkanDevice::Impl {
  DeviceInfo info;
  /// SPIR-V made for this device's features (set with them at open).
  std::vector<BinaryTarget> binary_targets;
  bool validation = false;
  bool mapped_memory = false;

  SharedInstance *shared = nullptr;
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VolkDeviceTable vk{};
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  /// VkQueue is externally synchronized: held around vkQueueSubmit and vkQueueWaitIdle only,
  /// never while waiting for a semaphore.
  std::mutex queue_mutex;

  VkPhysicalDeviceProperties properties{};
  VkPhysicalDeviceMemoryProperties memory_properties{};
  uint32_t device_memory_type = 0;
  uint32_t staging_memory_type = 0;
  uint32_t subgroup_operations = 0;
  uint32_t max_subgroup_size = 0;
  bool full_subgroups = false;
  // Enabled features, for the capability check of compile_spirv.
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features features11{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features features12{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan13Features features13{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
  VkPhysicalDeviceShaderAtomicFloat2FeaturesEXT atomic_float2{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_2_FEATURES_EXT};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cooperative_matrix_features{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};

  VkPipelineCache pipeline_cache = VK_NULL_HANDLE; ///< internally synchronized

  /// Guards `allocations`, `streams` and `deferred` (allocate, free and create_stream come from
  /// any thread).
  std::mutex allocations_mutex;
  std::unordered_set<Allocation *> allocations;
  /// The timelines of the streams made so far (expired once a stream and its events are gone).
  std::vector<std::weak_ptr<Timeline>> streams;
  /// Memory freed while a stream still had work queued that may use it, and the tickets it
  /// waits for. A safety net under the contract (the Runtime's deletion queue frees only what
  /// every stream has reached): free() never waits, and the memory goes once the streams have
  /// passed those tickets (checked by free, allocate and every stream's synchronize).
  struct DeferredFree {
    Allocation *allocation = nullptr;
    std::vector<std::pair<std::weak_ptr<Timeline>, uint64_t>> tickets;
  };
  std::vector<DeferredFree> deferred;

  Impl() = default;
  Impl(const Impl &) = delete;
  Impl &operator=(const Impl &) = delete;
  ~Impl();

  /// Throws the validation messages collected during `what`, if any (Internal: cubecc made a
  /// call the validation layer refuses). Messages are collected per process, so with several
  /// threads a message may surface in another thread's operation.
  void raise_messages(std::string_view what) {
    std::vector<std::string> pending = shared->take_messages();
    if (pending.empty())
      return;
    std::string text = fmt::format("vulkan validation, during {}:", what);
    for (const std::string &m : pending)
      text += "\n  " + m;
    throw Error(ErrorKind::Internal, text);
  }

  /// Throws Error when `r` is not VK_SUCCESS: OutOfMemory for the out-of-memory results,
  /// DeviceFailure for a lost device, else `otherwise`.
  void check(VkResult r, std::string_view what, ErrorKind otherwise = ErrorKind::DeviceFailure) {
    if (r != VK_SUCCESS) {
      shared->take_messages();
      ErrorKind kind = otherwise;
      if (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY)
        kind = ErrorKind::OutOfMemory;
      else if (r == VK_ERROR_DEVICE_LOST)
        kind = ErrorKind::DeviceFailure;
      throw Error(kind, fmt::format("vulkan: {} failed: {}", what, result_name(r)));
    }
    raise_messages(what);
  }

  void open_instance();
  void choose_physical_device();
  void create_device();
  void choose_memory_types();
  void create_queue_objects();

  Allocation *create_allocation(uint64_t bytes, uint32_t memory_type, bool map);
  void destroy_allocation(Allocation *a);
  /// Destroys `a` now, or once every stream has completed the work queued so far.
  void free_when_unused(Allocation *a);
  /// Destroys the deferred allocations whose streams have passed their tickets.
  void collect_deferred();
};

//===- Opening
//---------------------------------------------------------------------------------===//

void VulkanDevice::Impl::open_instance() {
  shared = &shared_instance();
  instance = shared->instance;
  validation = shared->validation;
  shared->take_messages(); // what an earlier device left is not this one's
}

namespace {
int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    return 0;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
    return 1;
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
    return 2;
  case VK_PHYSICAL_DEVICE_TYPE_CPU:
    return 3;
  default:
    return 4;
  }
}
} // namespace

void VulkanDevice::Impl::choose_physical_device() {
  uint32_t count = 0;
  check(vkEnumeratePhysicalDevices(instance, &count, nullptr), "vkEnumeratePhysicalDevices",
        ErrorKind::NoDevice);
  std::vector<VkPhysicalDevice> devices(count);
  check(vkEnumeratePhysicalDevices(instance, &count, devices.data()), "vkEnumeratePhysicalDevices",
        ErrorKind::NoDevice);
  if (devices.empty())
    throw Error(ErrorKind::NoDevice,
                "no device: vulkan: the loader found no Vulkan driver with a device");

  auto usable = [&](VkPhysicalDevice d, std::string &why) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(d, &p);
    if (p.apiVersion < VK_API_VERSION_1_3) {
      why = fmt::format("{} supports Vulkan {}.{} (cubecc needs 1.3)", p.deviceName,
                        VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion));
      return false;
    }
    return true;
  };

  std::string reasons;
  if (const char *env = std::getenv("CUBECC_VULKAN_DEVICE"); env && *env) {
    char *end = nullptr;
    unsigned long index = std::strtoul(env, &end, 10);
    if (*end != '\0' || index >= devices.size())
      throw Error(ErrorKind::NoDevice,
                  fmt::format("no device: vulkan: CUBECC_VULKAN_DEVICE={} is not a device index "
                              "(there are {} Vulkan devices)",
                              env, devices.size()));
    std::string why;
    if (!usable(devices[index], why))
      throw Error(ErrorKind::NoDevice,
                  fmt::format("no device: vulkan: CUBECC_VULKAN_DEVICE={}: {}", env, why));
    physical = devices[index];
  } else {
    int best = 1 << 30;
    for (VkPhysicalDevice d : devices) {
      std::string why;
      if (!usable(d, why)) {
        reasons += (reasons.empty() ? "" : "; ") + why;
        continue;
      }
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(d, &p);
      if (type_rank(p.deviceType) < best) {
        best = type_rank(p.deviceType);
        physical = d;
      }
    }
    if (!physical)
      throw Error(ErrorKind::NoDevice, "no device: vulkan: no usable device: " + reasons);
  }

  uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, nullptr);
  std::vector<VkQueueFamilyProperties> family(families);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, family.data());
  bool found = false;
  for (uint32_t i = 0; i < families; ++i) { // a compute-only family first, then any with compute
    bool compute = family[i].queueFlags & VK_QUEUE_COMPUTE_BIT;
    bool graphics = family[i].queueFlags & VK_QUEUE_GRAPHICS_BIT;
    if (compute && (!found || !graphics)) {
      if (found && graphics)
        continue;
      queue_family = i;
      found = true;
    }
  }
  if (!found)
    throw Error(ErrorKind::NoDevice, "no device: vulkan: the device has no compute queue");
  info.timestamp_period_ns = family[queue_family].timestampValidBits ? 1.0 : 0.0;
}

void VulkanDevice::Impl::create_device() {
  // What the device has.
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, extensions.data());
  auto has_extension = [&](std::string_view name) {
    return std::any_of(extensions.begin(), extensions.end(),
                       [&](const VkExtensionProperties &e) { return e.extensionName == name; });
  };
  bool has_atomic_float = has_extension(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
  bool has_atomic_float2 = has_extension(VK_EXT_SHADER_ATOMIC_FLOAT_2_EXTENSION_NAME);
  bool has_cooperative_matrix = has_extension(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);

  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT has_af{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
  VkPhysicalDeviceShaderAtomicFloat2FeaturesEXT has_af2{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_2_FEATURES_EXT};
  VkPhysicalDeviceVulkan13Features has13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceVulkan12Features has12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features has11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceFeatures2 has{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  has.pNext = &has11;
  has11.pNext = &has12;
  has12.pNext = &has13;
  has13.pNext = has_atomic_float ? &has_af : nullptr;
  if (has_atomic_float2) {
    has_af2.pNext = has13.pNext;
    has13.pNext = &has_af2;
  }
  VkPhysicalDeviceCooperativeMatrixFeaturesNV has_cm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  if (has_cooperative_matrix) {
    has_cm.pNext = has13.pNext;
    has13.pNext = &has_cm;
  }
  vkGetPhysicalDeviceFeatures2(physical, &has);

  VkPhysicalDeviceVulkan13Properties props13{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES};
  VkPhysicalDeviceVulkan12Properties props12{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
  VkPhysicalDeviceVulkan11Properties props11{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
  VkPhysicalDeviceCooperativeMatrixPropertiesNV props_cm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_NV};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &props11;
  props11.pNext = &props12;
  props12.pNext = &props13;
  if (has_cooperative_matrix)
    props13.pNext = &props_cm;
  vkGetPhysicalDeviceProperties2(physical, &props);
  properties = props.properties;
  vkGetPhysicalDeviceMemoryProperties(physical, &memory_properties);

  // What cubecc's SPIR-V may need, where the device has it.
  features.features.shaderInt16 = has.features.shaderInt16;
  features.features.shaderInt64 = has.features.shaderInt64;
  features.features.shaderFloat64 = has.features.shaderFloat64;
  features11.storageBuffer16BitAccess = has11.storageBuffer16BitAccess;
  features11.uniformAndStorageBuffer16BitAccess = has11.uniformAndStorageBuffer16BitAccess;
  features12.shaderInt8 = has12.shaderInt8;
  features12.shaderFloat16 = has12.shaderFloat16;
  features12.storageBuffer8BitAccess = has12.storageBuffer8BitAccess;
  features12.uniformAndStorageBuffer8BitAccess = has12.uniformAndStorageBuffer8BitAccess;
  features12.shaderBufferInt64Atomics = has12.shaderBufferInt64Atomics;
  features12.shaderSharedInt64Atomics = has12.shaderSharedInt64Atomics;
  features12.shaderSubgroupExtendedTypes = has12.shaderSubgroupExtendedTypes;
  features12.vulkanMemoryModel = has12.vulkanMemoryModel;
  features12.vulkanMemoryModelDeviceScope = has12.vulkanMemoryModelDeviceScope;
  // Streams order their work and answer reached() and events with timeline semaphores
  // (required by Vulkan 1.2 and later, which cubecc needs; lavapipe has them).
  if (!has12.timelineSemaphore)
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: vulkan: {} has no timeline semaphores (timelineSemaphore), "
                            "which cubecc's streams need",
                            properties.deviceName));
  features12.timelineSemaphore = VK_TRUE;
  features13.subgroupSizeControl = has13.subgroupSizeControl;
  features13.computeFullSubgroups = has13.computeFullSubgroups;
  atomic_float.shaderBufferFloat32Atomics = has_af.shaderBufferFloat32Atomics;
  atomic_float.shaderBufferFloat32AtomicAdd = has_af.shaderBufferFloat32AtomicAdd;
  atomic_float.shaderBufferFloat64Atomics = has_af.shaderBufferFloat64Atomics;
  atomic_float.shaderBufferFloat64AtomicAdd = has_af.shaderBufferFloat64AtomicAdd;
  atomic_float.shaderSharedFloat32Atomics = has_af.shaderSharedFloat32Atomics;
  atomic_float.shaderSharedFloat32AtomicAdd = has_af.shaderSharedFloat32AtomicAdd;
  atomic_float.shaderSharedFloat64Atomics = has_af.shaderSharedFloat64Atomics;
  atomic_float.shaderSharedFloat64AtomicAdd = has_af.shaderSharedFloat64AtomicAdd;
  features.pNext = &features11;
  features11.pNext = &features12;
  features12.pNext = &features13;
  features13.pNext = has_atomic_float ? &atomic_float : nullptr;
  atomic_float2.shaderBufferFloat32AtomicMinMax = has_af2.shaderBufferFloat32AtomicMinMax;
  atomic_float2.shaderSharedFloat32AtomicMinMax = has_af2.shaderSharedFloat32AtomicMinMax;
  if (has_atomic_float2) {
    atomic_float2.pNext = features13.pNext;
    features13.pNext = &atomic_float2;
  }
  // Cooperative matrices in compute shaders: the matrix.mma shapes the device lists.
  bool cooperative_matrix =
      has_cooperative_matrix && has_cm.cooperativeMatrix &&
      (props_cm.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT);
  cooperative_matrix_features.cooperativeMatrix = cooperative_matrix;
  if (cooperative_matrix) {
    cooperative_matrix_features.pNext = features13.pNext;
    features13.pNext = &cooperative_matrix_features;
  }

  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = queue_family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  std::vector<const char *> enabled_extensions;
  if (has_atomic_float)
    enabled_extensions.push_back(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
  if (has_atomic_float2)
    enabled_extensions.push_back(VK_EXT_SHADER_ATOMIC_FLOAT_2_EXTENSION_NAME);
  if (cooperative_matrix)
    enabled_extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  VkDeviceCreateInfo create{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  create.pNext = &features;
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue_info;
  create.enabledExtensionCount = static_cast<uint32_t>(enabled_extensions.size());
  create.ppEnabledExtensionNames = enabled_extensions.data();
  VkResult r = vkCreateDevice(physical, &create, nullptr, &device);
  if (r != VK_SUCCESS)
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: vulkan: vkCreateDevice failed: {}", result_name(r)));
  raise_messages("vkCreateDevice");
  volkLoadDeviceTable(&vk, device);
  vk.vkGetDeviceQueue(device, queue_family, 0, &queue);

  // What codegen may emit for it.
  subgroup_operations = props11.subgroupSupportedOperations;
  bool compute_subgroups = props11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT;
  uint32_t ops = compute_subgroups ? subgroup_operations : 0;
  max_subgroup_size = props13.maxSubgroupSize ? props13.maxSubgroupSize : props11.subgroupSize;
  full_subgroups = features13.computeFullSubgroups;

  const VkPhysicalDeviceLimits &limits = properties.limits;
  info.backend = "vulkan";
  // A Vulkan driver that runs on the CPU (lavapipe, SwiftShader) stands in for a GPU.
  info.device_class = properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? DeviceClass::Software
                                                                           : DeviceClass::Gpu;
  info.name = properties.deviceName;
  info.driver = fmt::format("{} {}", props12.driverName, props12.driverInfo);
  info.vendor = vendor_name(properties.vendorID);
  info.arch = fmt::format("{:04x}:{:04x}", properties.vendorID, properties.deviceID);
  info.subgroup_size = props11.subgroupSize;
  info.max_buffer_bytes =
      std::min<uint64_t>(limits.maxStorageBufferRange, props11.maxMemoryAllocationSize);
  info.timestamp_period_ns *= limits.timestampPeriod;
  if (!limits.timestampComputeAndGraphics)
    info.timestamp_period_ns = 0;
  codegen::TargetFeatures &f = info.features;
  f.target = fmt::format("vulkan ({})", properties.deviceName);
  f.int8 = features12.shaderInt8 && features12.storageBuffer8BitAccess;
  f.int16 = features.features.shaderInt16 && features11.storageBuffer16BitAccess;
  f.int64 = features.features.shaderInt64;
  f.float16 = features12.shaderFloat16 && features11.storageBuffer16BitAccess;
  // No bf16 type in Vulkan 1.3: the SPIR-V writer emulates it with 16-bit storage and f32.
  f.bfloat16 = f.int16 && f.float16;
  f.float64 = features.features.shaderFloat64;
  f.int64_atomics =
      f.int64 && features12.shaderBufferInt64Atomics && features12.shaderSharedInt64Atomics;
  f.float32_atomic_add =
      atomic_float.shaderBufferFloat32AtomicAdd && atomic_float.shaderSharedFloat32AtomicAdd;
  f.float32_atomics =
      atomic_float.shaderBufferFloat32Atomics && atomic_float.shaderSharedFloat32Atomics;
  f.float64_atomic_add = f.float64 && atomic_float.shaderBufferFloat64AtomicAdd &&
                         atomic_float.shaderSharedFloat64AtomicAdd;
  f.float32_atomic_min_max = atomic_float2.shaderBufferFloat32AtomicMinMax &&
                             atomic_float2.shaderSharedFloat32AtomicMinMax;
  f.subgroup_arithmetic =
      (ops & VK_SUBGROUP_FEATURE_BASIC_BIT) && (ops & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  f.subgroup_extended_types = features12.shaderSubgroupExtendedTypes;
  // NVIDIA and AMD GPUs compute GLSL.std.450 Fma as one fused operation; Vulkan only promises
  // a * b + c, and lavapipe rounds twice. Elsewhere the writer computes fma exactly itself.
  f.fused_fma = properties.vendorID == 0x10de || properties.vendorID == 0x1002;
  f.signed_zero_inf_nan_preserve = props12.shaderSignedZeroInfNanPreserveFloat32 &&
                                   (!f.float16 || props12.shaderSignedZeroInfNanPreserveFloat16) &&
                                   (!f.float64 || props12.shaderSignedZeroInfNanPreserveFloat64);
  // Warps and wavefronts are consecutive local_index values for any workgroup shape; lavapipe
  // (and drivers not known here) may form subgroups along x rows.
  f.subgroup_size = props11.subgroupSize;
  f.linear_subgroups = properties.vendorID == 0x10de || properties.vendorID == 0x1002;
  f.subgroup_shuffle =
      (ops & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) && (ops & VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT);
  f.subgroup_ballot = (ops & VK_SUBGROUP_FEATURE_BASIC_BIT) &&
                      (ops & VK_SUBGROUP_FEATURE_BALLOT_BIT) &&
                      (ops & VK_SUBGROUP_FEATURE_VOTE_BIT);
  if (cooperative_matrix) {
    f.matrix_shapes = cooperative_matrix_shapes(physical);
    f.matrix_note = fmt::format("{} lists these VK_NV_cooperative_matrix shapes with f16 operands "
                                "in subgroup scope (SPIR-V 1.5 has no bf16 or fp8 type)",
                                properties.deviceName);
  } else {
    f.matrix_note = fmt::format("{} does not offer VK_NV_cooperative_matrix, which cubecc's "
                                "SPIR-V needs for matrix ops",
                                properties.deviceName);
  }
  f.max_shared_bytes = limits.maxComputeSharedMemorySize;
  f.max_param_block_bytes = limits.maxPushConstantsSize;
  f.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i)
    f.max_workgroup_size[i] = limits.maxComputeWorkGroupSize[i];
  binary_targets = {BinaryTarget{"vulkan", "spirv", f.fingerprint(), ""}};
}

void VulkanDevice::Impl::choose_memory_types() {
  // The memory types a storage buffer may use, from a probe buffer.
  VkBufferCreateInfo probe_info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  probe_info.size = 256;
  probe_info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                     VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer probe = VK_NULL_HANDLE;
  check(vk.vkCreateBuffer(device, &probe_info, nullptr, &probe), "vkCreateBuffer",
        ErrorKind::NoDevice);
  VkMemoryRequirements requirements;
  vk.vkGetBufferMemoryRequirements(device, probe, &requirements);
  vk.vkDestroyBuffer(device, probe, nullptr);

  auto find = [&](VkMemoryPropertyFlags wanted) -> int {
    for (uint32_t i = 0; i < memory_properties.memoryTypeCount; ++i)
      if ((requirements.memoryTypeBits & (1u << i)) &&
          (memory_properties.memoryTypes[i].propertyFlags & wanted) == wanted)
        return static_cast<int>(i);
    return -1;
  };
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int unified = find(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | host);
  int local = find(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  int staging = find(host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (staging < 0)
    staging = find(host);
  if (staging < 0)
    throw Error(ErrorKind::NoDevice,
                "no device: vulkan: the device has no host-visible coherent memory");
  mapped_memory = unified >= 0 && !env_flag("CUBECC_VULKAN_FORCE_STAGING");
  device_memory_type = static_cast<uint32_t>(mapped_memory ? unified
                                             : local >= 0  ? local
                                                           : staging);
  staging_memory_type = static_cast<uint32_t>(staging);
}

void VulkanDevice::Impl::create_queue_objects() {
  VkPipelineCacheCreateInfo cache_info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  check(vk.vkCreatePipelineCache(device, &cache_info, nullptr, &pipeline_cache),
        "vkCreatePipelineCache", ErrorKind::NoDevice);
}

VulkanDevice::Impl::~Impl() {
  if (device) {
    vk.vkDeviceWaitIdle(device); // streams, kernels and graphs hold the Impl: none is left
    for (Allocation *a : allocations)
      destroy_allocation(a);
    allocations.clear();
    for (DeferredFree &f : deferred)
      destroy_allocation(f.allocation);
    deferred.clear();
    if (pipeline_cache)
      vk.vkDestroyPipelineCache(device, pipeline_cache, nullptr);
    vk.vkDestroyDevice(device, nullptr);
  }
  std::vector<std::string> messages = shared ? shared->take_messages() : std::vector<std::string>{};
  if (!messages.empty()) {
    std::lock_guard log_lock(teardown_mutex);
    for (const std::string &m : messages) {
      std::cerr << "cubecc: vulkan validation, during teardown: " << m << "\n";
      teardown_log.push_back(m);
    }
  }
}

//===- Memory
//----------------------------------------------------------------------------------===//

Allocation *VulkanDevice::Impl::create_allocation(uint64_t bytes, uint32_t memory_type, bool map) {
  auto a = std::make_unique<Allocation>();
  a->bytes = bytes;
  VkBufferCreateInfo buffer_info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  buffer_info.size = std::max<uint64_t>(bytes, 4);
  buffer_info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                      VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  check(vk.vkCreateBuffer(device, &buffer_info, nullptr, &a->buffer), "vkCreateBuffer");
  VkMemoryRequirements requirements;
  vk.vkGetBufferMemoryRequirements(device, a->buffer, &requirements);
  VkMemoryAllocateInfo allocate_info{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  allocate_info.allocationSize = requirements.size;
  allocate_info.memoryTypeIndex = memory_type;
  VkResult r = vk.vkAllocateMemory(device, &allocate_info, nullptr, &a->memory);
  if (r != VK_SUCCESS) {
    vk.vkDestroyBuffer(device, a->buffer, nullptr);
    check(r, fmt::format("vkAllocateMemory of {} bytes", bytes), ErrorKind::OutOfMemory);
  }
  check(vk.vkBindBufferMemory(device, a->buffer, a->memory, 0), "vkBindBufferMemory");
  if (map)
    check(vk.vkMapMemory(device, a->memory, 0, VK_WHOLE_SIZE, 0, &a->mapped), "vkMapMemory");
  return a.release();
}

void VulkanDevice::Impl::destroy_allocation(Allocation *a) {
  if (a->mapped)
    vk.vkUnmapMemory(device, a->memory);
  vk.vkDestroyBuffer(device, a->buffer, nullptr);
  vk.vkFreeMemory(device, a->memory, nullptr);
  delete a;
}

namespace {

/// A kernel's Vulkan objects (module, layouts, pipeline), destroyed by the last of their holders:
/// the VulkanKernel, the graphs that recorded it and every stream batch that holds a recorded
/// launch of it until that batch has completed. So a kernel may be destroyed while a stream
/// still has launches of it queued or running: nothing flushes or waits, the pipeline goes when
/// the last batch using it is retired. Keeps the device's Impl alive.
struct PipelineState {
  explicit PipelineState(std::shared_ptr<VulkanDevice::Impl> impl) : impl(std::move(impl)) {}
  PipelineState(const PipelineState &) = delete;
  PipelineState &operator=(const PipelineState &) = delete;
  ~PipelineState() {
    auto &vk = impl->vk;
    if (pipeline)
      vk.vkDestroyPipeline(impl->device, pipeline, nullptr);
    if (pipeline_layout)
      vk.vkDestroyPipelineLayout(impl->device, pipeline_layout, nullptr);
    if (set_layout)
      vk.vkDestroyDescriptorSetLayout(impl->device, set_layout, nullptr);
    if (module)
      vk.vkDestroyShaderModule(impl->device, module, nullptr);
  }

  std::shared_ptr<VulkanDevice::Impl> impl;
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
};

/// A compiled kernel: its ABI and a share of its pipeline state.
class VulkanKernel final : public CompiledKernel {
public:
  VulkanKernel(std::shared_ptr<VulkanDevice::Impl> impl, codegen::KernelAbi abi)
      : state(std::make_shared<PipelineState>(std::move(impl))) {
    abi_ = std::move(abi);
  }
  const VulkanDevice::Impl *owner() const { return state->impl.get(); }

  std::shared_ptr<PipelineState> state;
};

/// A SPIR-V capability, the device feature it needs, and whether that is enabled.
struct CapabilityCheck {
  const char *name = "";
  const char *feature = "";
  bool supported = true;
};

CapabilityCheck check_capability(const VulkanDevice::Impl &d, uint32_t capability) {
  const VkPhysicalDeviceFeatures &f = d.features.features;
  const auto &f11 = d.features11;
  const auto &f12 = d.features12;
  const auto &af = d.atomic_float;
  auto subgroup = [&](const char *name, VkSubgroupFeatureFlagBits bit) {
    return CapabilityCheck{name, "the subgroup operations", (d.subgroup_operations & bit) != 0};
  };
  using C = spv::Capability;
  switch (static_cast<C>(capability)) {
  case C::Int8:
    return {"Int8", "shaderInt8", f12.shaderInt8 != 0};
  case C::Int16:
    return {"Int16", "shaderInt16", f.shaderInt16 != 0};
  case C::Int64:
    return {"Int64", "shaderInt64", f.shaderInt64 != 0};
  case C::Float16:
    return {"Float16", "shaderFloat16", f12.shaderFloat16 != 0};
  case C::Float64:
    return {"Float64", "shaderFloat64", f.shaderFloat64 != 0};
  case C::Int64Atomics:
    return {"Int64Atomics", "shaderBufferInt64Atomics", f12.shaderBufferInt64Atomics != 0};
  case C::StorageBuffer8BitAccess:
    return {"StorageBuffer8BitAccess", "storageBuffer8BitAccess", f12.storageBuffer8BitAccess != 0};
  case C::UniformAndStorageBuffer8BitAccess:
    return {"UniformAndStorageBuffer8BitAccess", "uniformAndStorageBuffer8BitAccess",
            f12.uniformAndStorageBuffer8BitAccess != 0};
  case C::StoragePushConstant8:
    return {"StoragePushConstant8", "storagePushConstant8 (not enabled by cubecc)", false};
  case C::StorageBuffer16BitAccess:
    return {"StorageBuffer16BitAccess", "storageBuffer16BitAccess",
            f11.storageBuffer16BitAccess != 0};
  case C::UniformAndStorageBuffer16BitAccess:
    return {"UniformAndStorageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess",
            f11.uniformAndStorageBuffer16BitAccess != 0};
  case C::StoragePushConstant16:
    return {"StoragePushConstant16", "storagePushConstant16 (not enabled by cubecc)", false};
  case C::VulkanMemoryModel:
    return {"VulkanMemoryModel", "vulkanMemoryModel", f12.vulkanMemoryModel != 0};
  case C::VulkanMemoryModelDeviceScope:
    return {"VulkanMemoryModelDeviceScope", "vulkanMemoryModelDeviceScope",
            f12.vulkanMemoryModelDeviceScope != 0};
  case C::GroupNonUniform:
    return subgroup("GroupNonUniform", VK_SUBGROUP_FEATURE_BASIC_BIT);
  case C::GroupNonUniformVote:
    return subgroup("GroupNonUniformVote", VK_SUBGROUP_FEATURE_VOTE_BIT);
  case C::GroupNonUniformArithmetic:
    return subgroup("GroupNonUniformArithmetic", VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  case C::GroupNonUniformBallot:
    return subgroup("GroupNonUniformBallot", VK_SUBGROUP_FEATURE_BALLOT_BIT);
  case C::GroupNonUniformShuffle:
    return subgroup("GroupNonUniformShuffle", VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  case C::GroupNonUniformShuffleRelative:
    return subgroup("GroupNonUniformShuffleRelative", VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT);
  case C::GroupNonUniformClustered:
    return subgroup("GroupNonUniformClustered", VK_SUBGROUP_FEATURE_CLUSTERED_BIT);
  case C::GroupNonUniformQuad:
    return subgroup("GroupNonUniformQuad", VK_SUBGROUP_FEATURE_QUAD_BIT);
  case C::AtomicFloat32AddEXT:
    return {"AtomicFloat32AddEXT", "shaderBufferFloat32AtomicAdd (VK_EXT_shader_atomic_float)",
            af.shaderBufferFloat32AtomicAdd || af.shaderSharedFloat32AtomicAdd};
  case C::AtomicFloat64AddEXT:
    return {"AtomicFloat64AddEXT", "shaderBufferFloat64AtomicAdd (VK_EXT_shader_atomic_float)",
            af.shaderBufferFloat64AtomicAdd || af.shaderSharedFloat64AtomicAdd};
  case C::AtomicFloat32MinMaxEXT:
    return {"AtomicFloat32MinMaxEXT",
            "shaderBufferFloat32AtomicMinMax (VK_EXT_shader_atomic_float2)",
            d.atomic_float2.shaderBufferFloat32AtomicMinMax ||
                d.atomic_float2.shaderSharedFloat32AtomicMinMax};
  case C::AtomicFloat16AddEXT:
    return {"AtomicFloat16AddEXT", "shaderBufferFloat16AtomicAdd (not enabled by cubecc)", false};
  case C::CooperativeMatrixNV:
    return {"CooperativeMatrixNV", "cooperativeMatrix (VK_NV_cooperative_matrix)",
            d.cooperative_matrix_features.cooperativeMatrix != 0};
  default:
    return {};
  }
}

} // namespace

//===- VulkanDevice
//----------------------------------------------------------------------------===//

VulkanDevice::VulkanDevice(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<VulkanDevice> VulkanDevice::open() {
  auto impl = std::make_shared<Impl>();
  impl->open_instance();
  impl->choose_physical_device();
  impl->create_device();
  impl->choose_memory_types();
  impl->create_queue_objects();
  return std::unique_ptr<VulkanDevice>(new VulkanDevice(std::move(impl)));
}

// Streams, kernels and graphs hold the Impl: the VkDevice goes with the last of them.
VulkanDevice::~VulkanDevice() = default;

const DeviceInfo &VulkanDevice::info() const {
  return impl_->info;
}

bool VulkanDevice::validation_enabled() const {
  return impl_->validation;
}

std::vector<std::string> VulkanDevice::teardown_messages() {
  std::lock_guard lock(teardown_mutex);
  return teardown_log;
}

DeviceMemory VulkanDevice::allocate(uint64_t bytes) {
  Allocation *a = impl_->create_allocation(bytes, impl_->device_memory_type, impl_->mapped_memory);
  impl_->collect_deferred();
  std::lock_guard lock(impl_->allocations_mutex);
  impl_->allocations.insert(a);
  return DeviceMemory{a, bytes};
}

void VulkanDevice::free(DeviceMemory memory) {
  auto *a = static_cast<Allocation *>(memory.handle);
  if (!a)
    return;
  // The memory pool frees only what every stream has reached; should a stream still have work
  // queued, the memory waits for it in the deferred list: no flush, no wait either way.
  impl_->free_when_unused(a);
}

DeviceMemory VulkanDevice::adopt_memory(const ExternalMemory &memory) {
  if (memory.kind != ExternalMemory::Kind::Vulkan)
    return Device::adopt_memory(memory);
  uint64_t alignment = impl_->properties.limits.minStorageBufferOffsetAlignment;
  if (memory.offset % alignment)
    throw Error(
        ErrorKind::InvalidArgument,
        fmt::format("adopt_memory: the VkBuffer offset {} is not a multiple of the "
                    "device's storage buffer alignment {} (minStorageBufferOffsetAlignment)",
                    memory.offset, alignment));
  auto a = std::make_unique<Allocation>();
  a->buffer = reinterpret_cast<VkBuffer>(static_cast<uintptr_t>(memory.handle));
  a->bytes = memory.bytes;
  a->base_offset = memory.offset;
  a->adopted = true;
  return DeviceMemory{a.release(), memory.bytes};
}

void VulkanDevice::release_adopted(DeviceMemory memory) {
  auto *a = static_cast<Allocation *>(memory.handle);
  if (!a || !a->adopted)
    return;
  delete a; // no queued work uses it any more (as for free); the VkBuffer is the caller's
}

ExternalMemory VulkanDevice::native_memory(const DeviceMemory &memory) const {
  const auto *a = static_cast<const Allocation *>(memory.handle);
  return ExternalMemory::vulkan(reinterpret_cast<uintptr_t>(a->buffer), a->base_offset,
                                memory.bytes);
}

VulkanDevice::Handles VulkanDevice::handles() const {
  Handles h;
  h.instance = impl_->instance;
  h.physical_device = impl_->physical;
  h.device = impl_->device;
  h.queue_family_index = impl_->queue_family;
  h.get_instance_proc_addr = reinterpret_cast<void *>(vkGetInstanceProcAddr);
  return h;
}

namespace {
void check_range(const DeviceMemory &memory, uint64_t offset, uint64_t bytes, const char *what) {
  if (!memory.handle || offset > memory.bytes || bytes > memory.bytes - offset)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("vulkan: {}: the range [{}, {}) lies outside the {} bytes of the "
                            "memory",
                            what, offset, offset + bytes, memory.bytes));
}
} // namespace

std::unique_ptr<CompiledKernel> VulkanDevice::compile(const ir::Kernel &kernel) {
  std::vector<ir::Diagnostic> errors;
  std::optional<codegen::SpirvKernel> spirv = codegen::emit_spirv(kernel, info().features, errors);
  if (!spirv)
    throw Error(ErrorKind::Unsupported, fmt::format("vulkan: cannot compile kernel '{}':\n{}",
                                                    kernel.name(), ir::to_string(errors)));
  return compile_spirv(*spirv);
}

std::vector<BinaryTarget> VulkanDevice::binary_targets() const {
  return impl_->binary_targets;
}

std::unique_ptr<CompiledKernel> VulkanDevice::load_binary(const KernelBinary &binary) {
  std::string_view bytes = binary.bytes;
  if (binary.target.format != "spirv" || bytes.size() % 4 != 0 || bytes.empty())
    throw Error(ErrorKind::Environment,
                fmt::format("vulkan: kernel '{}': not a SPIR-V module ({} {}, {} bytes)",
                            binary.abi.name, binary.target.target, binary.target.format,
                            bytes.size()));
  codegen::SpirvKernel kernel;
  kernel.words.resize(bytes.size() / 4);
  std::memcpy(kernel.words.data(), bytes.data(), bytes.size());
  kernel.abi = binary.abi;
  // The module comes from a file: the driver sees it only once it is valid SPIR-V (drivers are
  // not required to survive anything else) and declares exactly the interface the pipeline is
  // made from (spirv_interface.h). ~0.1 ms, once per kernel and process.
  if (std::string problems = codegen::validate_spirv(kernel.words); !problems.empty())
    throw Error(ErrorKind::Environment,
                fmt::format("vulkan: kernel '{}': its SPIR-V does not validate: {}",
                            binary.abi.name, problems.substr(0, problems.find('\n'))));
  if (std::string why = check_spirv_interface(kernel.words, kernel.abi,
                                              impl_->properties.limits.maxComputeSharedMemorySize);
      !why.empty())
    throw Error(ErrorKind::Environment,
                fmt::format("vulkan: kernel '{}': its SPIR-V does not match its launch "
                            "metadata: {}",
                            binary.abi.name, why));
  return compile_spirv(kernel);
}

std::unique_ptr<CompiledKernel> VulkanDevice::compile_spirv(const codegen::SpirvKernel &kernel) {
  Impl &d = *impl_;
  const codegen::KernelAbi &abi = kernel.abi;
  const std::string &name = abi.name;
  const std::string &target = d.info.features.target;
  const std::vector<uint32_t> &words = kernel.words;
  if (words.size() < 5 || words[0] != 0x07230203u)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: kernel '{}': not a SPIR-V module", target, name));

  // Capabilities the module declares, against what the device has enabled.
  std::string refused;
  for (size_t i = 5; i < words.size();) {
    uint32_t count = words[i] >> 16, opcode = words[i] & 0xffff;
    if (count == 0 || i + count > words.size())
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("{}: kernel '{}': malformed SPIR-V at word {}", target, name, i));
    if (opcode == static_cast<uint32_t>(spv::Op::OpCapability)) {
      CapabilityCheck c = check_capability(d, words[i + 1]);
      if (!c.supported)
        refused += fmt::format("{}{} (the device lacks {})", refused.empty() ? "" : ", ", c.name,
                               c.feature);
    } else if (opcode == static_cast<uint32_t>(spv::Op::OpFunction)) {
      break; // capabilities come first
    }
    i += count;
  }
  if (!refused.empty())
    throw Error(ErrorKind::Unsupported,
                fmt::format("{}: kernel '{}' needs SPIR-V capabilities this device does not "
                            "support: {}",
                            target, name, refused));
  const VkPhysicalDeviceLimits &limits = d.properties.limits;
  if (!abi.param_block_in_buffer && abi.param_block_bytes > limits.maxPushConstantsSize)
    throw Error(ErrorKind::Unsupported,
                fmt::format("{}: kernel '{}' has {} bytes of value parameters; the device takes "
                            "at most {} bytes of push constants",
                            target, name, abi.param_block_bytes, limits.maxPushConstantsSize));
  if (abi.shared_bytes > limits.maxComputeSharedMemorySize)
    throw Error(ErrorKind::Unsupported,
                fmt::format("{}: kernel '{}' uses {} bytes of shared memory; the device has {}",
                            target, name, abi.shared_bytes, limits.maxComputeSharedMemorySize));
  uint64_t invocations =
      uint64_t(abi.workgroup_size[0]) * abi.workgroup_size[1] * abi.workgroup_size[2];
  for (int i = 0; i < 3; ++i)
    if (abi.workgroup_size[i] > limits.maxComputeWorkGroupSize[i] || abi.workgroup_size[i] == 0)
      invocations = ~uint64_t(0);
  if (invocations > limits.maxComputeWorkGroupInvocations)
    throw Error(ErrorKind::Unsupported,
                fmt::format("{}: kernel '{}' has workgroup size ({}, {}, {}); the device allows "
                            "at most ({}, {}, {}) and {} invocations",
                            target, name, abi.workgroup_size[0], abi.workgroup_size[1],
                            abi.workgroup_size[2], limits.maxComputeWorkGroupSize[0],
                            limits.maxComputeWorkGroupSize[1], limits.maxComputeWorkGroupSize[2],
                            limits.maxComputeWorkGroupInvocations));

  auto compiled = std::make_unique<VulkanKernel>(impl_, abi);
  std::string what = fmt::format("compiling kernel '{}'", name);
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = words.size() * sizeof(uint32_t);
  module_info.pCode = words.data();
  d.check(d.vk.vkCreateShaderModule(d.device, &module_info, nullptr, &compiled->state->module),
          what, ErrorKind::Unsupported);

  // Bindings: the buffers, then the parameter block when it does not fit in push constants.
  uint32_t num_bindings = abi.num_buffers + (abi.param_block_in_buffer ? 1 : 0);
  std::vector<VkDescriptorSetLayoutBinding> bindings(num_bindings);
  for (uint32_t b = 0; b < num_bindings; ++b) {
    bindings[b].binding = b;
    bindings[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[b].descriptorCount = 1;
    bindings[b].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.bindingCount = num_bindings;
  set_info.pBindings = bindings.data();
  d.check(
      d.vk.vkCreateDescriptorSetLayout(d.device, &set_info, nullptr, &compiled->state->set_layout),
      what);

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, abi.param_block_bytes};
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &compiled->state->set_layout;
  layout_info.pushConstantRangeCount =
      abi.param_block_bytes > 0 && !abi.param_block_in_buffer ? 1 : 0;
  layout_info.pPushConstantRanges = &range;
  d.check(d.vk.vkCreatePipelineLayout(d.device, &layout_info, nullptr,
                                      &compiled->state->pipeline_layout),
          what);

  VkComputePipelineCreateInfo pipeline_info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  pipeline_info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline_info.stage.module = compiled->state->module;
  pipeline_info.stage.pName = "main";
  // Full subgroups make subgroup_id and subgroup_lane mean what the IR says for every subgroup
  // but a workgroup's last.
  if (d.full_subgroups && d.max_subgroup_size && abi.workgroup_size[0] % d.max_subgroup_size == 0)
    pipeline_info.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  pipeline_info.layout = compiled->state->pipeline_layout;
  d.check(d.vk.vkCreateComputePipelines(d.device, d.pipeline_cache, 1, &pipeline_info, nullptr,
                                        &compiled->state->pipeline),
          what, ErrorKind::Unsupported);
  return compiled;
}

namespace {

// Launches per batch before it is submitted: bounds the descriptor and query pools.
constexpr uint32_t kBatchLaunches = 256;
constexpr uint32_t kBatchDescriptors = kBatchLaunches * 16;
// Parameter blocks too large for push constants go into a host-visible buffer of the batch, one
// slice per launch.
constexpr uint64_t kParamArenaBytes = 64 * 1024;

/// A launch checked against the device and laid out: the buffer ranges by binding (the
/// parameter block's slot, if any, is filled in by whoever places the block) and the packed
/// parameter block. Holds a share of the kernel's pipeline state.
struct PreparedLaunch {
  const VulkanKernel *kernel = nullptr; ///< for its ABI, while the caller holds the kernel
  std::shared_ptr<PipelineState> state;
  std::array<uint32_t, 3> num_workgroups{};
  std::vector<VkDescriptorBufferInfo> buffers;
  std::vector<uint8_t> block;
  uint32_t num_bindings() const { return static_cast<uint32_t>(buffers.size()); }
};

PreparedLaunch prepare_launch(const VulkanDevice::Impl &d, const CompiledKernel &kernel,
                              std::array<uint32_t, 3> num_workgroups,
                              std::span<const LaunchArg> args) {
  const auto *k = dynamic_cast<const VulkanKernel *>(&kernel);
  if (!k || k->owner() != &d)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("vulkan: kernel '{}' was compiled for another device; compile it "
                            "on this one",
                            kernel.abi().name));
  const codegen::KernelAbi &abi = k->abi();
  const VkPhysicalDeviceLimits &limits = d.properties.limits;
  for (int i = 0; i < 3; ++i)
    if (num_workgroups[i] > limits.maxComputeWorkGroupCount[i])
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("vulkan: launch of kernel '{}': a grid of {}x{}x{} workgroups "
                              "exceeds the device's maximum of {}x{}x{}",
                              abi.name, num_workgroups[0], num_workgroups[1], num_workgroups[2],
                              limits.maxComputeWorkGroupCount[0],
                              limits.maxComputeWorkGroupCount[1],
                              limits.maxComputeWorkGroupCount[2]));
  if (args.size() != abi.params.size())
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("vulkan: launch of kernel '{}': {} arguments for {} parameters",
                            abi.name, args.size(), abi.params.size()));
  if (abi.param_block_in_buffer && abi.param_block_bytes > kParamArenaBytes)
    throw Error(ErrorKind::Unsupported,
                fmt::format("vulkan: launch of kernel '{}': {} bytes of value parameters are "
                            "more than the runtime passes ({})",
                            abi.name, abi.param_block_bytes, kParamArenaBytes));

  PreparedLaunch p;
  p.kernel = k;
  p.state = k->state;
  p.num_workgroups = num_workgroups;
  p.buffers.resize(abi.num_buffers + (abi.param_block_in_buffer ? 1 : 0));
  p.block.resize(abi.param_block_bytes);
  for (size_t i = 0; i < args.size(); ++i) {
    const codegen::ParamSlot &slot = abi.params[i];
    const LaunchArg &a = args[i];
    if (slot.kind == codegen::ParamSlot::Value) {
      if (a.memory || a.bits.size() != slot.type.lanes())
        throw Error(ErrorKind::InvalidArgument,
                    fmt::format("vulkan: launch of kernel '{}': parameter {} needs {} lane(s)",
                                abi.name, i, slot.type.lanes()));
      codegen::pack_value(slot, a.bits.data(), p.block.data());
      continue;
    }
    if (!a.memory)
      throw Error(
          ErrorKind::InvalidArgument,
          fmt::format("vulkan: launch of kernel '{}': parameter {} needs a buffer", abi.name, i));
    check_range(*a.memory, a.offset, a.bytes, "launch");
    if (a.bytes == 0)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("vulkan: launch of kernel '{}': parameter {} is an empty buffer "
                              "range, which Vulkan cannot bind",
                              abi.name, i));
    if (a.offset % limits.minStorageBufferOffsetAlignment)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("vulkan: launch of kernel '{}': parameter {} starts at byte {}, "
                              "not a multiple of the device's storage buffer alignment {}",
                              abi.name, i, a.offset, limits.minStorageBufferOffsetAlignment));
    if (a.bytes > limits.maxStorageBufferRange)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("vulkan: launch of kernel '{}': parameter {} binds {} bytes; the "
                              "device binds at most {}",
                              abi.name, i, a.bytes, limits.maxStorageBufferRange));
    const auto *memory = static_cast<const Allocation *>(a.memory->handle);
    p.buffers[slot.binding] = {memory->buffer, memory->base_offset + a.offset, a.bytes};
  }
  return p;
}

/// Records one prepared launch into `cmd`: pipeline, descriptor set, push constants, timestamps
/// around the dispatch (queries `query` and `query + 1` when `query_pool` is set), barrier.
void record_launch(VulkanDevice::Impl &d, VkCommandBuffer cmd, const PreparedLaunch &p,
                   VkDescriptorSet set, VkQueryPool query_pool, uint32_t query) {
  const PipelineState &k = *p.state;
  if (k.pipeline == VK_NULL_HANDLE)
    throw Error(ErrorKind::Internal, "vulkan: a launch of a kernel without a pipeline");
  uint32_t block_bytes = static_cast<uint32_t>(p.block.size());
  bool pushed = !p.kernel->abi().param_block_in_buffer;
  d.vk.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);
  if (set)
    d.vk.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline_layout, 0, 1, &set,
                                 0, nullptr);
  if (block_bytes && pushed)
    d.vk.vkCmdPushConstants(cmd, k.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, block_bytes,
                            p.block.data());
  if (query_pool)
    d.vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, query_pool, query);
  d.vk.vkCmdDispatch(cmd, p.num_workgroups[0], p.num_workgroups[1], p.num_workgroups[2]);
  if (query_pool)
    d.vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool, query + 1);
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                          VK_ACCESS_HOST_READ_BIT;
  d.vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                                VK_PIPELINE_STAGE_HOST_BIT,
                            0, 1, &barrier, 0, nullptr, 0, nullptr);
}

void write_descriptor_set(VulkanDevice::Impl &d, VkDescriptorSet set,
                          const std::vector<VkDescriptorBufferInfo> &buffers) {
  std::vector<VkWriteDescriptorSet> writes(buffers.size());
  for (uint32_t b = 0; b < buffers.size(); ++b) {
    writes[b].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[b].dstSet = set;
    writes[b].dstBinding = b;
    writes[b].descriptorCount = 1;
    writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[b].pBufferInfo = &buffers[b];
  }
  d.vk.vkUpdateDescriptorSets(d.device, static_cast<uint32_t>(writes.size()), writes.data(), 0,
                              nullptr);
}

//===- Streams --------------------------------------------------------------------------------===//

/// A stream's timeline semaphore: value n means the stream's first n units of work (launches,
/// copies through staging, graph replays; DeviceStream::mark counts them) have completed. Shared
/// by the stream, its events and the batches of other streams that wait on it, so it outlives
/// whichever of them goes first.
struct Timeline {
  explicit Timeline(std::shared_ptr<VulkanDevice::Impl> owner) : impl(std::move(owner)) {
    VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    type.initialValue = 0;
    VkSemaphoreCreateInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    info.pNext = &type;
    impl->check(impl->vk.vkCreateSemaphore(impl->device, &info, nullptr, &semaphore),
                "vkCreateSemaphore (a stream's timeline)");
  }
  Timeline(const Timeline &) = delete;
  Timeline &operator=(const Timeline &) = delete;
  ~Timeline() {
    if (semaphore)
      impl->vk.vkDestroySemaphore(impl->device, semaphore, nullptr);
  }

  /// The value reached so far; 0 when the device failed (so nothing counts as reached).
  uint64_t value() const {
    uint64_t v = 0;
    if (impl->vk.vkGetSemaphoreCounterValue(impl->device, semaphore, &v) != VK_SUCCESS)
      return 0;
    return v;
  }

  /// Blocks until the value is at least `target`; throws Error (DeviceFailure) when the device
  /// failed.
  void wait(uint64_t target, std::string_view what) const {
    VkSemaphoreWaitInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
    info.semaphoreCount = 1;
    info.pSemaphores = &semaphore;
    info.pValues = &target;
    impl->check(impl->vk.vkWaitSemaphores(impl->device, &info, UINT64_MAX), what);
  }

  std::shared_ptr<VulkanDevice::Impl> impl;
  VkSemaphore semaphore = VK_NULL_HANDLE;
  /// Units of work queued on the stream (launches, copies on the device, graph replays, lone
  /// waits): the tickets. Written by the stream's thread, read by any.
  std::atomic<uint64_t> queued{0};
};

/// A point on a stream's timeline (VulkanStream::record).
class VulkanEvent final : public DeviceEvent {
public:
  VulkanEvent(std::shared_ptr<Timeline> timeline, uint64_t value)
      : timeline_(std::move(timeline)), value_(value) {}
  bool done() override { return value_ == 0 || timeline_->value() >= value_; }
  void wait() override {
    if (value_)
      timeline_->wait(value_, "waiting for a stream's event");
  }
  const std::shared_ptr<Timeline> &timeline() const { return timeline_; }
  uint64_t value() const { return value_; }

private:
  std::shared_ptr<Timeline> timeline_;
  uint64_t value_;
};

/// An in-order queue on the device's one VkQueue. Work is recorded into batches; a batch is a
/// command buffer with its own descriptor pool, query pool (a timestamp pair per launch) and
/// parameter arena, submitted when it is full, when a copy or synchronize() needs its results,
/// or when record() or a graph replay needs it on the queue. Each submission waits for the
/// stream's previous one and for the events wait() added (timeline semaphores: the host never
/// blocks for them), and signals the stream's timeline with the count of work queued so far.
/// kFrames batches rotate, so recording goes on while earlier batches run; a batch is retired
/// (its times read, the pipelines and staging buffers it held let go, its pools reset) once the
/// timeline shows it completed.
///
/// Lifetimes: a batch holds a share of the pipeline state of every kernel it launches, the
/// staging buffers of its uploads and the timelines it waits on, until it is retired. Buffers
/// are the memory pool's to keep alive (mark/reached).
class VulkanStream final : public DeviceStream {
public:
  explicit VulkanStream(std::shared_ptr<VulkanDevice::Impl> impl)
      : impl_(std::move(impl)), d_(*impl_), timeline_(std::make_shared<Timeline>(impl_)),
        queued_(timeline_->queued) {
    try {
      for (Frame &f : frames_)
        create_frame(f);
    } catch (...) {
      destroy_frames();
      throw;
    }
  }

  ~VulkanStream() override {
    try {
      drain();
    } catch (const Error &) {
      // the caller's to see at synchronize(); make sure nothing of ours still runs
      std::lock_guard lock(d_.queue_mutex);
      d_.vk.vkQueueWaitIdle(d_.queue);
    }
    destroy_frames();
  }

  const VulkanDevice::Impl *owner() const { return impl_.get(); }
  const std::shared_ptr<Timeline> &timeline() const { return timeline_; }

  void upload(const DeviceMemory &dst, uint64_t offset, const void *src, uint64_t bytes) override {
    check_range(dst, offset, bytes, "upload");
    auto *a = static_cast<Allocation *>(dst.handle);
    if (!bytes)
      return;
    if (a->mapped) {
      drain(); // the work queued before sees the old contents
      std::memcpy(static_cast<uint8_t *>(a->mapped) + offset, src, bytes);
      return;
    }
    // Through a staging buffer, copied on the device in order with the launches: no wait.
    Allocation *s = d_.create_allocation(bytes, d_.staging_memory_type, true);
    std::memcpy(s->mapped, src, bytes);
    Frame *f = nullptr;
    try {
      f = &recording_frame(0, 0);
    } catch (...) {
      d_.destroy_allocation(s);
      throw;
    }
    f->staging.push_back(s);
    record_copy(f->command_buffer, s->buffer, 0, a->buffer, a->base_offset + offset, bytes);
    queued_.fetch_add(1);
  }

  void download(const DeviceMemory &src, uint64_t offset, void *dst, uint64_t bytes) override {
    check_range(src, offset, bytes, "download");
    auto *a = static_cast<Allocation *>(src.handle);
    if (a->mapped || !bytes) {
      drain();
      if (bytes)
        std::memcpy(dst, static_cast<const uint8_t *>(a->mapped) + offset, bytes);
      return;
    }
    Allocation *s = d_.create_allocation(bytes, d_.staging_memory_type, true);
    try {
      Frame &f = recording_frame(0, 0);
      record_copy(f.command_buffer, a->buffer, a->base_offset + offset, s->buffer, 0, bytes);
      queued_.fetch_add(1);
      drain();
      std::memcpy(dst, s->mapped, bytes);
    } catch (...) {
      // After a failed wait the device is lost or idle (drain waits for everything it submitted)
      std::lock_guard lock(d_.queue_mutex);
      d_.vk.vkQueueWaitIdle(d_.queue);
      d_.destroy_allocation(s);
      throw;
    }
    d_.destroy_allocation(s);
  }

  void launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
              std::span<const LaunchArg> args) override {
    PreparedLaunch p = prepare_launch(d_, kernel, num_workgroups, args);
    const codegen::KernelAbi &abi = p.kernel->abi();
    uint32_t num_bindings = p.num_bindings();
    uint64_t param_bytes = abi.param_block_in_buffer ? abi.param_block_bytes : 0;
    Frame &f = recording_frame(num_bindings, param_bytes);
    if (abi.param_block_in_buffer) {
      if (!f.params)
        f.params = d_.create_allocation(kParamArenaBytes, d_.staging_memory_type, true);
      uint64_t param_offset = align(f.params_used);
      std::memcpy(static_cast<uint8_t *>(f.params->mapped) + param_offset, p.block.data(),
                  abi.param_block_bytes);
      p.buffers[abi.num_buffers] = {f.params->buffer, param_offset,
                                    std::max<uint64_t>(abi.param_block_bytes, 4)};
      f.params_used = param_offset + abi.param_block_bytes;
    }
    std::string what = fmt::format("the launch of kernel '{}'", abi.name);
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (num_bindings) {
      VkDescriptorSetAllocateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      set_info.descriptorPool = f.descriptor_pool;
      set_info.descriptorSetCount = 1;
      set_info.pSetLayouts = &p.state->set_layout;
      d_.check(d_.vk.vkAllocateDescriptorSets(d_.device, &set_info, &set), what);
      write_descriptor_set(d_, set, p.buffers);
      f.descriptors += num_bindings;
    }
    record_launch(d_, f.command_buffer, p, set, f.query_pool, 2 * f.launches);
    ++f.launches;
    f.kernels.push_back(std::move(p.state));
    queued_.fetch_add(1);
    d_.raise_messages(what);
  }

  void synchronize() override {
    drain();
    last_times_ = std::move(completed_times_);
    completed_times_.clear();
  }

  std::vector<double> last_launch_times_ns() const override { return last_times_; }

  std::shared_ptr<DeviceEvent> record() override {
    if (recording_ || !waits_.empty())
      submit(VK_NULL_HANDLE); // the event must complete without this thread's help
    return std::make_shared<VulkanEvent>(timeline_, submitted_);
  }

  void wait(DeviceEvent &event) override {
    auto *e = dynamic_cast<VulkanEvent *>(&event);
    if (!e || e->timeline()->impl.get() != impl_.get())
      throw Error(ErrorKind::InvalidArgument,
                  "vulkan: stream wait: the event was recorded on another device's stream; "
                  "wait for it on the host (DeviceEvent::wait) instead");
    if (e->timeline() == timeline_ || e->done())
      return; // in order already, or nothing left to wait for
    waits_.push_back({e->timeline(), e->value()});
  }

  std::unique_ptr<DeviceGraph> create_graph() override;

  uint64_t mark() override { return queued_.load(); }
  bool reached(uint64_t ticket) override { return ticket == 0 || timeline_->value() >= ticket; }

  /// Queues `command_buffer` (a graph's) after the work queued so far, waits for it, and appends
  /// the time of its query pair (queries 0 and 1 of `query_pool`, when set) to the launch times.
  void replay(VkCommandBuffer command_buffer, VkQueryPool query_pool, std::string_view what) {
    recording_frame(0, 0); // the batch carries the signal, the waits and what is held
    queued_.fetch_add(1);
    submit(command_buffer);
    drain();
    if (query_pool) {
      uint64_t ticks[2] = {0, 0};
      d_.check(d_.vk.vkGetQueryPoolResults(d_.device, query_pool, 0, 2, sizeof(ticks), ticks,
                                           sizeof(uint64_t),
                                           VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
               what);
      completed_times_.push_back(double(ticks[1] - ticks[0]) * d_.info.timestamp_period_ns);
    }
  }

private:
  static constexpr size_t kFrames = 3;

  /// One batch's objects and what it holds until it is retired.
  struct Frame {
    VkCommandPool command_pool = VK_NULL_HANDLE;
    VkCommandBuffer command_buffer = VK_NULL_HANDLE;
    VkDescriptorPool descriptor_pool = VK_NULL_HANDLE;
    VkQueryPool query_pool = VK_NULL_HANDLE; ///< null when the queue has no timestamps
    Allocation *params = nullptr;            ///< the parameter arena, made on first need
    uint64_t params_used = 0;
    uint32_t launches = 0;
    uint32_t descriptors = 0;
    uint64_t signal = 0; ///< the timeline value its submission signals (0: not submitted)
    std::vector<std::shared_ptr<PipelineState>> kernels;
    std::vector<Allocation *> staging;
    std::vector<std::shared_ptr<Timeline>> waited;
  };

  uint64_t align(uint64_t offset) const {
    uint64_t alignment = d_.properties.limits.minStorageBufferOffsetAlignment;
    return (offset + alignment - 1) / alignment * alignment;
  }

  void create_frame(Frame &f) {
    std::string_view what = "creating a stream";
    VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
    pool_info.queueFamilyIndex = d_.queue_family;
    d_.check(d_.vk.vkCreateCommandPool(d_.device, &pool_info, nullptr, &f.command_pool), what);
    VkCommandBufferAllocateInfo buffer_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    buffer_info.commandPool = f.command_pool;
    buffer_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    buffer_info.commandBufferCount = 1;
    d_.check(d_.vk.vkAllocateCommandBuffers(d_.device, &buffer_info, &f.command_buffer), what);
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kBatchDescriptors};
    VkDescriptorPoolCreateInfo descriptor_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    descriptor_info.maxSets = kBatchLaunches;
    descriptor_info.poolSizeCount = 1;
    descriptor_info.pPoolSizes = &size;
    d_.check(d_.vk.vkCreateDescriptorPool(d_.device, &descriptor_info, nullptr, &f.descriptor_pool),
             what);
    if (d_.info.timestamp_period_ns > 0) {
      VkQueryPoolCreateInfo query_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
      query_info.queryCount = 2 * kBatchLaunches;
      d_.check(d_.vk.vkCreateQueryPool(d_.device, &query_info, nullptr, &f.query_pool), what);
    }
  }

  void destroy_frames() {
    for (Frame &f : frames_) {
      for (Allocation *s : f.staging)
        d_.destroy_allocation(s);
      f.staging.clear();
      if (f.params)
        d_.destroy_allocation(f.params);
      if (f.query_pool)
        d_.vk.vkDestroyQueryPool(d_.device, f.query_pool, nullptr);
      if (f.descriptor_pool)
        d_.vk.vkDestroyDescriptorPool(d_.device, f.descriptor_pool, nullptr);
      if (f.command_pool)
        d_.vk.vkDestroyCommandPool(d_.device, f.command_pool, nullptr);
      f = Frame{};
    }
  }

  /// The batch being recorded, with room for a launch of `bindings` descriptors and a
  /// `param_bytes` parameter block: the current one, or a new one (the current one submitted
  /// when full; the oldest in flight waited for when every batch is in flight).
  Frame &recording_frame(uint32_t bindings, uint64_t param_bytes) {
    if (recording_) {
      Frame &f = frames_[*recording_];
      bool full = f.launches == kBatchLaunches || f.descriptors + bindings > kBatchDescriptors ||
                  (param_bytes && align(f.params_used) + param_bytes > kParamArenaBytes);
      if (!full)
        return f;
      submit(VK_NULL_HANDLE);
    }
    // Retire what has completed; when every batch is in flight, wait for the oldest.
    while (!in_flight_.empty() && timeline_->value() >= frames_[in_flight_.front()].signal)
      retire_oldest();
    if (in_flight_.size() == kFrames) {
      timeline_->wait(frames_[in_flight_.front()].signal, "waiting for a stream's batch");
      retire_oldest();
    }
    size_t index = next_frame_;
    next_frame_ = (next_frame_ + 1) % kFrames;
    Frame &f = frames_[index];
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    d_.check(d_.vk.vkBeginCommandBuffer(f.command_buffer, &begin), "vkBeginCommandBuffer");
    if (f.query_pool)
      d_.vk.vkCmdResetQueryPool(f.command_buffer, f.query_pool, 0, 2 * kBatchLaunches);
    recording_ = index;
    return f;
  }

  /// Records a copy of `bytes` between two buffers and a barrier making it visible to the
  /// launches and copies after it and to the host.
  void record_copy(VkCommandBuffer cmd, VkBuffer from, uint64_t from_offset, VkBuffer to,
                   uint64_t to_offset, uint64_t bytes) {
    VkBufferCopy region{from_offset, to_offset, bytes};
    d_.vk.vkCmdCopyBuffer(cmd, from, to, 1, &region);
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                            VK_ACCESS_HOST_READ_BIT;
    d_.vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                               VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                   VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                               0, 1, &barrier, 0, nullptr, 0, nullptr);
  }

  /// Ends the batch being recorded (one is begun when only waits are pending) and submits it,
  /// followed by `extra` when set: it waits for the stream's previous submission and the
  /// pending events, and signals the timeline with the count of work queued.
  void submit(VkCommandBuffer extra) {
    if (!recording_)
      recording_frame(0, 0);
    size_t index = *recording_;
    Frame &f = frames_[index];
    recording_.reset();
    uint64_t value = queued_.load();
    if (value <= submitted_)
      value = queued_.fetch_add(1) + 1; // only waits: a value of its own
    std::vector<VkSemaphore> wait_semaphores;
    std::vector<uint64_t> wait_values;
    if (submitted_) {
      wait_semaphores.push_back(timeline_->semaphore);
      wait_values.push_back(submitted_);
    }
    for (auto &[timeline, v] : waits_) {
      wait_semaphores.push_back(timeline->semaphore);
      wait_values.push_back(v);
      f.waited.push_back(timeline);
    }
    waits_.clear();
    std::vector<VkPipelineStageFlags> stages(wait_semaphores.size(),
                                             VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
    VkCommandBuffer buffers[2] = {f.command_buffer, extra};
    VkTimelineSemaphoreSubmitInfo timeline_info{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
    timeline_info.waitSemaphoreValueCount = static_cast<uint32_t>(wait_values.size());
    timeline_info.pWaitSemaphoreValues = wait_values.data();
    timeline_info.signalSemaphoreValueCount = 1;
    timeline_info.pSignalSemaphoreValues = &value;
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.pNext = &timeline_info;
    submit.waitSemaphoreCount = static_cast<uint32_t>(wait_semaphores.size());
    submit.pWaitSemaphores = wait_semaphores.data();
    submit.pWaitDstStageMask = stages.data();
    submit.commandBufferCount = extra ? 2 : 1;
    submit.pCommandBuffers = buffers;
    submit.signalSemaphoreCount = 1;
    submit.pSignalSemaphores = &timeline_->semaphore;
    VkResult r = d_.vk.vkEndCommandBuffer(f.command_buffer);
    if (r == VK_SUCCESS) {
      std::lock_guard lock(d_.queue_mutex);
      r = d_.vk.vkQueueSubmit(d_.queue, 1, &submit, VK_NULL_HANDLE);
    }
    if (r != VK_SUCCESS) {
      // Nothing of the batch runs: drop it. Its tickets are never reached (the device failed;
      // the memory pool keeps what they cover).
      f.signal = 0;
      reset_frame(f);
      next_frame_ = index;
      d_.check(r, "vkQueueSubmit", ErrorKind::DeviceFailure);
    }
    f.signal = value;
    submitted_ = value;
    in_flight_.push_back(index);
    d_.raise_messages("vkQueueSubmit");
  }

  /// Submits what is recorded or pending and waits until the stream's work has completed, then
  /// retires every batch.
  void drain() {
    if (recording_ || !waits_.empty())
      submit(VK_NULL_HANDLE);
    if (in_flight_.empty())
      return;
    timeline_->wait(submitted_, "waiting for a stream");
    while (!in_flight_.empty())
      retire_oldest();
    d_.collect_deferred();
  }

  /// Retires the oldest batch in flight (completed): its launch times, what it held, its pools.
  void retire_oldest() {
    Frame &f = frames_[in_flight_.front()];
    in_flight_.pop_front();
    if (f.query_pool && f.launches) {
      std::vector<uint64_t> ticks(2 * f.launches);
      VkResult r = d_.vk.vkGetQueryPoolResults(
          d_.device, f.query_pool, 0, 2 * f.launches, ticks.size() * sizeof(uint64_t), ticks.data(),
          sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
      if (r == VK_SUCCESS)
        for (uint32_t i = 0; i < f.launches; ++i)
          completed_times_.push_back(double(ticks[2 * i + 1] - ticks[2 * i]) *
                                     d_.info.timestamp_period_ns);
    }
    reset_frame(f);
  }

  void reset_frame(Frame &f) {
    f.kernels.clear();
    for (Allocation *s : f.staging)
      d_.destroy_allocation(s);
    f.staging.clear();
    f.waited.clear();
    f.launches = 0;
    f.descriptors = 0;
    f.params_used = 0;
    f.signal = 0;
    d_.check(d_.vk.vkResetCommandPool(d_.device, f.command_pool, 0), "vkResetCommandPool");
    d_.check(d_.vk.vkResetDescriptorPool(d_.device, f.descriptor_pool, 0), "vkResetDescriptorPool");
  }

  std::shared_ptr<VulkanDevice::Impl> impl_;
  VulkanDevice::Impl &d_;
  std::shared_ptr<Timeline> timeline_;
  std::array<Frame, kFrames> frames_;
  std::deque<size_t> in_flight_; ///< submitted batches, oldest first
  std::optional<size_t> recording_;
  size_t next_frame_ = 0;
  std::atomic<uint64_t> &queued_; ///< timeline_->queued
  uint64_t submitted_ = 0;        ///< the value the last submission signals
  std::vector<std::pair<std::shared_ptr<Timeline>, uint64_t>> waits_;
  std::vector<double> completed_times_; ///< since the last synchronize()
  std::vector<double> last_times_;
};

//===- Graphs ---------------------------------------------------------------------------------===//

/// A graph recorded once into a reusable command buffer of its own, with its own descriptor
/// sets (bound at record time), query pool (one time per replay, for the whole graph: on
/// lavapipe a timestamp pair per dispatch costs more than the dispatch) and, for kernels whose
/// parameter block is a buffer, a host-visible parameter buffer. replay(stream) submits that
/// command buffer on the stream, after the stream's queued work and the events it waits for,
/// and waits for it (so the command buffer is never pending twice: any stream of the device may
/// replay it, one replay at a time). set_value() writes a buffer-held parameter block in place; a
/// changed push constant makes the next replay re-record the command buffer (the sets stay). The
/// graph holds a share of each recorded kernel's pipeline state.
class VulkanGraph final : public DeviceGraph {
public:
  explicit VulkanGraph(std::shared_ptr<VulkanDevice::Impl> impl) : impl_(std::move(impl)) {}
  ~VulkanGraph() override {
    VulkanDevice::Impl &d = *impl_;
    if (command_pool)
      d.vk.vkDestroyCommandPool(d.device, command_pool, nullptr);
    if (descriptor_pool)
      d.vk.vkDestroyDescriptorPool(d.device, descriptor_pool, nullptr);
    if (query_pool)
      d.vk.vkDestroyQueryPool(d.device, query_pool, nullptr);
    if (params)
      d.destroy_allocation(params);
  }

  void add_launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                  std::span<const LaunchArg> args) override {
    if (finished_)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("vulkan: cannot add a launch of kernel '{}' to a finished graph",
                              kernel.abi().name));
    launches_.push_back(prepare_launch(*impl_, kernel, num_workgroups, args));
  }

  void finish() override {
    finished_ = true;
    VulkanDevice::Impl &d = *impl_;
    if (launches_.empty())
      return;
    std::string what = fmt::format("building a graph of {} launches", launches_.size());
    uint64_t alignment = d.properties.limits.minStorageBufferOffsetAlignment;
    uint32_t sets = 0, descriptors = 0;
    uint64_t param_bytes = 0;
    param_offsets_.assign(launches_.size(), 0);
    for (size_t i = 0; i < launches_.size(); ++i) {
      const PreparedLaunch &p = launches_[i];
      if (p.num_bindings()) {
        ++sets;
        descriptors += p.num_bindings();
      }
      if (p.kernel->abi().param_block_in_buffer) {
        param_offsets_[i] = (param_bytes + alignment - 1) / alignment * alignment;
        param_bytes = param_offsets_[i] + std::max<uint64_t>(p.block.size(), 4);
      }
    }
    if (param_bytes) {
      params = d.create_allocation(param_bytes, d.staging_memory_type, true);
      for (size_t i = 0; i < launches_.size(); ++i) {
        PreparedLaunch &p = launches_[i];
        if (!p.kernel->abi().param_block_in_buffer)
          continue;
        std::memcpy(static_cast<uint8_t *>(params->mapped) + param_offsets_[i], p.block.data(),
                    p.block.size());
        p.buffers[p.kernel->abi().num_buffers] = {params->buffer, param_offsets_[i],
                                                  std::max<uint64_t>(p.block.size(), 4)};
      }
    }
    if (sets) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptors};
      VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      pool_info.maxSets = sets;
      pool_info.poolSizeCount = 1;
      pool_info.pPoolSizes = &size;
      d.check(d.vk.vkCreateDescriptorPool(d.device, &pool_info, nullptr, &descriptor_pool), what);
    }
    sets_.assign(launches_.size(), VK_NULL_HANDLE);
    for (size_t i = 0; i < launches_.size(); ++i) {
      const PreparedLaunch &p = launches_[i];
      if (!p.num_bindings())
        continue;
      VkDescriptorSetAllocateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      set_info.descriptorPool = descriptor_pool;
      set_info.descriptorSetCount = 1;
      set_info.pSetLayouts = &p.state->set_layout;
      d.check(d.vk.vkAllocateDescriptorSets(d.device, &set_info, &sets_[i]), what);
      write_descriptor_set(d, sets_[i], p.buffers);
    }
    if (d.info.timestamp_period_ns > 0) {
      VkQueryPoolCreateInfo query_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
      query_info.queryCount = 2;
      d.check(d.vk.vkCreateQueryPool(d.device, &query_info, nullptr, &query_pool), what);
    }
    VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool_info.queueFamilyIndex = d.queue_family;
    d.check(d.vk.vkCreateCommandPool(d.device, &pool_info, nullptr, &command_pool), what);
    VkCommandBufferAllocateInfo buffer_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    buffer_info.commandPool = command_pool;
    buffer_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    buffer_info.commandBufferCount = 1;
    d.check(d.vk.vkAllocateCommandBuffers(d.device, &buffer_info, &command_buffer), what);
    record();
  }

  void set_value(size_t launch, size_t param, std::span<const uint64_t> bits) override {
    if (launch >= launches_.size())
      throw Error(
          ErrorKind::InvalidArgument,
          fmt::format("vulkan: graph: no launch {} (the graph has {})", launch, launches_.size()));
    PreparedLaunch &p = launches_[launch];
    const codegen::KernelAbi &abi = p.kernel->abi();
    if (param >= abi.params.size() || abi.params[param].kind != codegen::ParamSlot::Value ||
        abi.params[param].type.lanes() != bits.size())
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("vulkan: graph launch {} (kernel '{}'): parameter {} is not a "
                              "value of {} lane(s)",
                              launch, abi.name, param, bits.size()));
    codegen::pack_value(abi.params[param], bits.data(), p.block.data());
    if (!finished_)
      return;
    if (abi.param_block_in_buffer) // replays wait for completion: the buffer is not in use
      std::memcpy(static_cast<uint8_t *>(params->mapped) + param_offsets_[launch], p.block.data(),
                  p.block.size());
    else
      dirty_ = true;
  }

  void replay(DeviceStream &stream) override {
    if (!finished_)
      throw Error(ErrorKind::InvalidArgument,
                  "vulkan: replay of a graph whose capture has not ended (end the capture first)");
    auto *s = dynamic_cast<VulkanStream *>(&stream);
    if (!s || s->owner() != impl_.get())
      throw Error(ErrorKind::InvalidArgument,
                  "vulkan: a graph replays on a stream of the device that recorded it");
    if (launches_.empty())
      return;
    VulkanDevice::Impl &d = *impl_;
    std::string what = fmt::format("the replay of a graph of {} launches", launches_.size());
    if (dirty_) {
      d.check(d.vk.vkResetCommandPool(d.device, command_pool, 0), what);
      record();
    }
    s->replay(command_buffer, query_pool, what);
  }

  size_t num_launches() const override { return launches_.size(); }

  VkCommandPool command_pool = VK_NULL_HANDLE;
  VkCommandBuffer command_buffer = VK_NULL_HANDLE;
  VkDescriptorPool descriptor_pool = VK_NULL_HANDLE;
  VkQueryPool query_pool = VK_NULL_HANDLE;
  Allocation *params = nullptr;

private:
  void record() {
    VulkanDevice::Impl &d = *impl_;
    std::string what = fmt::format("recording a graph of {} launches", launches_.size());
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    d.check(d.vk.vkBeginCommandBuffer(command_buffer, &begin), what);
    if (query_pool) {
      d.vk.vkCmdResetQueryPool(command_buffer, query_pool, 0, 2);
      d.vk.vkCmdWriteTimestamp(command_buffer, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, query_pool, 0);
    }
    for (size_t i = 0; i < launches_.size(); ++i)
      record_launch(d, command_buffer, launches_[i], sets_[i], VK_NULL_HANDLE, 0);
    if (query_pool)
      d.vk.vkCmdWriteTimestamp(command_buffer, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool, 1);
    d.check(d.vk.vkEndCommandBuffer(command_buffer), what);
    dirty_ = false;
  }

  std::shared_ptr<VulkanDevice::Impl> impl_;
  std::vector<PreparedLaunch> launches_;
  std::vector<VkDescriptorSet> sets_;
  std::vector<uint64_t> param_offsets_;
  bool finished_ = false;
  bool dirty_ = false;
};

std::unique_ptr<DeviceGraph> VulkanStream::create_graph() {
  return std::make_unique<VulkanGraph>(impl_);
}

} // namespace

std::unique_ptr<DeviceStream> VulkanDevice::create_stream() {
  auto stream = std::make_unique<VulkanStream>(impl_);
  std::lock_guard lock(impl_->allocations_mutex);
  std::erase_if(impl_->streams, [](const std::weak_ptr<Timeline> &t) { return t.expired(); });
  impl_->streams.push_back(stream->timeline());
  return stream;
}

void VulkanDevice::Impl::free_when_unused(Allocation *a) {
  Impl::DeferredFree pending{a, {}};
  {
    std::lock_guard lock(allocations_mutex);
    allocations.erase(a);
    for (const std::weak_ptr<Timeline> &weak : streams)
      if (std::shared_ptr<Timeline> t = weak.lock()) {
        uint64_t ticket = t->queued.load();
        if (ticket && t->value() < ticket)
          pending.tickets.emplace_back(weak, ticket);
      }
    if (!pending.tickets.empty()) {
      deferred.push_back(std::move(pending));
      return;
    }
  }
  destroy_allocation(a);
  collect_deferred();
}

void VulkanDevice::Impl::collect_deferred() {
  std::vector<Allocation *> unused;
  {
    std::lock_guard lock(allocations_mutex);
    if (deferred.empty())
      return;
    std::erase_if(deferred, [&](DeferredFree &f) {
      std::erase_if(f.tickets, [](const std::pair<std::weak_ptr<Timeline>, uint64_t> &t) {
        std::shared_ptr<Timeline> timeline = t.first.lock();
        return !timeline || timeline->value() >= t.second; // a stream is gone once it drained
      });
      if (!f.tickets.empty())
        return false;
      unused.push_back(f.allocation);
      return true;
    });
  }
  for (Allocation *a : unused)
    destroy_allocation(a);
}

} // namespace cubecc::runtime
