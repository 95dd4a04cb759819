//===- context.h - What a Runtime and its Streams share ---------------------------------------===//
//
// The context of one device (runtime.h): the device, the memory pool, the kernel cache and the
// environment. Private to the runtime (runtime.cpp; named_kernels.cpp).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/runtime/runtime.h"
#include "kernel_cache.h"
#include "memory_pool.h"

#include <memory>
#include <mutex>
#include <string_view>

namespace cubecc::runtime {

/// What a Runtime and all its Streams share: the device, the pool and the kernels. Lookups of
/// the kernel cache take `cache_mutex` only; a miss takes `compile_mutex` (one trace and compile
/// at a time, which also guards the environment), then looks again: two threads asking for one
/// kernel compile it once.
struct Context {
  Context(std::unique_ptr<Device> d, PoolOptions options)
      : device(std::move(d)), pool(std::make_shared<MemoryPool>(device, options)),
        cache(device->info().backend + ":" + device->info().name) {}

  std::shared_ptr<Device> device;
  std::shared_ptr<MemoryPool> pool;
  mutable std::mutex cache_mutex;
  KernelCache cache; ///< after the pool: its kernels go first, before memory and device

  mutable std::recursive_mutex compile_mutex; ///< recursive: a trace may load a kernel
  /// The environment, its options and statistics. Changed under both mutexes, so the compile
  /// path reads them under compile_mutex alone; readers that must not wait for a compile (the
  /// statistics, tuning records) take only this one, as does counting into the statistics.
  mutable std::mutex environment_mutex;
  std::shared_ptr<const EnvironmentSource> environment;
  EnvironmentOptions environment_options;
  EnvironmentStatistics environment_statistics;

  /// Adds `counted` to the environment's statistics.
  void count_environment(const EnvironmentStatistics &counted) {
    std::lock_guard lock(environment_mutex);
    environment_statistics.hits += counted.hits;
    environment_statistics.misses += counted.misses;
    environment_statistics.rejected += counted.rejected;
  }

  std::shared_ptr<const LoadedKernel> find(const ir::Hash128 &hash) {
    std::lock_guard lock(cache_mutex);
    auto found = cache.find(hash);
    if (found)
      ++cache.statistics.hits;
    return found;
  }
  std::shared_ptr<const LoadedKernel> find_keyed(std::string_view key) {
    std::lock_guard lock(cache_mutex);
    auto found = cache.find_keyed(key);
    if (found)
      ++cache.statistics.hits;
    return found;
  }
  void count(uint64_t KernelCacheStatistics::*counter) {
    std::lock_guard lock(cache_mutex);
    ++(cache.statistics.*counter);
  }
  void insert(const std::shared_ptr<const LoadedKernel> &loaded, std::string_view key = {}) {
    std::lock_guard lock(cache_mutex);
    cache.insert(loaded);
    if (!key.empty())
      cache.insert_keyed(key, loaded);
  }

  KernelHandle load(const ir::Kernel &kernel, std::string_view key = {});
  KernelHandle load_locked(const ir::Kernel &kernel, std::string_view key);
  template <class Trace> KernelHandle kernel(std::string_view key, Trace &&trace);
};

} // namespace cubecc::runtime
