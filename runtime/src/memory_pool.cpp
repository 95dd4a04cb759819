//===- memory_pool.cpp - Size-bucketed device memory with free lists --------------------------===//
#include "memory_pool.h"

#include <algorithm>
#include <bit>

namespace cubecc::runtime {

MemoryPool::~MemoryPool() {
  std::lock_guard lock(mutex_);
  trim_locked();
}

uint64_t MemoryPool::bucket_bytes(uint64_t bytes) {
  return std::max(kMinBlockBytes, std::bit_ceil(bytes));
}

DeviceMemory MemoryPool::acquire(uint64_t bytes) {
  uint64_t bucket = bucket_bytes(bytes);
  std::lock_guard lock(mutex_);
  ++stats_.allocations;
  DeviceMemory memory;
  if (auto it = free_.find(bucket); it != free_.end() && !it->second.empty()) {
    memory = it->second.back();
    it->second.pop_back();
    ++stats_.reuses;
    stats_.bytes_cached -= bucket;
  } else {
    try {
      memory = device_->allocate(bucket);
    } catch (const Error &) {
      if (stats_.bytes_cached == 0)
        throw;
      trim_locked(); // make room from the cached blocks, then try once more
      memory = device_->allocate(bucket);
    }
    ++stats_.device_allocations;
  }
  stats_.bytes_live += bucket;
  stats_.peak_bytes_live = std::max(stats_.peak_bytes_live, stats_.bytes_live);
  stats_.peak_bytes_device =
      std::max(stats_.peak_bytes_device, stats_.bytes_live + stats_.bytes_cached);
  return memory;
}

void MemoryPool::release(DeviceMemory memory) {
  std::lock_guard lock(mutex_);
  stats_.bytes_live -= memory.bytes;
  stats_.bytes_cached += memory.bytes;
  free_[memory.bytes].push_back(memory);
}

void MemoryPool::trim() {
  std::lock_guard lock(mutex_);
  trim_locked();
}

void MemoryPool::trim_locked() {
  for (auto &[bucket, blocks] : free_) {
    for (DeviceMemory &block : blocks) {
      device_->free(block);
      ++stats_.device_frees;
      stats_.bytes_cached -= bucket;
    }
    blocks.clear();
  }
  free_.clear();
}

PoolStatistics MemoryPool::statistics() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

} // namespace cubecc::runtime
