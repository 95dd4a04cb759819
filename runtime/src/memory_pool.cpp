//===- memory_pool.cpp - Device memory blocks with adaptive size classes and free lists -------===//
#include "memory_pool.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>

namespace cubecc::runtime {

namespace {

/// How many distinct request sizes the adaptive policy counts before it forgets the ones seen
/// only once (a workload of ever-new sizes must not grow the table without bound).
constexpr size_t kMaxTrackedSizes = 4096;

uint64_t round_up(uint64_t bytes, uint64_t step) {
  return (bytes + step - 1) / step * step;
}

} // namespace

std::string_view pool_policy_name(PoolPolicy policy) {
  switch (policy) {
  case PoolPolicy::Adaptive:
    return "adaptive";
  case PoolPolicy::PowerOfTwo:
    return "power_of_two";
  }
  return "unknown";
}

MemoryPool::MemoryPool(std::shared_ptr<Device> device, PoolOptions options)
    : device_(std::move(device)), options_(options) {}

MemoryPool::~MemoryPool() {
  {
    std::lock_guard lock(mutex_);
    streams_.clear(); // every stream is gone, and with it its work: the whole queue is done
    collect_locked();
    trim_locked();
  }
  release_ready();
}

uint64_t MemoryPool::add_stream(DeviceStream &stream) {
  std::lock_guard lock(mutex_);
  uint64_t id = next_stream_id_++;
  streams_.emplace_back(id, &stream);
  return id;
}

void MemoryPool::remove_stream(uint64_t id) {
  {
    std::lock_guard lock(mutex_);
    std::erase_if(streams_, [&](const auto &entry) { return entry.first == id; });
    collect_locked();
  }
  release_ready();
}

std::vector<std::pair<uint64_t, uint64_t>> MemoryPool::waits_locked() {
  std::vector<std::pair<uint64_t, uint64_t>> waits;
  for (const auto &[id, stream] : streams_) {
    uint64_t ticket = stream->mark();
    if (!stream->reached(ticket))
      waits.emplace_back(id, ticket);
  }
  return waits;
}

bool MemoryPool::reached_locked(const PendingBlock &block, uint64_t except_stream) const {
  for (const auto &[id, ticket] : block.waits) {
    if (id == except_stream)
      continue;
    auto stream = std::find_if(streams_.begin(), streams_.end(),
                               [&](const auto &entry) { return entry.first == id; });
    if (stream != streams_.end() && !stream->second->reached(ticket))
      return false; // a stream that is gone finished its work before it went
  }
  return true;
}

void MemoryPool::collect_locked() {
  std::erase_if(pending_, [&](PendingBlock &block) {
    if (!reached_locked(block, 0))
      return false;
    if (block.adopted) {
      ready_.push_back(std::move(block)); // never counted: the memory is the caller's
      has_ready_.store(true, std::memory_order_release);
    } else {
      pending_bytes_ -= block.memory.bytes;
      settle_locked(block.memory, block.requested);
    }
    return true;
  });
  stats_.bytes_reserved = stats_.bytes_live + stats_.bytes_cached + pending_bytes_;
}

void MemoryPool::let_go(Released &released) noexcept {
  for (PendingBlock &block : released) {
    { device_->release_adopted(block.memory); }
    if (block.callback)
      block.callback();
  }
  released.clear();
}

bool MemoryPool::take_pending_locked(uint64_t bytes, uint64_t class_bytes, uint64_t stream_id,
                                     DeviceMemory &out) {
  if (stream_id == 0)
    return false;
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    uint64_t size = it->memory.bytes;
    bool fits = options_.policy == PoolPolicy::PowerOfTwo
                    ? size == class_bytes
                    : size >= std::max<uint64_t>(bytes, 1) && size <= fine_class_bytes(bytes);
    if (it->adopted || !fits || !reached_locked(*it, stream_id))
      continue;
    out = it->memory;
    pending_bytes_ -= size;
    pending_.erase(it);
    return true;
  }
  return false;
}

void MemoryPool::collect() {
  std::lock_guard lock(mutex_);
  collect_locked();
}

void MemoryPool::release_ready() noexcept {
  if (!has_ready_.load(std::memory_order_acquire))
    return;
  Released released;
  {
    std::lock_guard lock(mutex_);
    released.swap(ready_);
    has_ready_.store(false, std::memory_order_relaxed);
  }
  let_go(released);
}

uint64_t MemoryPool::power_of_two_bytes(uint64_t bytes) {
  return std::max(kMinBlockBytes, std::bit_ceil(bytes));
}

uint64_t MemoryPool::fine_class_bytes(uint64_t bytes) {
  if (bytes <= kMinBlockBytes)
    return kMinBlockBytes;
  return round_up(bytes, std::max(kMinBlockBytes, std::bit_ceil(bytes) / 16));
}

uint64_t MemoryPool::exact_class_bytes(uint64_t bytes) {
  return std::max(kMinBlockBytes, round_up(bytes, kMinBlockBytes));
}

uint64_t MemoryPool::class_bytes_locked(uint64_t bytes) {
  if (options_.policy == PoolPolicy::PowerOfTwo)
    return power_of_two_bytes(bytes);
  uint64_t exact = exact_class_bytes(bytes);
  if (requests_.size() >= kMaxTrackedSizes && !requests_.contains(exact))
    std::erase_if(requests_, [&](const auto &entry) { return entry.second < 2; });
  uint32_t &seen = requests_[exact];
  seen = std::min<uint32_t>(seen + 1, 1u << 30);
  return seen >= options_.exact_class_after ? exact : fine_class_bytes(bytes);
}

bool MemoryPool::take_cached_locked(uint64_t bytes, uint64_t class_bytes, DeviceMemory &out) {
  BySize::iterator it;
  if (options_.policy == PoolPolicy::PowerOfTwo) {
    it = by_size_.find(class_bytes);
  } else {
    // The smallest cached block that covers the request, if it spares at most a fine class's
    // rounding.
    it = by_size_.lower_bound(std::max<uint64_t>(bytes, 1));
    if (it != by_size_.end() && it->first > fine_class_bytes(bytes))
      it = by_size_.end();
  }
  if (it == by_size_.end())
    return false;
  out = it->second->memory;
  lru_.erase(it->second);
  by_size_.erase(it);
  stats_.bytes_cached -= out.bytes;
  return true;
}

void MemoryPool::free_oldest_cached_locked() {
  CachedBlock &oldest = lru_.front();
  DeviceMemory memory = oldest.memory;
  by_size_.erase(oldest.by_size);
  lru_.pop_front();
  stats_.bytes_cached -= memory.bytes;
  ++stats_.device_frees;
  device_->free(memory);
}

DeviceMemory MemoryPool::allocate_from_device_locked(uint64_t class_bytes, uint64_t bytes) {
  if (options_.policy == PoolPolicy::Adaptive && options_.max_reserved_ratio > 0) {
    uint64_t peak = std::max(stats_.peak_bytes_requested, stats_.bytes_requested + bytes);
    auto limit = static_cast<uint64_t>(options_.max_reserved_ratio * double(peak));
    while (!lru_.empty() && stats_.bytes_live + stats_.bytes_cached + class_bytes > limit)
      free_oldest_cached_locked();
  }
  DeviceMemory memory;
  try {
    memory = device_->allocate(class_bytes);
  } catch (const Error &) {
    if (lru_.empty())
      throw;
    trim_locked(); // make room from the cached blocks, then try once more
    memory = device_->allocate(class_bytes);
  }
  ++stats_.device_allocations;
  classes_.insert(class_bytes);
  stats_.size_classes = classes_.size();
  return memory;
}

DeviceMemory MemoryPool::acquire(uint64_t bytes, uint64_t stream_id) {
  std::lock_guard lock(mutex_);
  if (!pending_.empty())
    collect_locked();                          // let go by the caller's release_ready()
  const uint64_t now = stats_.allocations + 1; // this allocation, if it succeeds
  if (options_.idle_release_allocations > 0)
    while (!lru_.empty() && now - lru_.front().freed_at > options_.idle_release_allocations)
      free_oldest_cached_locked();

  uint64_t class_bytes = class_bytes_locked(bytes);
  DeviceMemory memory;
  if (take_cached_locked(bytes, class_bytes, memory) ||
      take_pending_locked(bytes, class_bytes, stream_id, memory))
    ++stats_.reuses;
  else
    memory = allocate_from_device_locked(class_bytes, bytes);

  if (!live_.emplace(memory.handle, bytes).second) {
    std::fprintf(stderr,
                 "cubecc: internal error (a bug in cubecc, %s:%d): the memory pool handed "
                 "out a block that is already live\n",
                 __FILE__, __LINE__);
    std::abort();
  }
  ++stats_.allocations;
  stats_.bytes_requested += bytes;
  stats_.bytes_live += memory.bytes;
  stats_.bytes_reserved = stats_.bytes_live + stats_.bytes_cached + pending_bytes_;
  stats_.peak_bytes_requested = std::max(stats_.peak_bytes_requested, stats_.bytes_requested);
  stats_.peak_bytes_live = std::max(stats_.peak_bytes_live, stats_.bytes_live);
  stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
  return memory;
}

void MemoryPool::release(DeviceMemory memory) {
  std::lock_guard lock(mutex_);
  auto live = live_.find(memory.handle);
  if (live == live_.end()) {
    std::fprintf(stderr,
                 "cubecc: internal error (a bug in cubecc, %s:%d): a block of %llu bytes "
                 "came back to the memory pool that it did not hand out or got back "
                 "already\n",
                 __FILE__, __LINE__, static_cast<unsigned long long>(memory.bytes));
    std::abort();
  }
  uint64_t requested = live->second;
  live_.erase(live);
  stats_.bytes_requested -= requested;
  stats_.bytes_live -= memory.bytes;
  if (auto waits = waits_locked(); !waits.empty()) {
    pending_.push_back(PendingBlock{memory, requested, std::move(waits), false, {}});
    pending_bytes_ += memory.bytes;
  } else {
    settle_locked(memory, requested);
  }
  stats_.bytes_reserved = stats_.bytes_live + stats_.bytes_cached + pending_bytes_;
}

void MemoryPool::release_adopted(DeviceMemory memory, std::function<void()> callback) noexcept {
  {
    std::lock_guard lock(mutex_);
    PendingBlock block{memory, 0, waits_locked(), true, std::move(callback)};
    if (block.waits.empty()) {
      ready_.push_back(std::move(block));
      has_ready_.store(true, std::memory_order_release);
    } else {
      pending_.push_back(std::move(block)); // not counted: the memory is the caller's
    }
  }
  release_ready();
}

void MemoryPool::settle_locked(DeviceMemory memory, uint64_t requested) {
  // A generic block that served a size which now has an exact class goes back: the next request
  // of that size gets a block without the rounding.
  bool refine = false;
  if (options_.policy == PoolPolicy::Adaptive && memory.bytes > exact_class_bytes(requested)) {
    auto seen = requests_.find(exact_class_bytes(requested));
    refine = seen != requests_.end() && seen->second >= options_.exact_class_after;
  }
  if (refine || options_.max_cached_bytes < memory.bytes) {
    ++stats_.device_frees;
    device_->free(memory);
  } else {
    while (stats_.bytes_cached + memory.bytes > options_.max_cached_bytes)
      free_oldest_cached_locked();
    auto entry = lru_.insert(lru_.end(), CachedBlock{memory, stats_.allocations, {}});
    entry->by_size = by_size_.emplace(memory.bytes, entry);
    stats_.bytes_cached += memory.bytes;
  }
}

void MemoryPool::trim() {
  std::lock_guard lock(mutex_);
  trim_locked();
}

void MemoryPool::trim_locked() {
  while (!lru_.empty())
    free_oldest_cached_locked();
  stats_.bytes_reserved = stats_.bytes_live + stats_.bytes_cached + pending_bytes_;
}

PoolStatistics MemoryPool::statistics() const {
  std::lock_guard lock(mutex_);
  PoolStatistics stats = stats_;
  stats.bytes_cached += pending_bytes_; // blocks in the deletion queue are free, not yet reusable
  return stats;
}

} // namespace cubecc::runtime
