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
// everything: acquire and release may be called from any thread.
//
// The deletion queue: a block released while a stream may still have queued work that uses it
// waits in `pending_` with the ticket each such stream's mark() gave at release time (device.h),
// and becomes a cached block — or goes back to the device, or for adopted memory is let go —
// only once every one of those streams has reached its ticket. A request from a stream may take
// a pending block that only that stream's own work still uses (its work runs in order), so a
// loop of allocate/launch/free on one stream reuses its blocks at once. Freeing therefore never
// touches another stream's recording.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/runtime/device.h"
#include "cubecc/runtime/memory_pool.h"

#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

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

  /// Registers a stream whose queued work the deletion queue waits for; returns its id (never 0).
  uint64_t add_stream(DeviceStream &stream);
  /// Forgets a stream, once everything queued on it has finished (its tickets count as reached).
  void remove_stream(uint64_t id);

  /// A block of at least `bytes`, for use on stream `stream_id` (0: none in particular). Throws
  /// Error (OutOfMemory) when the device has no memory left even after the cached blocks are
  /// freed.
  DeviceMemory acquire(uint64_t bytes, uint64_t stream_id = 0);
  /// Takes back a block from acquire(): cached (or freed) once no stream's queued work uses it.
  /// A block the pool did not hand out (or got back already) is a bug in cubecc: reported, then
  /// abort().
  void release(DeviceMemory memory);
  /// Lets adopted memory go once no stream's queued work uses it: Device::release_adopted, then
  /// `callback` (if any), on the thread that finds the work done. Must not throw.
  void release_adopted(DeviceMemory memory, std::function<void()> callback) noexcept;
  /// Moves the blocks whose work has finished out of the deletion queue (a stream calls it after
  /// it synchronized). Adopted memory among them waits for release_ready(): collect() and
  /// acquire() run under a stream's lock, and a release callback is the caller's code, which may
  /// call the runtime (or take a lock of its own that a thread calling the runtime holds).
  void collect();
  /// Lets go the adopted memory that collect() or acquire() found done (its release callbacks
  /// run here); a stream calls it after its call let go of the stream's lock. Cheap when there
  /// is none.
  void release_ready() noexcept;
  /// Gives every cached block back to the device (blocks still in the deletion queue stay).
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

  /// A block in the deletion queue: the streams whose work may still use it, with the tickets.
  struct PendingBlock {
    DeviceMemory memory;
    uint64_t requested = 0; ///< bytes the buffer asked for (0 for adopted memory)
    std::vector<std::pair<uint64_t, uint64_t>> waits; ///< stream id, ticket
    bool adopted = false;
    std::function<void()> callback; ///< adopted memory: the caller's release callback
  };
  /// Adopted memory whose work is done, let go by release_ready() outside every lock.
  using Released = std::vector<PendingBlock>;

  uint64_t class_bytes_locked(uint64_t bytes);
  std::vector<std::pair<uint64_t, uint64_t>> waits_locked();
  bool reached_locked(const PendingBlock &block, uint64_t except_stream) const;
  /// Moves the finished blocks out of pending_: cached or freed, adopted ones into ready_.
  void collect_locked();
  bool take_pending_locked(uint64_t bytes, uint64_t class_bytes, uint64_t stream_id,
                           DeviceMemory &out);
  void settle_locked(DeviceMemory memory, uint64_t requested);
  void let_go(Released &released) noexcept;
  bool take_cached_locked(uint64_t bytes, uint64_t class_bytes, DeviceMemory &out);
  DeviceMemory allocate_from_device_locked(uint64_t class_bytes, uint64_t bytes);
  void free_oldest_cached_locked();
  void trim_locked();

  std::shared_ptr<Device> device_;
  const PoolOptions options_;
  mutable std::mutex mutex_;
  Lru lru_;
  BySize by_size_;
  std::unordered_map<void *, uint64_t> live_;                ///< handle -> requested bytes
  std::unordered_map<uint64_t, uint32_t> requests_;          ///< exact class -> times requested
  std::set<uint64_t> classes_;                               ///< block sizes made
  std::vector<std::pair<uint64_t, DeviceStream *>> streams_; ///< id -> registered stream
  uint64_t next_stream_id_ = 1;
  std::vector<PendingBlock> pending_; ///< the deletion queue
  Released ready_;                    ///< adopted memory done with, for release_ready()
  std::atomic<bool> has_ready_{false};
  uint64_t pending_bytes_ = 0; ///< its pool blocks (reported in bytes_cached)
  PoolStatistics stats_;
};

} // namespace cubecc::runtime
