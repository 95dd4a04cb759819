//===- test_environment.cpp - Defaults for every test process that may open a Vulkan device ---===//
//
// Linked into the unit and e2e test executables, so that running them by hand, through ctest or
// through scripts/test.sh behaves the same:
//   - CUBECC_VULKAN_VALIDATION=1: the Khronos validation layers are on, and any message they
//     report fails the operation (docs/runtime.md);
//   - MESA_SHADER_CACHE_DISABLE=true: lavapipe compiles every pipeline, no state across runs;
//   - CUBECC_CACHE_DIR: a fresh folder of the process's own, removed at its exit, so that the cpu
//     device compiles every kernel (an object cached by an earlier build of a changed backend is
//     never reused) and tests write nothing under the user's ~/.cache;
// (a value already in the environment wins). LeakSanitizer's settings are lsan_defaults.cpp,
// linked next to this file.
//
//===-----------------------------------------------------------------------------------------===//
#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace {

struct VulkanTestDefaults {
  VulkanTestDefaults() {
    setenv("CUBECC_VULKAN_VALIDATION", "1", /*overwrite=*/0);
    setenv("MESA_SHADER_CACHE_DISABLE", "true", /*overwrite=*/0);
  }
} defaults;

struct CacheFolder {
  CacheFolder() {
    if (const char *set = std::getenv("CUBECC_CACHE_DIR"); set && *set)
      return; // the caller's (or the parent test process's) choice
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/cubecc-test-cache-XXXXXX";
    if (::mkdtemp(pattern.data())) {
      path = pattern;
      owner = ::getpid();
      setenv("CUBECC_CACHE_DIR", path.c_str(), 1);
    }
  }
  ~CacheFolder() {
    std::error_code ignored;
    if (!path.empty() && ::getpid() == owner) // not in a forked child
      std::filesystem::remove_all(path, ignored);
  }
  std::string path;
  pid_t owner = 0;
} cache_folder;

} // namespace
