//===- test_environment.cpp - Defaults for every test process that may open a Vulkan device ---===//
//
// Linked into the unit and e2e test executables, so that running them by hand, through ctest or
// through scripts/test.sh behaves the same:
//   - CUBECC_VULKAN_VALIDATION=1: the Khronos validation layers are on, and any message they
//     report fails the operation (docs/runtime.md);
//   - MESA_SHADER_CACHE_DISABLE=true: lavapipe compiles every pipeline, no state across runs;
// (a value already in the environment wins). LeakSanitizer's settings are lsan_defaults.cpp,
// linked next to this file.
//
//===-----------------------------------------------------------------------------------------===//
#include <cstdlib>

namespace {

struct VulkanTestDefaults {
  VulkanTestDefaults() {
    setenv("CUBECC_VULKAN_VALIDATION", "1", /*overwrite=*/0);
    setenv("MESA_SHADER_CACHE_DISABLE", "true", /*overwrite=*/0);
  }
} defaults;

} // namespace
