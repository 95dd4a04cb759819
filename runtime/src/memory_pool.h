//===- memory_pool.h - Device memory blocks with adaptive size classes and free lists ---------===//
//
// The pool behind Runtime::allocate. A request gets a block of its size class; a released block
// is cached and serves a later request without a driver call. Two policies (PoolOptions):
//   - Adaptive: a size seen for the first time gets a fine-grained class (8 per power of two, at
//     most 12.5% rounding); a size that recurs gets an exact class (rounded to 256 bytes), and a
//     generic block that served it is given back instead of cached, so the classes settle on the
//     sizes the workload actually uses. A cached block serves any request it covers with at most
//     a fine class's rounding to spare. Before a new block is allocated, cached blocks go back
//     while reserved bytes would exceed max_reserved_ratio x the peak requested bytes, so blocks
//     cached by one phase of a program (attention) do not pile up under the next (MLP).
//   - PowerOfTwo: the classic buckets, for comparison and as an option.
// Both release cached blocks beyond max_cached_bytes and those idle for idle_release_allocations
// allocations; trim() (and running out of device memory) gives them all back. One mutex guards
// everything: acquire and release may be called from any thread. Each first takes the device's
// mutex (Device::mutex), so that a block freed on one thread never reaches the device while
// another thread's Runtime call is using it.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/runtime/device.h"
#include "cubecc/runtime/memory_pool.h"

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

namespace cubecc::runtime {

class MemoryPool {
public:
  /// The smallest block, and the granule of exact classes.
  static constexpr uint64_t kMinBlockBytes = 256;

  explicit MemoryPool(std::shared_ptr<Device> device, PoolOptions options = {});
  MemoryPool(const MemoryPool &) = delete;
  MemoryPool &operator=(const MemoryPool &) = delete;
  /// Frees the cached blocks (live ones belong to Buffers, which keep the pool alive).
  ~MemoryPool();

  /// The power-of-two bucket of a request (at least kMinBlockBytes).
  static uint64_t power_of_two_bytes(uint64_t bytes);
  /// The fine-grained class of a request: 8 classes per power of two (at least 256-byte steps).
  static uint64_t fine_class_bytes(uint64_t bytes);
  /// The exact class of a request: rounded up to kMinBlockBytes.
  static uint64_t exact_class_bytes(uint64_t bytes);

  /// A block of at least `bytes`. Throws Error when the device has no memory left even after the
  /// cached blocks are freed.
  DeviceMemory acquire(uint64_t bytes);
  /// Takes back a block from acquire(). A block the pool did not hand out (or got back already)
  /// is a bug in cubecc: reported, then abort().
  void release(DeviceMemory memory);
  /// Gives every cached block back to the device.
  void trim();
  PoolStatistics statistics() const;
  const PoolOptions &options() const { return options_; }
  Device &device() { return *device_; }

private:
  struct CachedBlock;
  using Lru = std::list<CachedBlock>;                    ///< least recently freed first
  using BySize = std::multimap<uint64_t, Lru::iterator>; ///< block bytes -> cached block
  struct CachedBlock {
    DeviceMemory memory;
    uint64_t freed_at = 0; ///< the allocation count when it was cached
    BySize::iterator by_size;
  };

  uint64_t class_bytes_locked(uint64_t bytes);
  bool take_cached_locked(uint64_t bytes, uint64_t class_bytes, DeviceMemory &out);
  DeviceMemory allocate_from_device_locked(uint64_t class_bytes, uint64_t bytes);
  void free_oldest_cached_locked();
  void trim_locked();

  std::shared_ptr<Device> device_;
  const PoolOptions options_;
  mutable std::mutex mutex_;
  Lru lru_;
  BySize by_size_;
  std::unordered_map<void *, uint64_t> live_;       ///< handle -> requested bytes
  std::unordered_map<uint64_t, uint32_t> requests_; ///< exact class -> times requested
  std::set<uint64_t> classes_;                      ///< block sizes made
  PoolStatistics stats_;
};

} // namespace cubecc::runtime
