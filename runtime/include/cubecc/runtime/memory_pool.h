//===- memory_pool.h - The memory pool's policy, limits and statistics
//-------------------------===//
//
// The types a Runtime's memory pool is configured with and reports through (Runtime::open,
// Runtime::pool_statistics, `cubecc devices --json`). The pool itself is runtime/src/memory_pool.h;
// docs/runtime.md describes how the policies choose block sizes and when cached blocks go back.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

namespace cubecc::runtime {

/// How the pool turns a request into a block size.
enum class PoolPolicy : uint8_t {
  /// Fine-grained classes (8 per power of two, so at most 12.5% rounding) for sizes seen once;
  /// an exact class (rounded to 256 bytes) for a size that recurs. A cached block serves any
  /// request it covers with at most 12.5% to spare, and cached blocks go back to the device
  /// before the reserved bytes grow past `max_reserved_ratio` x the peak requested bytes.
  Adaptive,
  /// Every request rounded up to a power of two; a cached block serves only its own bucket.
  PowerOfTwo,
};

/// "adaptive" or "power_of_two".
std::string_view pool_policy_name(PoolPolicy policy);

/// The pool's policy and limits. Every limit may be turned off (0, or the maximum for the cap).
struct PoolOptions {
  PoolPolicy policy = PoolPolicy::Adaptive;
  /// At most this many bytes of free blocks stay cached; beyond it the least recently freed go
  /// back to the device.
  uint64_t max_cached_bytes = std::numeric_limits<uint64_t>::max();
  /// A cached block not reused within this many allocations goes back to the device (0: never).
  /// Counted in allocations rather than seconds so that the pool needs no clock or thread and
  /// behaves the same on every run; a program that stops allocating calls trim().
  uint64_t idle_release_allocations = 4096;
  /// Adaptive only: before allocating a new block, cached blocks (least recently freed first) go
  /// back while the reserved bytes would exceed this ratio of the most bytes ever requested at
  /// once (or of the bytes requested now, if more). 0 turns it off.
  double max_reserved_ratio = 1.125;
  /// Adaptive only: a size gets an exact class once it has been requested this many times.
  uint32_t exact_class_after = 2;
};

/// What the memory pool did. "Requested" bytes are what the buffers asked for; "live" bytes are
/// the blocks they hold (at least as many); "reserved" bytes are all the device memory the pool
/// holds: live blocks and cached (free) ones. Exact at any moment.
struct PoolStatistics {
  uint64_t allocations = 0;        ///< buffers handed out
  uint64_t reuses = 0;             ///< of those, served from a cached block (pool hits)
  uint64_t device_allocations = 0; ///< blocks allocated from the device
  uint64_t device_frees = 0;       ///< blocks returned to the device (limits, trim, destruction)
  uint64_t bytes_requested = 0;    ///< asked for by live buffers
  uint64_t bytes_live = 0;         ///< blocks held by live buffers
  uint64_t bytes_cached = 0;       ///< free blocks kept for reuse
  uint64_t bytes_reserved = 0;     ///< bytes_live + bytes_cached: device memory the pool holds
  uint64_t peak_bytes_requested = 0;
  uint64_t peak_bytes_live = 0;
  uint64_t peak_bytes_reserved = 0;
  uint64_t size_classes = 0; ///< distinct block sizes the pool has made

  /// Reserved bytes that no buffer asked for: rounding of live blocks plus the cached blocks.
  uint64_t waste_bytes() const { return bytes_reserved - bytes_requested; }
  /// Pool hits per allocation (0 before the first).
  double hit_rate() const { return allocations ? double(reuses) / double(allocations) : 0.0; }
  /// Peak reserved over peak requested: what the pool's policy costs in device memory.
  double peak_reserved_ratio() const {
    return peak_bytes_requested ? double(peak_bytes_reserved) / double(peak_bytes_requested) : 0.0;
  }
};

} // namespace cubecc::runtime
