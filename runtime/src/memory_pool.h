//===- memory_pool.h - Size-bucketed device memory with free lists ----------------------------===//
//
// Requests are rounded up to a power of two of at least kMinBlockBytes; a released block goes on
// its bucket's free list and serves the next request of that bucket without a driver call. So a
// loop that allocates and frees same-sized buffers costs one device allocation, at the price of
// up to 2x memory for sizes just above a power of two. trim() (and running out of device memory)
// gives the cached blocks back.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/runtime/device.h"
#include "cubecc/runtime/runtime.h"

#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace cubecc::runtime {

class MemoryPool {
public:
  static constexpr uint64_t kMinBlockBytes = 256;

  explicit MemoryPool(std::shared_ptr<Device> device) : device_(std::move(device)) {}
  MemoryPool(const MemoryPool &) = delete;
  MemoryPool &operator=(const MemoryPool &) = delete;
  /// Frees the cached blocks (live ones belong to Buffers, which keep the pool alive).
  ~MemoryPool();

  /// The block size a request of `bytes` gets.
  static uint64_t bucket_bytes(uint64_t bytes);

  /// A block of bucket_bytes(bytes). Throws Error when the device has no memory left even after
  /// the cached blocks are freed.
  DeviceMemory acquire(uint64_t bytes);
  /// Puts a block from acquire() on its free list.
  void release(DeviceMemory memory);
  void trim();
  PoolStatistics statistics() const;
  Device &device() { return *device_; }

private:
  void trim_locked();

  std::shared_ptr<Device> device_;
  mutable std::mutex mutex_;
  std::map<uint64_t, std::vector<DeviceMemory>> free_; ///< bucket size -> free blocks
  PoolStatistics stats_;
};

} // namespace cubecc::runtime
