//===- test_environment.cpp - Defaults for every test process that may open a Vulkan device ---===//
//
// Linked into the unit and e2e test executables, so that running them by hand, through ctest or
// through scripts/test.sh behaves the same:
//   - CUBECC_VULKAN_VALIDATION=1: the Khronos validation layers are on, and any message they
//     report fails the operation (docs/runtime.md);
//   - MESA_SHADER_CACHE_DISABLE=true: lavapipe compiles every pipeline, no state across runs;
// (a value already in the environment wins), and LeakSanitizer ignores allocations that
// lavapipe, LLVM, the Vulkan loader and the validation layer keep until exit; a leak in
// cubecc's own code still fails.
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

/// Read by LeakSanitizer at exit (when the tests are built with sanitizers).
extern "C" __attribute__((used)) const char *__lsan_default_suppressions() {
  return "leak:libvulkan_lvp.so\n"
         "leak:libLLVM\n"
         "leak:libvulkan.so\n"
         "leak:libVkLayer_khronos_validation.so\n";
}
