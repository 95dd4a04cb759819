/*===- vulkan_test_buffer.c - A VkBuffer with mapped host-visible memory, made as a framework would
 * -===*/
#include "vulkan_test_buffer.h"

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <stdio.h>
#include <string.h>

int test_vulkan_buffer_create(void *instance_pointer, void *physical_pointer, void *device_pointer,
                              void *get_instance_proc_addr, uint64_t bytes, test_vulkan_buffer *out,
                              char *error, size_t error_size) {
  VkInstance instance = (VkInstance)instance_pointer;
  VkPhysicalDevice physical = (VkPhysicalDevice)physical_pointer;
  VkDevice device = (VkDevice)device_pointer;
  PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)get_instance_proc_addr;
  PFN_vkGetDeviceProcAddr gdpa = (PFN_vkGetDeviceProcAddr)gipa(instance, "vkGetDeviceProcAddr");
  PFN_vkGetPhysicalDeviceMemoryProperties memory_properties =
      (PFN_vkGetPhysicalDeviceMemoryProperties)gipa(instance,
                                                    "vkGetPhysicalDeviceMemoryProperties");
  if (!gdpa || !memory_properties) {
    snprintf(error, error_size, "vkGetInstanceProcAddr found no vkGetDeviceProcAddr");
    return -1;
  }
  PFN_vkCreateBuffer create_buffer = (PFN_vkCreateBuffer)gdpa(device, "vkCreateBuffer");
  PFN_vkDestroyBuffer destroy_buffer = (PFN_vkDestroyBuffer)gdpa(device, "vkDestroyBuffer");
  PFN_vkGetBufferMemoryRequirements requirements_of =
      (PFN_vkGetBufferMemoryRequirements)gdpa(device, "vkGetBufferMemoryRequirements");
  PFN_vkAllocateMemory allocate = (PFN_vkAllocateMemory)gdpa(device, "vkAllocateMemory");
  PFN_vkFreeMemory free_memory = (PFN_vkFreeMemory)gdpa(device, "vkFreeMemory");
  PFN_vkBindBufferMemory bind = (PFN_vkBindBufferMemory)gdpa(device, "vkBindBufferMemory");
  PFN_vkMapMemory map = (PFN_vkMapMemory)gdpa(device, "vkMapMemory");
  PFN_vkUnmapMemory unmap = (PFN_vkUnmapMemory)gdpa(device, "vkUnmapMemory");

  VkBufferCreateInfo buffer_info;
  memset(&buffer_info, 0, sizeof buffer_info);
  buffer_info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  buffer_info.size = bytes;
  buffer_info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                      VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  buffer_info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkResult r = create_buffer(device, &buffer_info, NULL, &buffer);
  if (r != VK_SUCCESS) {
    snprintf(error, error_size, "vkCreateBuffer failed: %d", (int)r);
    return -1;
  }
  VkMemoryRequirements requirements;
  requirements_of(device, buffer, &requirements);
  VkPhysicalDeviceMemoryProperties properties;
  memory_properties(physical, &properties);
  const VkMemoryPropertyFlags wanted =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = UINT32_MAX;
  for (uint32_t i = 0; i < properties.memoryTypeCount && type == UINT32_MAX; ++i)
    if ((requirements.memoryTypeBits & (1u << i)) &&
        (properties.memoryTypes[i].propertyFlags & wanted) == wanted)
      type = i;
  if (type == UINT32_MAX) {
    destroy_buffer(device, buffer, NULL);
    snprintf(error, error_size, "no host-visible coherent memory type for the buffer");
    return -1;
  }
  VkMemoryAllocateInfo allocate_info;
  memset(&allocate_info, 0, sizeof allocate_info);
  allocate_info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  allocate_info.allocationSize = requirements.size;
  allocate_info.memoryTypeIndex = type;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void *mapped = NULL;
  if ((r = allocate(device, &allocate_info, NULL, &memory)) != VK_SUCCESS ||
      (r = bind(device, buffer, memory, 0)) != VK_SUCCESS ||
      (r = map(device, memory, 0, VK_WHOLE_SIZE, 0, &mapped)) != VK_SUCCESS) {
    if (memory)
      free_memory(device, memory, NULL);
    destroy_buffer(device, buffer, NULL);
    snprintf(error, error_size, "allocating, binding or mapping the memory failed: %d", (int)r);
    return -1;
  }
  out->buffer = (uint64_t)(uintptr_t)buffer;
  out->memory = (uint64_t)(uintptr_t)memory;
  out->mapped = mapped;
  out->bytes = bytes;
  out->device = device_pointer;
  out->destroy_buffer = (void *)destroy_buffer;
  out->free_memory = (void *)free_memory;
  out->unmap_memory = (void *)unmap;
  return 0;
}

void test_vulkan_buffer_destroy(test_vulkan_buffer *b) {
  if (!b->buffer)
    return;
  VkDevice device = (VkDevice)b->device;
  VkDeviceMemory memory = (VkDeviceMemory)(uintptr_t)b->memory;
  ((PFN_vkUnmapMemory)b->unmap_memory)(device, memory);
  ((PFN_vkDestroyBuffer)b->destroy_buffer)(device, (VkBuffer)(uintptr_t)b->buffer, NULL);
  ((PFN_vkFreeMemory)b->free_memory)(device, memory, NULL);
  b->buffer = 0;
}
