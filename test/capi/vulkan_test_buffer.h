/*===- vulkan_test_buffer.h - A VkBuffer with mapped host-visible memory, made as a framework would
 *-===
 *
 * The tests of external memory make their own VkBuffer on the runtime's VkDevice (from its
 * handles: cubecc_runtime_vulkan_handles, VulkanDevice::handles) through the loader's
 * vkGetInstanceProcAddr they are given, bind host-visible coherent memory and map it, so that
 * they can check what a kernel wrote by reading their own allocation. Plain C, for the C and C++
 * tests.
 *
 *===--------------------------------------------------------------------------------------------===*/
#ifndef CUBECC_TEST_VULKAN_TEST_BUFFER_H
#define CUBECC_TEST_VULKAN_TEST_BUFFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct test_vulkan_buffer {
  uint64_t buffer; /**< the VkBuffer */
  uint64_t memory; /**< its VkDeviceMemory */
  void *mapped;    /**< the whole buffer, mapped */
  uint64_t bytes;
  void *device;
  void *destroy_buffer, *free_memory, *unmap_memory; /**< the PFNs needed to destroy it */
} test_vulkan_buffer;

/** Makes a storage + transfer VkBuffer of `bytes` with host-visible coherent memory, mapped.
 *  Returns 0, or -1 with a message in `error`. */
int test_vulkan_buffer_create(void *instance, void *physical_device, void *device,
                              void *get_instance_proc_addr, uint64_t bytes, test_vulkan_buffer *out,
                              char *error, size_t error_size);
void test_vulkan_buffer_destroy(test_vulkan_buffer *buffer);

#ifdef __cplusplus
}
#endif

#endif
